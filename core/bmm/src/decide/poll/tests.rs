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
