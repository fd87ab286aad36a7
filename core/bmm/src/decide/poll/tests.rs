//! Unit tests of the poll spacing.

use std::time::Duration;

use super::*;

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
fn with_an_expectation_the_poll_lands_when_it_is_due() {
    let (poll, cap) = (Duration::from_secs(5), Duration::from_secs(30));
    let e = Some(Duration::from_secs(60));
    let at = |age: u64, unit: f64| poll_expecting(poll, cap, Duration::from_secs(age), e, unit);
    // Created just now: one poll at 60 s (up to 2% late), instead of ten.
    assert_eq!(at(0, 0.0), Duration::from_secs(60));
    assert_eq!(at(0, 1.0), Duration::from_millis(61_200));
    assert_eq!(at(45, 0.0), Duration::from_secs(15));
    // Overdue: the interval, backing off with the overdue time up to the cap.
    assert_eq!(at(60, 0.5), Duration::from_secs(5));
    assert_eq!(at(160, 0.5), Duration::from_secs(25));
    assert_eq!(at(3600, 0.5), Duration::from_secs(30));
    // No expectation yet: the age schedule.
    assert_eq!(
        poll_expecting(poll, cap, Duration::from_secs(60), None, 0.5),
        poll_after(poll, cap, Duration::from_secs(60), 0.5)
    );
}

proptest::proptest! {
    /// Before it is expected, a poll never comes early nor more than 2% of the expected time
    /// late; after, it comes within the interval and the cap (±10%).
    #[test]
    fn polls_expecting_are_never_early_and_bounded(
        age_ms in 0u64..600_000,
        expected_ms in 1u64..600_000,
        poll_ms in 1u64..60_000,
        cap_ms in 1u64..120_000,
        unit in 0.0f64..1.0,
    ) {
        let (age, e) = (Duration::from_millis(age_ms), Duration::from_millis(expected_ms));
        let (poll, cap) = (Duration::from_millis(poll_ms), Duration::from_millis(cap_ms));
        let wait = poll_expecting(poll, cap, age, Some(e), unit);
        if age < e {
            proptest::prop_assert!(age + wait >= e);
            proptest::prop_assert!(age + wait <= e + e.mul_f64(0.02) + Duration::from_nanos(1));
        } else {
            proptest::prop_assert!(wait >= poll.min(cap.max(poll)).mul_f64(0.9) - Duration::from_nanos(1));
            proptest::prop_assert!(wait <= cap.max(poll).mul_f64(1.1) + Duration::from_nanos(1));
        }
    }
}

#[test]
fn provisioning_samples_expect_the_shortest_recent_time_and_say_what_is_news() {
    let secs = Duration::from_secs;
    let mut samples = ProvisioningSamples::default();
    assert_eq!(samples.expected(), None);
    assert!(samples.record(secs(62)), "the first expectation is news");
    assert_eq!(samples.expected(), Some(secs(62)));
    assert!(!samples.record(secs(60)), "a small drop is no news");
    assert_eq!(samples.expected(), Some(secs(60)));
    assert!(samples.record(secs(40)), "a drop by more than a tenth is");
    assert!(!samples.record(secs(90)), "a slower one is no news");
    // Only the last KEPT count: the fast one is forgotten.
    for _ in 0..ProvisioningSamples::KEPT {
        samples.record(secs(61));
    }
    assert_eq!(samples.expected(), Some(secs(61)));
}
