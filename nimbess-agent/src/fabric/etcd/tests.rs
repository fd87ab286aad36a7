//! Unit tests of the etcd client's key ranges and store URLs.

use super::*;

#[test]
fn prefix_end_is_the_next_prefix() {
    assert_eq!(prefix_end("/nimbess/"), b"/nimbess0".to_vec());
    assert_eq!(prefix_end("abc"), b"abd".to_vec());
    assert_eq!(prefix_end(""), vec![0]);
}

#[test]
fn store_urls() {
    let eps = parse_store("etcd://10.0.0.1:2379,10.0.0.2:2379").expect("two endpoints");
    assert_eq!(eps.len(), 2);
    assert!(parse_store("http://10.0.0.1:2379").is_err());
    assert!(parse_store("etcd://").is_err());
    assert!(parse_store("etcd://host").is_err());
}
