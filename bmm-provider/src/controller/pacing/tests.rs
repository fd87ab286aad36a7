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
