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
//! - [`compile_patterns`]: every `pattern` of a schema compiled once, when the CRD is stored
//!   ([`Patterns`], kept in the served resource type); the first one that is not a valid
//!   regular expression refuses the CRD.
//!
//! CEL rules, `allOf`/`anyOf`/`oneOf`/`not` and defaults are not checked.

use std::collections::HashMap;
use std::sync::Arc;

use regex::Regex;
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

/// The compiled `pattern`s of a schema by their source: compiled once when the CRD is stored
/// and shared by every write of its objects.
#[derive(Debug, Clone, Default)]
pub(crate) struct Patterns(Arc<HashMap<String, Regex>>);

impl PartialEq for Patterns {
    /// The same sources: each regex is compiled from its source.
    fn eq(&self, other: &Patterns) -> bool {
        self.0.len() == other.0.len() && self.0.keys().all(|k| other.0.contains_key(k))
    }
}

impl Patterns {
    /// Whether `s` matches `pattern`. A pattern compiled elsewhere than here (a schema edited
    /// after its patterns were compiled, as tests do) is compiled now; one that does not
    /// compile matches nothing.
    pub(crate) fn is_match(&self, pattern: &str, s: &str) -> bool {
        match self.0.get(pattern) {
            Some(re) => re.is_match(s),
            None => Regex::new(pattern).is_ok_and(|re| re.is_match(s)),
        }
    }
}

/// Compiles every `pattern` in `schema`; `Err` names the path
/// (`properties[spec].properties[cidr].pattern`, under `path`) and value of the first one that
/// is not a valid regular expression.
pub(crate) fn compile_patterns(schema: &Value, path: &str) -> Result<Patterns, (String, String)> {
    let mut compiled = HashMap::new();
    collect_patterns(schema, path, &mut compiled)?;
    Ok(Patterns(Arc::new(compiled)))
}

fn collect_patterns(
    schema: &Value,
    path: &str,
    compiled: &mut HashMap<String, Regex>,
) -> Result<(), (String, String)> {
    let Some(map) = schema.as_object() else {
        return Ok(());
    };
    if let Some(pattern) = map.get("pattern").and_then(Value::as_str)
        && !compiled.contains_key(pattern)
    {
        let re = Regex::new(pattern).map_err(|_| (join(path, "pattern"), pattern.to_string()))?;
        compiled.insert(pattern.to_string(), re);
    }
    for key in ["properties", "patternProperties"] {
        for (name, sub) in map
            .get(key)
            .and_then(Value::as_object)
            .into_iter()
            .flatten()
        {
            collect_patterns(sub, &format!("{}[{name}]", join(path, key)), compiled)?;
        }
    }
    for key in ["items", "additionalProperties"] {
        if let Some(sub) = map.get(key) {
            collect_patterns(sub, &join(path, key), compiled)?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests;
