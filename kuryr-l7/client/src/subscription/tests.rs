use nephrite_krm::Package;
use nephrite_l7::{Options, SourceObject, translate};

use super::*;
use crate::wire::{to_wire, version_of};

/// A snapshot of the example Ingress and its Service and EndpointSlice.
fn message() -> pb::Snapshot {
    let mut objects = Vec::new();
    for text in [
        include_str!("../../../examples/config/ingress.yaml"),
        include_str!("../../../examples/config/services.yaml"),
    ] {
        let package = Package::from_yaml(text).expect("the examples parse");
        objects.extend(
            package
                .into_objects()
                .into_iter()
                .map(|object| SourceObject {
                    object,
                    origin: "examples".into(),
                }),
        );
    }
    to_wire(&translate(&objects, &Options::default()), &[])
}

#[test]
fn a_cached_snapshot_is_served_again_with_its_version() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("rules.pb");
    let message = message();
    store_cache(&path, &message);
    let followed = load_cache(&path).expect("the cache loads");
    assert_eq!(followed.version, message.version);
    assert!(!followed.snapshot.table.http.is_empty());
    assert_eq!(
        to_wire(
            &followed.snapshot.translation,
            &followed.snapshot.read_errors
        ),
        message
    );
}

#[test]
fn a_cache_that_does_not_check_or_parse_is_ignored() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("rules.pb");
    let mut tampered = message();
    tampered.pools.clear();
    assert_ne!(version_of(&tampered), tampered.version);
    store_cache(&path, &tampered);
    assert!(load_cache(&path).is_none());

    std::fs::write(&path, b"\xff\xff not protobuf").unwrap();
    assert!(load_cache(&path).is_none());
    assert!(load_cache(&dir.path().join("absent.pb")).is_none());
}
