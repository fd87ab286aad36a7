//! `/openapi/v3`: the discovery root and one OpenAPI 3 document per served group/version, so
//! that `kubectl apply` runs with its default validation.
//!
//! kubectl (1.27 and later) looks in a group/version's document for the PATCH operation of the
//! kind it applies (an operation carrying `x-kubernetes-group-version-kind`) and, when that
//! operation takes the `fieldValidation` query parameter, leaves validation to the server and
//! sends `fieldValidation=Strict`. Without these documents it falls back to validating on the
//! client against `/openapi/v2`, which is not served, and gives up.
//!
//! A custom resource's schema is its CRD version's `openAPIV3Schema`, with `apiVersion`, `kind`
//! and `metadata` added as Kubernetes adds them. Built-in kinds are published as open objects
//! (`x-kubernetes-preserve-unknown-fields`): their fields are not known to this server, and it
//! does not check them.

use std::hash::{DefaultHasher, Hash, Hasher};

use serde_json::{Map, Value, json};

use crate::resources::{self, ResourceType};

const OBJECT_META: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta";
const PATCH: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.Patch";
const DELETE_OPTIONS: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.DeleteOptions";
const STATUS: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.Status";

/// The path of a group/version in the root and under `/openapi/v3/`: `api/v1` or
/// `apis/<group>/<version>`.
pub(crate) fn group_version_path(group: &str, version: &str) -> String {
    if group.is_empty() {
        format!("api/{version}")
    } else {
        format!("apis/{group}/{version}")
    }
}

/// The `/openapi/v3` root: every served group/version with the URL of its document. The URL
/// carries a hash of the document, so clients that cache by URL see a changed CRD.
pub(crate) fn root(types: &[ResourceType]) -> Value {
    let mut paths = Map::new();
    for (group, versions) in resources::groups(types) {
        for version in versions {
            let path = group_version_path(&group, &version);
            let doc = group_version(types, &group, &version).unwrap_or_default();
            let mut hasher = DefaultHasher::new();
            doc.to_string().hash(&mut hasher);
            let url = format!("/openapi/v3/{path}?hash={:016X}", hasher.finish());
            paths.insert(path, json!({"serverRelativeURL": url}));
        }
    }
    json!({"paths": paths})
}

/// The OpenAPI 3 document of one group/version, or `None` when nothing is served there.
pub(crate) fn group_version(types: &[ResourceType], group: &str, version: &str) -> Option<Value> {
    let served: Vec<&ResourceType> = types
        .iter()
        .filter(|t| t.group == group && t.version == version)
        .collect();
    if served.is_empty() {
        return None;
    }
    let mut paths = Map::new();
    let mut schemas = Map::new();
    for rt in served {
        let model = model_name(rt);
        schemas.insert(model.clone(), kind_schema(rt));
        schemas.insert(format!("{model}List"), list_schema(rt, &model));
        for (path, item) in resource_paths(rt, &model) {
            paths.insert(path, item);
        }
    }
    schemas.insert(OBJECT_META.into(), object_meta_schema());
    for (name, what) in [
        (
            PATCH,
            "A patch: JSON patch, merge patch or apply configuration.",
        ),
        (DELETE_OPTIONS, "Options for a delete."),
        (STATUS, "The result of an operation that returns no object."),
    ] {
        schemas.insert(name.into(), json!({"type": "object", "description": what}));
    }
    Some(json!({
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes", "version": "v1.33.0"},
        "paths": paths,
        "components": {"schemas": schemas},
    }))
}

/// The name Kubernetes gives a kind's schema: `io.k8s.api.core.v1.ConfigMap` for built-ins,
/// the reversed group for custom resources (`dev.nephrite.demo.v1.Gadget`).
fn model_name(rt: &ResourceType) -> String {
    let prefix = match (rt.crd.is_some(), rt.group.as_str()) {
        (false, "") => "io.k8s.api.core".to_string(),
        (false, "apiextensions.k8s.io") => {
            "io.k8s.apiextensions-apiserver.pkg.apis.apiextensions".to_string()
        }
        (false, group) => format!(
            "io.k8s.api.{}",
            group.strip_suffix(".k8s.io").unwrap_or(group)
        ),
        (true, group) => group.split('.').rev().collect::<Vec<_>>().join("."),
    };
    format!("{prefix}.{}.{}", rt.version, rt.kind)
}

fn gvk(rt: &ResourceType) -> Value {
    json!({"group": rt.group, "version": rt.version, "kind": rt.kind})
}

fn schema_ref(model: &str) -> Value {
    json!({"$ref": format!("#/components/schemas/{model}")})
}

/// A kind's schema: the CRD's `openAPIV3Schema` (or an open object) with the type and
/// metadata fields every object has.
fn kind_schema(rt: &ResourceType) -> Value {
    let mut schema = match (&rt.schema, rt.crd.is_some()) {
        (Some(Value::Object(s)), _) => s.clone(),
        (_, true) => Map::from_iter([(
            "x-kubernetes-preserve-unknown-fields".to_string(),
            json!(true),
        )]),
        (_, false) => Map::from_iter([
            (
                "description".to_string(),
                json!(format!(
                    "{}: the fields of built-in kinds are not published (or checked) by this test server",
                    rt.kind
                )),
            ),
            (
                "x-kubernetes-preserve-unknown-fields".to_string(),
                json!(true),
            ),
        ]),
    };
    schema.insert("type".into(), json!("object"));
    let properties = schema
        .entry("properties")
        .or_insert_with(|| Value::Object(Map::new()));
    if let Value::Object(properties) = properties {
        properties.insert("apiVersion".into(), json!({"type": "string"}));
        properties.insert("kind".into(), json!({"type": "string"}));
        properties.insert(
            "metadata".into(),
            json!({"allOf": [schema_ref(OBJECT_META)], "default": {}}),
        );
    }
    schema.insert("x-kubernetes-group-version-kind".into(), json!([gvk(rt)]));
    Value::Object(schema)
}

fn list_schema(rt: &ResourceType, model: &str) -> Value {
    json!({
        "type": "object",
        "required": ["items"],
        "properties": {
            "apiVersion": {"type": "string"},
            "kind": {"type": "string"},
            "metadata": {"type": "object"},
            "items": {"type": "array", "items": schema_ref(model)},
        },
        "x-kubernetes-group-version-kind": [{
            "group": rt.group, "version": rt.version, "kind": format!("{}List", rt.kind),
        }],
    })
}

/// The metadata every object has, as far as this server reads it.
fn object_meta_schema() -> Value {
    let string = json!({"type": "string"});
    let strings_map = json!({"type": "object", "additionalProperties": {"type": "string"}});
    json!({
        "type": "object",
        "description": "Standard object metadata.",
        "properties": {
            "name": string, "generateName": string, "namespace": string, "uid": string,
            "resourceVersion": string, "selfLink": string,
            "generation": {"type": "integer", "format": "int64"},
            "deletionGracePeriodSeconds": {"type": "integer", "format": "int64"},
            "creationTimestamp": {"type": "string", "format": "date-time"},
            "deletionTimestamp": {"type": "string", "format": "date-time"},
            "labels": strings_map, "annotations": strings_map,
            "finalizers": {"type": "array", "items": {"type": "string"}},
            "managedFields": {"type": "array", "items": {"type": "object"}},
            "ownerReferences": {"type": "array", "items": {
                "type": "object",
                "required": ["apiVersion", "kind", "name", "uid"],
                "properties": {
                    "apiVersion": string, "kind": string, "name": string, "uid": string,
                    "controller": {"type": "boolean"}, "blockOwnerDeletion": {"type": "boolean"},
                },
            }},
        },
    })
}

fn query(name: &str, kind: &str) -> Value {
    json!({"name": name, "in": "query", "schema": {"type": kind}, "uniqueItems": true})
}

fn path_param(name: &str) -> Value {
    json!({"name": name, "in": "path", "required": true, "schema": {"type": "string"}, "uniqueItems": true})
}

/// The query parameters of an operation, by its `x-kubernetes-action`.
fn action_params(action: &str) -> Vec<Value> {
    let names: &[(&str, &str)] = match action {
        "post" | "put" => &[
            ("dryRun", "string"),
            ("fieldManager", "string"),
            ("fieldValidation", "string"),
        ],
        "patch" => &[
            ("dryRun", "string"),
            ("fieldManager", "string"),
            ("fieldValidation", "string"),
            ("force", "boolean"),
        ],
        "list" | "deletecollection" => &[
            ("labelSelector", "string"),
            ("fieldSelector", "string"),
            ("limit", "integer"),
            ("continue", "string"),
            ("resourceVersion", "string"),
            ("watch", "boolean"),
            ("allowWatchBookmarks", "boolean"),
            ("sendInitialEvents", "boolean"),
            ("timeoutSeconds", "integer"),
            ("propagationPolicy", "string"),
        ],
        "delete" => &[("dryRun", "string"), ("propagationPolicy", "string")],
        _ => &[],
    };
    names.iter().map(|(n, t)| query(n, t)).collect()
}

/// One operation on a kind.
fn operation(rt: &ResourceType, id: &str, action: &str, model: &str) -> Value {
    let mut op = json!({
        "operationId": id,
        "tags": [rt.group_resource()],
        "parameters": action_params(action),
        "responses": {
            "200": {"description": "OK", "content": {"application/json": {"schema": schema_ref(model)}}},
            "401": {"description": "Unauthorized"},
        },
        "x-kubernetes-action": action,
        "x-kubernetes-group-version-kind": gvk(rt),
    });
    let body = match action {
        "post" | "put" => Some(json!({"content": {
            "application/json": {"schema": schema_ref(model)},
            "application/yaml": {"schema": schema_ref(model)},
        }})),
        "patch" => Some(json!({"content": {
            "application/json-patch+json": {"schema": schema_ref(PATCH)},
            "application/merge-patch+json": {"schema": schema_ref(PATCH)},
            "application/apply-patch+yaml": {"schema": schema_ref(PATCH)},
        }})),
        "delete" | "deletecollection" => Some(json!({"content": {
            "application/json": {"schema": schema_ref(DELETE_OPTIONS)},
        }})),
        _ => None,
    };
    if let (Some(body), Some(map)) = (body, op.as_object_mut()) {
        map.insert("requestBody".into(), body);
    }
    if action == "post"
        && let Some(responses) = op.get_mut("responses").and_then(Value::as_object_mut)
    {
        responses.insert(
            "201".into(),
            json!({"description": "Created", "content": {"application/json": {"schema": schema_ref(model)}}}),
        );
    }
    op
}

/// The paths of one kind: its collection, its objects and their status, and (for namespaced
/// kinds) the list across namespaces.
fn resource_paths(rt: &ResourceType, model: &str) -> Vec<(String, Value)> {
    let base = format!("/{}", group_version_path(&rt.group, &rt.version));
    let scope = if rt.namespaced { "Namespaced" } else { "" };
    let kind = &rt.kind;
    let collection = if rt.namespaced {
        format!("{base}/namespaces/{{namespace}}/{}", rt.plural)
    } else {
        format!("{base}/{}", rt.plural)
    };
    let scope_params: Vec<Value> = if rt.namespaced {
        vec![path_param("namespace")]
    } else {
        Vec::new()
    };
    let with_name = |mut params: Vec<Value>| {
        params.insert(0, path_param("name"));
        Value::Array(params)
    };
    let mut out = vec![
        (
            collection.clone(),
            json!({
                "get": operation(rt, &format!("list{scope}{kind}"), "list", &format!("{model}List")),
                "post": operation(rt, &format!("create{scope}{kind}"), "post", model),
                "delete": operation(rt, &format!("deleteCollection{scope}{kind}"), "deletecollection", STATUS),
                "parameters": scope_params.clone(),
            }),
        ),
        (
            format!("{collection}/{{name}}"),
            json!({
                "get": operation(rt, &format!("read{scope}{kind}"), "get", model),
                "put": operation(rt, &format!("replace{scope}{kind}"), "put", model),
                "patch": operation(rt, &format!("patch{scope}{kind}"), "patch", model),
                "delete": operation(rt, &format!("delete{scope}{kind}"), "delete", model),
                "parameters": with_name(scope_params.clone()),
            }),
        ),
    ];
    if rt.status_subresource {
        out.push((
            format!("{collection}/{{name}}/status"),
            json!({
                "get": operation(rt, &format!("read{scope}{kind}Status"), "get", model),
                "put": operation(rt, &format!("replace{scope}{kind}Status"), "put", model),
                "patch": operation(rt, &format!("patch{scope}{kind}Status"), "patch", model),
                "parameters": with_name(scope_params),
            }),
        ));
    }
    if rt.namespaced {
        out.push((
            format!("{base}/{}", rt.plural),
            json!({
                "get": operation(rt, &format!("list{kind}ForAllNamespaces"), "list", &format!("{model}List")),
            }),
        ));
    }
    out
}

#[cfg(test)]
mod tests;
