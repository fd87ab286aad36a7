//! The only schema check the server makes: `required` properties of a CRD's
//! `openAPIV3Schema`, at the top level and inside every nested object (or array item) that is
//! present in the object. Types, formats, patterns, enums and the rest are not checked.

use serde_json::Value;

/// Returns the path of the first missing required field (e.g. `spec.size`), if any.
pub(crate) fn missing_required(schema: &Value, obj: &Value) -> Option<String> {
    walk(schema, obj, "")
}

fn join(prefix: &str, name: &str) -> String {
    if prefix.is_empty() {
        name.to_string()
    } else {
        format!("{prefix}.{name}")
    }
}

fn walk(schema: &Value, value: &Value, path: &str) -> Option<String> {
    match value {
        Value::Object(map) => {
            if let Some(required) = schema.get("required").and_then(Value::as_array) {
                for name in required.iter().filter_map(Value::as_str) {
                    if map.get(name).is_none_or(Value::is_null) {
                        return Some(join(path, name));
                    }
                }
            }
            let props = schema.get("properties").and_then(Value::as_object)?;
            for (name, sub_schema) in props {
                // metadata is validated by the server itself, not by the CRD schema.
                if path.is_empty() && name == "metadata" {
                    continue;
                }
                if let Some(child) = map.get(name)
                    && let Some(missing) = walk(sub_schema, child, &join(path, name))
                {
                    return Some(missing);
                }
            }
            None
        }
        Value::Array(items) => {
            let item_schema = schema.get("items")?;
            items
                .iter()
                .enumerate()
                .find_map(|(i, item)| walk(item_schema, item, &format!("{path}[{i}]")))
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn checks_present_nested_objects_only() {
        let schema = json!({
            "type": "object",
            "required": ["spec"],
            "properties": {
                "spec": {"type": "object", "required": ["size"], "properties": {
                    "ports": {"type": "array", "items": {"type": "object", "required": ["port"]}},
                    "extra": {"type": "object", "required": ["x"]},
                }},
            },
        });
        assert_eq!(missing_required(&schema, &json!({})), Some("spec".into()));
        assert_eq!(
            missing_required(&schema, &json!({"spec": {}})),
            Some("spec.size".into())
        );
        assert_eq!(
            missing_required(&schema, &json!({"spec": {"size": 1}})),
            None
        );
        assert_eq!(
            missing_required(
                &schema,
                &json!({"spec": {"size": 1, "ports": [{"port": 1}, {}]}})
            ),
            Some("spec.ports[1].port".into())
        );
    }
}
