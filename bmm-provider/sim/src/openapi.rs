//! The BMM OpenAPI description (`api/openapi.yaml`, embedded) and JSON-schema validation
//! against it.
//!
//! The document is OpenAPI 3.1, whose schemas are JSON Schema 2020-12 (nullability is written
//! as `type: [string, "null"]`, not 3.0's `nullable`), so a 2020-12 validator applies directly.
//! Schemas refer to each other with `$ref: '#/components/schemas/…'`; a validator is built on a
//! root that carries the document's `components`, so every such `$ref` resolves locally.
//! `readOnly` and the examples are annotations and do not affect validation; formats (`uuid`,
//! `date-time`, `ipv4`) are checked.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

use serde_json::{Value, json};

/// The embedded document, byte for byte the published `openapi.yaml`.
pub const OPENAPI_YAML: &str = include_str!("../api/openapi.yaml");

/// The path prefix of every operation.
pub const BASE_PATH: &str = "/v2/org/{org}/carbide";

/// A problem with the document or a schema in it.
#[derive(Debug, Clone, thiserror::Error)]
pub enum OpenApiError {
    /// The embedded YAML did not parse.
    #[error("openapi.yaml does not parse: {0}")]
    Parse(String),
    /// No such operation or schema.
    #[error("openapi.yaml has no {0}")]
    Missing(String),
    /// The schema did not compile.
    #[error("schema {name} does not compile: {message}")]
    Compile {
        /// Which schema.
        name: String,
        /// Why.
        message: String,
    },
}

/// The parsed document.
pub fn document() -> Result<&'static Value, OpenApiError> {
    static DOC: OnceLock<Result<Value, String>> = OnceLock::new();
    DOC.get_or_init(|| serde_norway::from_str::<Value>(OPENAPI_YAML).map_err(|e| e.to_string()))
        .as_ref()
        .map_err(|e| OpenApiError::Parse(e.clone()))
}

/// The operation object for a method (`get`, `post`, …) and a path below [`BASE_PATH`]
/// (`vpc`, `vpc/{vpcId}`).
pub fn operation(method: &str, path: &str) -> Result<&'static Value, OpenApiError> {
    let full = format!("{BASE_PATH}/{path}");
    document()?
        .get("paths")
        .and_then(|p| p.get(&full))
        .and_then(|p| p.get(method.to_ascii_lowercase()))
        .ok_or_else(|| OpenApiError::Missing(format!("operation {method} {full}")))
}

/// The JSON schema of an operation's request body.
pub fn request_schema(method: &str, path: &str) -> Result<&'static Value, OpenApiError> {
    operation(method, path)?
        .pointer("/requestBody/content/application~1json/schema")
        .ok_or_else(|| OpenApiError::Missing(format!("request body of {method} {path}")))
}

/// The JSON schema of an operation's response for a status code (`None` when that response
/// has no body); a `$ref` to `#/components/responses/…` is followed.
pub fn response_schema(
    method: &str,
    path: &str,
    status: u16,
) -> Result<Option<&'static Value>, OpenApiError> {
    let op = operation(method, path)?;
    let mut response = op
        .get("responses")
        .and_then(|r| r.get(status.to_string()))
        .ok_or_else(|| OpenApiError::Missing(format!("response {status} of {method} {path}")))?;
    if let Some(reference) = response.get("$ref").and_then(Value::as_str) {
        let pointer = reference.trim_start_matches('#');
        response = document()?
            .pointer(pointer)
            .ok_or_else(|| OpenApiError::Missing(reference.to_string()))?;
    }
    Ok(response.pointer("/content/application~1json/schema"))
}

/// A schema by name from `#/components/schemas`.
pub fn component(name: &str) -> Value {
    json!({"$ref": format!("#/components/schemas/{name}")})
}

type Cache = Mutex<HashMap<String, Arc<jsonschema::Validator>>>;

/// A compiled validator for a schema fragment of the document (cached).
pub fn validator(schema: &Value) -> Result<Arc<jsonschema::Validator>, OpenApiError> {
    static CACHE: OnceLock<Cache> = OnceLock::new();
    let key = schema.to_string();
    let cache = CACHE.get_or_init(Default::default);
    if let Some(v) = cache.lock().ok().and_then(|c| c.get(&key).cloned()) {
        return Ok(v);
    }
    let mut root = serde_json::Map::new();
    root.insert(
        "$schema".into(),
        json!("https://json-schema.org/draft/2020-12/schema"),
    );
    root.insert("allOf".into(), json!([schema]));
    let components = document()?
        .get("components")
        .cloned()
        .unwrap_or(Value::Null);
    root.insert("components".into(), components);
    let compiled = jsonschema::options()
        .with_draft(jsonschema::Draft::Draft202012)
        .should_validate_formats(true)
        .build(&Value::Object(root))
        .map_err(|e| OpenApiError::Compile {
            name: key.clone(),
            message: e.to_string(),
        })?;
    let compiled = Arc::new(compiled);
    if let Ok(mut c) = cache.lock() {
        c.insert(key, compiled.clone());
    }
    Ok(compiled)
}

/// Every violation of `schema` by `instance`, as `"<json pointer>: <problem>"`.
pub fn violations(schema: &Value, instance: &Value) -> Result<Vec<String>, OpenApiError> {
    let v = validator(schema)?;
    Ok(v.iter_errors(instance)
        .map(|e| format!("{}: {}", e.instance_path(), e))
        .collect())
}
