//! Statuses whose messages stay small: a message echoing a client's value (an id, a pattern, a
//! document) is cut to [`MAX_STATUS_MESSAGE`] bytes, so `grpc-message` stays within what
//! standard clients accept and a megabyte of input is never sent back.

/// The longest status message the runtime sends, in bytes (before percent-encoding).
pub const MAX_STATUS_MESSAGE: usize = 1024;

/// `message`, cut at a character boundary to at most `max` bytes, saying how much was cut.
pub fn truncate_message(message: &str, max: usize) -> String {
    if message.len() <= max {
        return message.to_owned();
    }
    let note = format!("… ({} bytes cut)", message.len());
    let mut end = max.saturating_sub(note.len());
    while !message.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}{note}", &message[..end])
}

/// A status with `message` cut to [`MAX_STATUS_MESSAGE`] bytes.
pub fn bounded_status(code: tonic::Code, message: impl AsRef<str>) -> tonic::Status {
    tonic::Status::new(code, truncate_message(message.as_ref(), MAX_STATUS_MESSAGE))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_messages_are_cut_at_a_character_boundary_and_say_so() {
        assert_eq!(truncate_message("short", 10), "short");
        let long = format!("no such id {}", "é".repeat(2000));
        let cut = truncate_message(&long, 100);
        assert!(cut.len() <= 100, "{}", cut.len());
        assert!(cut.starts_with("no such id é"), "{cut}");
        assert!(cut.ends_with("… (4011 bytes cut)"), "{cut}");
        let status = bounded_status(tonic::Code::NotFound, &long);
        assert!(status.message().len() <= MAX_STATUS_MESSAGE);
        assert_eq!(status.code(), tonic::Code::NotFound);
    }
}
