//! Unit tests of the OpenAPI documents: what kubectl looks for in them.

use serde_json::json;

use super::*;
use crate::resources::{builtins, parse_crd};

fn gadget_types() -> Vec<ResourceType> {
    let crd = json!({
        "metadata": {"name": "gadgets.demo.nephrite.dev"},
        "spec": {"group": "demo.nephrite.dev", "scope": "Namespaced",
                 "names": {"plural": "gadgets", "kind": "Gadget"},
                 "versions": [{"name": "v1", "served": true, "storage": true,
                               "subresources": {"status": {}},
                               "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                                   "spec": {"type": "object", "properties": {"color": {"type": "string"}}}}}}}]}});
    let mut types = builtins();
    types.extend(parse_crd(&crd).map(|d| d.types).unwrap_or_default());
    types
}

/// The PATCH operation kubectl looks for: the one carrying the kind's GVK.
fn patch_op<'a>(doc: &'a Value, group: &str, kind: &str) -> Option<&'a Value> {
    doc["paths"].as_object()?.values().find_map(|item| {
        let op = item.get("patch")?;
        let g = &op["x-kubernetes-group-version-kind"];
        (g["group"] == group && g["kind"] == kind).then_some(op)
    })
}

#[test]
fn root_lists_every_group_version_with_a_hashed_url() {
    let types = gadget_types();
    let first = root(&types);
    let paths = first["paths"].as_object().cloned().unwrap_or_default();
    for gv in [
        "api/v1",
        "apis/apiextensions.k8s.io/v1",
        "apis/demo.nephrite.dev/v1",
    ] {
        let url = paths[gv]["serverRelativeURL"].as_str().unwrap_or_default();
        assert!(url.starts_with(&format!("/openapi/v3/{gv}?hash=")), "{url}");
    }
    // The hash follows the document: a changed CRD gets a new URL.
    let mut changed = types.clone();
    if let Some(t) = changed.iter_mut().find(|t| t.kind == "Gadget") {
        t.schema = Some(json!({"type": "object"}));
    }
    let again = root(&changed);
    assert_ne!(
        again["paths"]["apis/demo.nephrite.dev/v1"],
        first["paths"]["apis/demo.nephrite.dev/v1"]
    );
    assert_eq!(again["paths"]["api/v1"], first["paths"]["api/v1"]);
}

#[test]
fn patch_operations_take_field_validation() {
    let types = gadget_types();
    for (group, version, kind) in [
        ("demo.nephrite.dev", "v1", "Gadget"),
        ("", "v1", "ConfigMap"),
        ("", "v1", "Namespace"),
        ("apiextensions.k8s.io", "v1", "CustomResourceDefinition"),
    ] {
        let doc = group_version(&types, group, version).unwrap_or_default();
        let op = patch_op(&doc, group, kind).unwrap_or_else(|| panic!("PATCH of {kind}"));
        let params: Vec<&str> = op["parameters"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|p| p["in"] == "query")
            .filter_map(|p| p["name"].as_str())
            .collect();
        assert!(params.contains(&"fieldValidation"), "{kind}: {params:?}");
    }
    assert_eq!(group_version(&types, "nope.example.com", "v1"), None);
}

#[test]
fn crd_schema_is_published_with_its_gvk() {
    let doc = group_version(&gadget_types(), "demo.nephrite.dev", "v1").unwrap_or_default();
    let schema = &doc["components"]["schemas"]["dev.nephrite.demo.v1.Gadget"];
    assert_eq!(
        schema["properties"]["spec"]["properties"]["color"]["type"],
        "string"
    );
    assert_eq!(schema["properties"]["apiVersion"]["type"], "string");
    assert_eq!(
        schema["x-kubernetes-group-version-kind"],
        json!([{"group": "demo.nephrite.dev", "version": "v1", "kind": "Gadget"}])
    );
    assert!(
        doc["paths"]
            .get("/apis/demo.nephrite.dev/v1/namespaces/{namespace}/gadgets/{name}/status")
            .is_some()
    );
    let meta_ref = &schema["properties"]["metadata"]["allOf"][0]["$ref"];
    let meta_name = meta_ref
        .as_str()
        .and_then(|r| r.strip_prefix("#/components/schemas/"))
        .unwrap_or_default();
    assert!(doc["components"]["schemas"].get(meta_name).is_some());
}
