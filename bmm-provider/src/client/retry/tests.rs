use std::time::Duration;

use super::*;

fn at(s: &str) -> jiff::Timestamp {
    s.parse().expect("timestamp")
}

#[test]
fn retry_after_reads_seconds_and_http_dates() {
    let now = at("2015-10-21T07:27:30Z");
    assert_eq!(retry_after("120", now), Some(Duration::from_secs(120)));
    assert_eq!(retry_after(" 0 ", now), Some(Duration::ZERO));
    assert_eq!(
        retry_after("Wed, 21 Oct 2015 07:28:00 GMT", now),
        Some(Duration::from_secs(30))
    );
    // A date already past: retry at once.
    assert_eq!(
        retry_after("Wed, 21 Oct 2015 07:00:00 GMT", now),
        Some(Duration::ZERO)
    );
    assert_eq!(retry_after("soon", now), None);
    assert_eq!(retry_after("-5", now), None);
}

#[test]
fn honouring_waits_at_least_what_the_server_asked_within_the_cap() {
    let policy = RetryPolicy {
        max_attempts: 8,
        base: Duration::from_millis(200),
        cap: Duration::from_secs(60),
    };
    for unit in [0.0, 0.5, 0.999] {
        // Without a hint: the jittered backoff.
        assert_eq!(policy.honouring(0, unit, None), policy.delay(0, unit));
        // A hint longer than the backoff wins.
        assert_eq!(
            policy.honouring(0, unit, Some(Duration::from_secs(3))),
            Duration::from_secs(3)
        );
        // A shorter hint does not shorten the backoff.
        assert_eq!(
            policy.honouring(5, unit, Some(Duration::from_millis(1))),
            policy.delay(5, unit)
        );
        // Never beyond the cap.
        assert_eq!(
            policy.honouring(0, unit, Some(Duration::from_secs(3600))),
            Duration::from_secs(60)
        );
    }
}
