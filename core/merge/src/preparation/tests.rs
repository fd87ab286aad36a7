use nephrite_krm::{Gvk, Object, Package, keys};

use super::*;

fn placement(name: &str) -> Object {
    Object::new(
        &Gvk::new("topology.nephio.org", "v1alpha1", "Placement"),
        name,
    )
}

fn only_placements(gvk: &Gvk) -> bool {
    gvk.kind == "Placement"
}

#[test]
fn rewrite_table() {
    assert_eq!(rewrite_mode(None), None);
    assert_eq!(rewrite_mode(Some("Here")).as_deref(), Some("Never"));
    assert_eq!(rewrite_mode(Some("")).as_deref(), Some("Never"));
    assert_eq!(rewrite_mode(Some("Postpone")).as_deref(), Some("Here"));
    assert_eq!(rewrite_mode(Some("Never")).as_deref(), Some("Never"));
    assert_eq!(rewrite_mode(Some("Later")).as_deref(), Some("Later"));
}

#[test]
fn rewrite_touches_prepare_and_metadata_only_when_present() {
    let mut object = placement("p")
        .with_annotation(keys::PREPARE, "Postpone")
        .with_annotation(keys::MERGE, "Override");
    rewrite_annotations(&mut object);
    assert_eq!(object.annotation(keys::PREPARE), Some("Here"));
    assert_eq!(object.annotation(keys::METADATA), None);
    assert_eq!(object.annotation(keys::MERGE), Some("Override"));
}

#[test]
fn preparable_needs_here_a_preparer_and_not_prepared() {
    assert!(is_preparable(&placement("a"), only_placements));
    assert!(is_preparable(
        &placement("a").with_annotation(keys::PREPARE, "Here"),
        only_placements
    ));
    assert!(!is_preparable(&placement("a"), |_| false));
    for mode in ["Postpone", "Never", "Later"] {
        assert!(!is_preparable(
            &placement("a").with_annotation(keys::PREPARE, mode),
            only_placements
        ));
    }
    assert!(!is_preparable(
        &placement("a").with_annotation(keys::PREPARED, "true"),
        only_placements
    ));
    // "false" forces re-preparation.
    assert!(is_preparable(
        &placement("a").with_annotation(keys::PREPARED, "false"),
        only_placements
    ));
}

#[test]
fn preparable_resources_in_package_order() {
    let config = Object::new(&Gvk::new("", "v1", "ConfigMap"), "c");
    let package = Package::from(vec![
        placement("first"),
        config,
        placement("done").with_annotation(keys::PREPARED, "true"),
        placement("later").with_annotation(keys::PREPARE, "Postpone"),
        placement("second"),
    ]);
    assert_eq!(preparable_resources(&package, only_placements), vec![0, 4]);
}

#[test]
fn mode_parsing() {
    assert_eq!(PrepareMode::parse(None), PrepareMode::Here);
    assert_eq!(PrepareMode::parse(Some("Postpone")), PrepareMode::Postpone);
    assert_eq!(
        PrepareMode::parse(Some("x")),
        PrepareMode::Unknown("x".into())
    );
    assert_eq!(PrepareMode::Never.as_str(), "Never");
    let meta = placement("m").with_annotation(keys::METADATA, "Never");
    assert_eq!(PrepareMode::metadata_of(&meta), PrepareMode::Never);
}
