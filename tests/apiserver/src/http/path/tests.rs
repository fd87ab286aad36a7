//! Unit tests of path routing.

use super::*;

fn res(ns: Option<&str>, plural: &str, name: Option<&str>, sub: Option<&str>) -> Target {
    Target::Resource(ResourcePath {
        group: String::new(),
        version: "v1".into(),
        namespace: ns.map(Into::into),
        plural: plural.into(),
        name: name.map(Into::into),
        sub: sub.map(Into::into),
        legacy_watch: false,
    })
}

#[test]
fn paths() {
    assert_eq!(
        parse_path("/api/v1/pods"),
        Some(res(None, "pods", None, None))
    );
    assert_eq!(
        parse_path("/api/v1/namespaces/a/pods/b/status"),
        Some(res(Some("a"), "pods", Some("b"), Some("status")))
    );
    assert_eq!(
        parse_path("/api/v1/namespaces/a"),
        Some(res(None, "namespaces", Some("a"), None))
    );
    assert_eq!(
        parse_path("/api/v1/namespaces/a/status"),
        Some(res(None, "namespaces", Some("a"), Some("status")))
    );
    assert_eq!(
        parse_path("/apis/example.com/v1"),
        Some(Target::ResourceList(GroupVersion::new("example.com", "v1")))
    );
    assert_eq!(parse_path("/api/v1/namespaces/a/pods/b/status/x"), None);
    assert_eq!(parse_path("/openapi/v2"), None);
    assert_eq!(parse_path("/openapi/v3"), Some(Target::OpenApiRoot));
    assert_eq!(
        parse_path("/openapi/v3/api/v1"),
        Some(Target::OpenApi(GroupVersion::new("", "v1")))
    );
    assert_eq!(
        parse_path("/openapi/v3/apis/example.com/v1"),
        Some(Target::OpenApi(GroupVersion::new("example.com", "v1")))
    );
}
