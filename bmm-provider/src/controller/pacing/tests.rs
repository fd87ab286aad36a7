use std::time::{Duration, Instant};

use super::*;

#[test]
fn an_unchanged_reconcile_waits_for_its_due_time() {
    let pacing = Pacing::default();
    let t0 = Instant::now();
    assert_eq!(pacing.unchanged("ns/a", 1, t0), None, "never reconciled");
    pacing.record("ns/a", 1, Next::After(Duration::from_secs(10)), t0);
    assert_eq!(
        pacing.unchanged("ns/a", 1, t0 + Duration::from_secs(4)),
        Some(Next::After(Duration::from_secs(6)))
    );
    assert_eq!(
        pacing.unchanged("ns/a", 1, t0 + Duration::from_secs(10)),
        None,
        "due"
    );
    assert_eq!(
        pacing.unchanged("ns/a", 2, t0 + Duration::from_secs(1)),
        None,
        "inputs changed"
    );
    assert_eq!(pacing.unchanged("ns/b", 1, t0), None, "another object");
    pacing.record("ns/a", 3, Next::Change, t0);
    assert_eq!(
        pacing.unchanged("ns/a", 3, t0 + Duration::from_secs(3600)),
        Some(Next::Change)
    );
    pacing.forget("ns/a");
    assert_eq!(pacing.unchanged("ns/a", 3, t0), None);
}

#[test]
fn fingerprints_follow_the_inputs() {
    let a = fingerprint(&("spec", 1, Some("x")));
    assert_eq!(a, fingerprint(&("spec", 1, Some("x"))));
    assert_ne!(a, fingerprint(&("spec", 1, None::<&str>)));
}

#[test]
fn polls_are_spaced_by_a_quarter_of_the_age_within_bounds() {
    let (poll, cap) = (Duration::from_secs(5), Duration::from_secs(30));
    let at = |age: u64, unit: f64| poll_after(poll, cap, Duration::from_secs(age), unit);
    // Young: the configured interval, jittered ±10%.
    assert_eq!(at(0, 0.5), Duration::from_secs(5));
    assert_eq!(at(8, 0.0), Duration::from_millis(4500));
    assert_eq!(at(8, 1.0), Duration::from_millis(5500));
    // Older: a quarter of the age.
    assert_eq!(at(60, 0.5), Duration::from_secs(15));
    // Old: the cap.
    assert_eq!(at(3600, 0.5), Duration::from_secs(30));
    // A cap below the interval does not shorten it.
    assert_eq!(
        poll_after(poll, Duration::from_secs(1), Duration::from_secs(3600), 0.5),
        poll
    );
    // Polling from creation to ready after 60 s takes few polls and sees it at most 25% late.
    let (mut age, mut polls) = (Duration::ZERO, 0);
    while age < Duration::from_secs(60) {
        age += at(age.as_secs(), 0.5);
        polls += 1;
    }
    assert!(polls <= 10, "{polls} polls");
    assert!(age <= Duration::from_secs(75), "seen at {age:?}");
}

#[test]
fn age_is_measured_from_an_rfc3339_time() {
    let now: jiff::Timestamp = "2026-01-01T00:01:00Z".parse().unwrap();
    assert_eq!(
        age_since(Some("2026-01-01T00:00:00Z"), now),
        Duration::from_secs(60)
    );
    assert_eq!(age_since(Some("2026-01-01T00:02:00Z"), now), Duration::ZERO);
    assert_eq!(age_since(Some("yesterday"), now), Duration::ZERO);
    assert_eq!(age_since(None, now), Duration::ZERO);
}
