use nephrite_krm::Package;

use super::*;

#[test]
fn extracts_kind_dot_path_keys() {
    let package = Package::from_yaml(
        "apiVersion: metadata.nephio.org/v1alpha1
kind: Site
metadata: {name: site}
spec:
  region: metro
  location: {city: Lyon}
  zones: [a, b]
  capacity: 4
  edge: true
---
apiVersion: metadata.nephio.org/v1alpha1
kind: NetworkFunction
metadata: {name: nf}
spec: {type: SMF}
---
apiVersion: metadata.nephio.org/v1alpha1
kind: Hidden
metadata:
  name: hidden
  annotations: {nephio.org/metadata: Postpone}
spec: {x: y}
---
apiVersion: example.org/v1
kind: Site
metadata: {name: other-group}
spec: {region: nowhere}
",
    )
    .unwrap();
    let metadata = extract_metadata(&package);
    let expected: Metadata = [
        ("NetworkFunction.type", "SMF"),
        ("Site.capacity", "4"),
        ("Site.edge", "true"),
        ("Site.location.city", "Lyon"),
        ("Site.region", "metro"),
        ("Site.zones.0", "a"),
        ("Site.zones.1", "b"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v.to_owned()))
    .collect();
    assert_eq!(metadata, expected);
}

#[test]
fn own_metadata_wins_over_base() {
    let base: Metadata = [
        ("a".to_owned(), "1".to_owned()),
        ("b".to_owned(), "1".to_owned()),
    ]
    .into();
    let own: Metadata = [("b".to_owned(), "2".to_owned())].into();
    let merged = overlay(&base, &own);
    assert_eq!(merged.get("a").map(String::as_str), Some("1"));
    assert_eq!(merged.get("b").map(String::as_str), Some("2"));
}

#[test]
fn selector_matches_keys_exactly_and_values_by_pattern() {
    let metadata: Metadata = [
        ("Site.region".to_owned(), "eu/west".to_owned()),
        ("Site.tier".to_owned(), "edge".to_owned()),
    ]
    .into();
    let yes = |pairs: &[(&str, &str)]| {
        MetadataSelector::new(pairs.iter().copied())
            .unwrap()
            .matches(&metadata)
    };
    assert!(yes(&[]));
    assert!(yes(&[("Site.region", "eu/west")]));
    assert!(yes(&[("Site.region", "eu/*"), ("Site.tier", "e*")]));
    assert!(yes(&[("Site.region", "**")]));
    assert!(!yes(&[("Site.region", "*")]));
    assert!(!yes(&[("Site.Region", "eu/west")]), "keys match exactly");
    assert!(!yes(&[("Site.missing", "**")]));
}

#[test]
fn selector_from_json() {
    let value = serde_json::json!({"Site.region": "metro", "Site.capacity": 4});
    let selector = MetadataSelector::from_json(Some(&value)).unwrap();
    assert_eq!(selector.entries().len(), 2);
    assert!(MetadataSelector::from_json(None).unwrap().is_empty());
    let bad = serde_json::json!({"k": "a***"});
    assert!(MetadataSelector::from_json(Some(&bad)).is_err());
}
