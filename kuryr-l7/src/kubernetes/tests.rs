//! The Event note limit: kube-apiserver counts bytes.

use super::{EVENT_NOTE_LIMIT, event_note};

#[test]
fn an_event_note_is_cut_to_1024_bytes_at_a_character_boundary() {
    assert_eq!(event_note("short"), "short");
    let ascii = "a".repeat(EVENT_NOTE_LIMIT + 10);
    assert_eq!(event_note(&ascii).len(), EVENT_NOTE_LIMIT);
    // 700 two-byte characters: 700 characters (under a 1024-character cut) but 1400 bytes.
    let accented = "é".repeat(700);
    let note = event_note(&accented);
    assert_eq!(note.len(), EVENT_NOTE_LIMIT);
    assert!(accented.starts_with(&note));
    // A three-byte character across the limit is left out whole.
    let mixed = format!("{}€tail", "a".repeat(EVENT_NOTE_LIMIT - 1));
    assert_eq!(event_note(&mixed), "a".repeat(EVENT_NOTE_LIMIT - 1));
}
