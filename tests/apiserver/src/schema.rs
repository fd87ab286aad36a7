//! What the server does with a CRD version's `openAPIV3Schema`:
//!
//! - [`prune`]: drops the fields the schema does not declare, as Kubernetes prunes custom
//!   resources (`properties`, `additionalProperties`, `items`, kept whole under
//!   `x-kubernetes-preserve-unknown-fields: true`, `apiVersion`/`kind`/`metadata` kept in an
//!   `x-kubernetes-embedded-resource`), and names each dropped field for `fieldValidation`.
//! - [`missing_required`]: the `required` properties, at the top level and inside every nested
//!   object (or array item) that is present. Every missing field is reported, as Kubernetes
//!   reports them all in one 422.
//!
//! - [`violations`] (in [`constraints`]): types, enums, patterns, formats, lengths, bounds and
//!   item counts, each worded as Kubernetes words it.
//! - [`bad_pattern`]: the first `pattern` of a schema that is not a valid regular expression
//!   (such a CRD is refused).
//!
//! CEL rules, `allOf`/`anyOf`/`oneOf`/`not` and defaults are not checked.

use serde_json::Value;

mod constraints;
pub(crate) use constraints::violations;

/// Removes from `body` (an object's top-level fields but apiVersion, kind and metadata) every
/// field `schema` does not declare; returns the removed fields' paths (`spec.foo`,
/// `spec.items[0].bar`) in document order.
pub(crate) fn prune(schema: &Value, body: &mut Value) -> Vec<String> {
    let mut pruned = Vec::new();
    prune_node(Some(schema), body, "", &mut pruned);
    pruned
}

fn flag(schema: Option<&Value>, name: &str) -> bool {
    schema
        .and_then(|s| s.get(name))
        .and_then(Value::as_bool)
        .unwrap_or(false)
}

fn prune_node(schema: Option<&Value>, value: &mut Value, path: &str, pruned: &mut Vec<String>) {
    let preserve = flag(schema, "x-kubernetes-preserve-unknown-fields");
    let embedded = flag(schema, "x-kubernetes-embedded-resource");
    match value {
        Value::Object(map) => {
            let properties = schema
                .and_then(|s| s.get("properties"))
                .and_then(Value::as_object);
            let additional = schema.and_then(|s| s.get("additionalProperties"));
            let mut dropped = Vec::new();
            for (key, child) in map.iter_mut() {
                if embedded && matches!(key.as_str(), "apiVersion" | "kind" | "metadata") {
                    continue;
                }
                let child_path = join(path, key);
                if let Some(sub) = properties.and_then(|p| p.get(key)) {
                    prune_node(Some(sub), child, &child_path, pruned);
                    continue;
                }
                match additional {
                    Some(sub @ Value::Object(_)) => {
                        prune_node(Some(sub), child, &child_path, pruned)
                    }
                    Some(Value::Bool(true)) => {}
                    _ if preserve => {}
                    _ => {
                        dropped.push(key.clone());
                        pruned.push(child_path);
                    }
                }
            }
            for key in dropped {
                map.shift_remove(&key);
            }
        }
        Value::Array(items) => {
            let item_schema = schema.and_then(|s| s.get("items"));
            if item_schema.is_none() && preserve {
                return;
            }
            for (i, item) in items.iter_mut().enumerate() {
                prune_node(item_schema, item, &format!("{path}[{i}]"), pruned);
            }
        }
        _ => {}
    }
}

/// The paths of every missing required field (e.g. `spec.size`), in schema order.
pub(crate) fn missing_required(schema: &Value, obj: &Value) -> Vec<String> {
    let mut missing = Vec::new();
    walk(schema, obj, "", &mut missing);
    missing
}

fn join(prefix: &str, name: &str) -> String {
    if prefix.is_empty() {
        name.to_string()
    } else {
        format!("{prefix}.{name}")
    }
}

fn walk(schema: &Value, value: &Value, path: &str, missing: &mut Vec<String>) {
    match value {
        Value::Object(map) => {
            if let Some(required) = schema.get("required").and_then(Value::as_array) {
                for name in required.iter().filter_map(Value::as_str) {
                    if map.get(name).is_none_or(Value::is_null) {
                        missing.push(join(path, name));
                    }
                }
            }
            let Some(props) = schema.get("properties").and_then(Value::as_object) else {
                return;
            };
            for (name, sub_schema) in props {
                // metadata is validated by the server itself, not by the CRD schema.
                if path.is_empty() && name == "metadata" {
                    continue;
                }
                if let Some(child) = map.get(name) {
                    walk(sub_schema, child, &join(path, name), missing);
                }
            }
        }
        Value::Array(items) => {
            if let Some(item_schema) = schema.get("items") {
                for (i, item) in items.iter().enumerate() {
                    walk(item_schema, item, &format!("{path}[{i}]"), missing);
                }
            }
        }
        _ => {}
    }
}

/// The path (`properties[spec].properties[cidr].pattern`) and value of the first `pattern` in
/// `schema` that is not a valid regular expression.
pub(crate) fn bad_pattern(schema: &Value, path: &str) -> Option<(String, String)> {
    let map = schema.as_object()?;
    if let Some(pattern) = map.get("pattern").and_then(Value::as_str)
        && !constraints::pattern_compiles(pattern)
    {
        return Some((join(path, "pattern"), pattern.to_string()));
    }
    for key in ["properties", "patternProperties"] {
        for (name, sub) in map
            .get(key)
            .and_then(Value::as_object)
            .into_iter()
            .flatten()
        {
            if let Some(found) = bad_pattern(sub, &format!("{}[{name}]", join(path, key))) {
                return Some(found);
            }
        }
    }
    ["items", "additionalProperties"]
        .into_iter()
        .filter_map(|key| map.get(key).map(|sub| (key, sub)))
        .find_map(|(key, sub)| bad_pattern(sub, &join(path, key)))
}

#[cfg(test)]
mod tests;
