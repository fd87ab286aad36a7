use std::time::{Duration, Instant};

use super::*;

#[test]
fn an_unchanged_reconcile_waits_for_its_due_time() {
    let pacing = Pacing::default();
    let t0 = Instant::now();
    assert_eq!(
        pacing.unchanged("ns/a", 1, t0, None),
        None,
        "never reconciled"
    );
    pacing.record("ns/a", 1, Next::After(Duration::from_secs(10)), t0);
    assert_eq!(
        pacing.unchanged("ns/a", 1, t0 + Duration::from_secs(4), None),
        Some(Next::After(Duration::from_secs(6)))
    );
    assert_eq!(
        pacing.unchanged("ns/a", 1, t0 + Duration::from_secs(10), None),
        None,
        "due"
    );
    assert_eq!(
        pacing.unchanged("ns/a", 2, t0 + Duration::from_secs(1), None),
        None,
        "inputs changed"
    );
    assert_eq!(
        pacing.unchanged("ns/b", 1, t0, None),
        None,
        "another object"
    );
    pacing.record("ns/a", 3, Next::Change, t0);
    assert_eq!(
        pacing.unchanged("ns/a", 3, t0 + Duration::from_secs(3600), None),
        Some(Next::Change)
    );
    pacing.forget("ns/a");
    assert_eq!(pacing.unchanged("ns/a", 3, t0, None), None);
}

#[test]
fn something_expected_sooner_brings_the_reconcile_forward() {
    let pacing = Pacing::default();
    let t0 = Instant::now();
    let s = |secs| Some(t0 + Duration::from_secs(secs));
    pacing.record("ns/a", 1, Next::After(Duration::from_secs(30)), t0);
    assert_eq!(
        pacing.unchanged("ns/a", 1, t0, s(12)),
        Some(Next::After(Duration::from_secs(12)))
    );
    assert_eq!(
        pacing.unchanged("ns/a", 1, t0 + Duration::from_secs(12), s(12)),
        None
    );
    // Expected later than the requeue: the requeue.
    assert_eq!(
        pacing.unchanged("ns/a", 1, t0, s(50)),
        Some(Next::After(Duration::from_secs(30)))
    );
    // Waiting for a change: something expected still brings it forward.
    pacing.record("ns/a", 2, Next::Change, t0);
    assert_eq!(
        pacing.unchanged("ns/a", 2, t0, s(5)),
        Some(Next::After(Duration::from_secs(5)))
    );
    // Expected before the last reconcile: already looked at, no loop.
    pacing.record(
        "ns/a",
        3,
        Next::After(Duration::from_secs(30)),
        t0 + Duration::from_secs(5),
    );
    assert_eq!(
        pacing.unchanged("ns/a", 3, t0 + Duration::from_secs(6), s(4)),
        Some(Next::After(Duration::from_secs(29)))
    );
    // Expected after the last reconcile but already past (learnt late): reconcile now, once.
    let later = t0 + Duration::from_secs(20);
    assert_eq!(pacing.unchanged("ns/a", 3, later, s(10)), None);
    pacing.record("ns/a", 3, Next::After(Duration::from_secs(5)), later);
    assert_eq!(
        pacing.unchanged("ns/a", 3, later + Duration::from_secs(1), s(10)),
        Some(Next::After(Duration::from_secs(4)))
    );
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
