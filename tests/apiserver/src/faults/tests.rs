//! Unit tests of fault rules and request counts.

use super::*;

#[test]
fn failures_are_consumed() {
    let f = Faults::default();
    f.fail_next("patch", "widgets", 2, 503);
    assert_eq!(f.decide("get", "widgets").fail, None);
    assert_eq!(f.decide("patch", "widgets").fail, Some(503));
    assert_eq!(f.decide("patch", "widgets").fail, Some(503));
    assert_eq!(f.decide("patch", "widgets").fail, None);
    f.expire_next_watch("*");
    assert!(!f.decide("list", "pods").expire_watch);
    assert!(f.decide("watch", "pods").expire_watch);
    assert!(!f.decide("watch", "pods").expire_watch);
}

#[test]
fn counts_with_wildcards() {
    let r = Requests::default();
    r.record("patch", "widgets");
    r.record("patch", "widgets/status");
    r.record("get", "widgets");
    assert_eq!(r.count("patch", "widgets"), 1);
    assert_eq!(r.count("*", "widgets"), 2);
    assert_eq!(r.writes("widgets"), 2);
    r.reset();
    assert_eq!(r.count("*", "*"), 0);
}
