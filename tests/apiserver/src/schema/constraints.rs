//! The value constraints of a CRD schema, checked as Kubernetes' apiextensions validation checks
//! them, each problem worded the way a real API server words it:
//!
//! | keyword | problem |
//! |---|---|
//! | `type` (`x-kubernetes-int-or-string`) | `Invalid value: "x": spec.n in body must be of type integer: "string"` |
//! | `enum` | `Unsupported value: "x": supported values: "a", "b"` |
//! | `pattern` | `Invalid value: "x": spec.s in body should match '^a'` |
//! | `format` | `Invalid value: "x": spec.c in body must be of type cidr: "x"` |
//! | `minLength` / `maxLength` | `... should be at least 1 chars long` / `Too long: may not be longer than 3` |
//! | `minimum` / `maximum` (`exclusive*`) | `... should be greater than or equal to 1` |
//! | `minItems` / `maxItems` | `... should have at least 1 items` / `Too many: 4: must have at most 3 items` |
//! | `uniqueItems` | `Duplicate value: ...` |
//!
//! Checked formats: `ipv4`, `ipv6`, `cidr`, `mac`, `uuid`, `hostname`, `date`, `date-time`
//! (`datetime`), `byte`, `uri` and `email`; any other format is accepted, as Kubernetes accepts
//! formats it does not know. A `null` value is not checked (defaulting and `nullable` are not
//! modelled), nor are `allOf`/`anyOf`/`oneOf`/`not` and CEL rules.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use base64::Engine;
use serde_json::{Number, Value};

use super::Patterns;
use crate::error::FieldProblem;

/// Every constraint `obj` (a whole object as JSON) breaks under `schema`, in document order,
/// with `patterns` compiled from `schema` ([`super::compile_patterns`]). `apiVersion`, `kind`
/// and `metadata` at the top are the server's to check, not the schema's.
pub(crate) fn violations(schema: &Value, patterns: &Patterns, obj: &Value) -> Vec<FieldProblem> {
    let mut out = Vec::new();
    let (Some(props), Some(map)) = (
        schema.get("properties").and_then(Value::as_object),
        obj.as_object(),
    ) else {
        return out;
    };
    for (name, child) in map {
        if matches!(name.as_str(), "apiVersion" | "kind" | "metadata") {
            continue;
        }
        if let Some(sub) = props.get(name) {
            check(sub, child, name, patterns, &mut out);
        }
    }
    out
}

fn check(
    schema: &Value,
    value: &Value,
    path: &str,
    patterns: &Patterns,
    out: &mut Vec<FieldProblem>,
) {
    if value.is_null() {
        return;
    }
    if !type_ok(schema, value, path, out) {
        return;
    }
    if let Some(allowed) = schema.get("enum").and_then(Value::as_array)
        && !allowed.contains(value)
    {
        let listed: Vec<String> = allowed.iter().map(Value::to_string).collect();
        out.push(FieldProblem::new(
            path,
            format!(
                "Unsupported value: {value}: supported values: {}",
                listed.join(", ")
            ),
        ));
    }
    match value {
        Value::String(s) => check_string(schema, s, path, patterns, out),
        Value::Number(n) => check_number(schema, n, path, out),
        Value::Array(items) => check_array(schema, items, path, patterns, out),
        Value::Object(map) => {
            let props = schema.get("properties").and_then(Value::as_object);
            let additional = schema.get("additionalProperties").filter(|a| a.is_object());
            for (key, child) in map {
                let child_path = format!("{path}.{key}");
                if let Some(sub) = props.and_then(|p| p.get(key)).or(additional) {
                    check(sub, child, &child_path, patterns, out);
                }
            }
        }
        Value::Bool(_) | Value::Null => {}
    }
}

/// The JSON type name of `value`, as the validator names it.
fn type_name(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_i64() || n.is_u64() => "integer",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

fn type_ok(schema: &Value, value: &Value, path: &str, out: &mut Vec<FieldProblem>) -> bool {
    let actual = type_name(value);
    let int_or_string = schema
        .get("x-kubernetes-int-or-string")
        .and_then(Value::as_bool)
        .unwrap_or(false);
    let ok = if int_or_string {
        matches!(actual, "integer" | "string")
    } else {
        match schema.get("type").and_then(Value::as_str) {
            None => true,
            Some("number") => matches!(actual, "integer" | "number"),
            Some(wanted) => wanted == actual,
        }
    };
    if !ok {
        let wanted = if int_or_string {
            "integer,string"
        } else {
            schema.get("type").and_then(Value::as_str).unwrap_or("")
        };
        out.push(FieldProblem::new(
            path,
            format!(
                "Invalid value: {value}: {path} in body must be of type {wanted}: \"{actual}\""
            ),
        ));
    }
    ok
}

fn check_string(
    schema: &Value,
    s: &str,
    path: &str,
    patterns: &Patterns,
    out: &mut Vec<FieldProblem>,
) {
    let shown = Value::String(s.to_string());
    let chars = s.chars().count() as u64;
    if let Some(min) = schema.get("minLength").and_then(Value::as_u64)
        && chars < min
    {
        out.push(FieldProblem::new(
            path,
            format!("Invalid value: {shown}: {path} in body should be at least {min} chars long"),
        ));
    }
    if let Some(max) = schema.get("maxLength").and_then(Value::as_u64)
        && chars > max
    {
        out.push(FieldProblem::new(
            path,
            format!("Too long: may not be longer than {max}"),
        ));
    }
    if let Some(pattern) = schema.get("pattern").and_then(Value::as_str)
        && !patterns.is_match(pattern, s)
    {
        out.push(FieldProblem::new(
            path,
            format!("Invalid value: {shown}: {path} in body should match '{pattern}'"),
        ));
    }
    if let Some(format) = schema.get("format").and_then(Value::as_str)
        && !format_ok(format, s)
    {
        out.push(FieldProblem::new(
            path,
            format!("Invalid value: {shown}: {path} in body must be of type {format}: {shown}"),
        ));
    }
}

fn check_number(schema: &Value, n: &Number, path: &str, out: &mut Vec<FieldProblem>) {
    let Some(x) = n.as_f64() else {
        return;
    };
    let flag = |name| schema.get(name).and_then(Value::as_bool).unwrap_or(false);
    if let Some(min) = schema.get("minimum").and_then(Value::as_f64) {
        let exclusive = flag("exclusiveMinimum");
        if x < min || (exclusive && x == min) {
            let than = if exclusive {
                "than"
            } else {
                "than or equal to"
            };
            out.push(FieldProblem::new(
                path,
                format!("Invalid value: {n}: {path} in body should be greater {than} {min}"),
            ));
        }
    }
    if let Some(max) = schema.get("maximum").and_then(Value::as_f64) {
        let exclusive = flag("exclusiveMaximum");
        if x > max || (exclusive && x == max) {
            let than = if exclusive {
                "than"
            } else {
                "than or equal to"
            };
            out.push(FieldProblem::new(
                path,
                format!("Invalid value: {n}: {path} in body should be less {than} {max}"),
            ));
        }
    }
    if let Some(step) = schema.get("multipleOf").and_then(Value::as_f64)
        && step > 0.0
        && (x / step).fract() != 0.0
    {
        out.push(FieldProblem::new(
            path,
            format!("Invalid value: {n}: {path} in body should be a multiple of {step}"),
        ));
    }
}

fn check_array(
    schema: &Value,
    items: &[Value],
    path: &str,
    patterns: &Patterns,
    out: &mut Vec<FieldProblem>,
) {
    let len = items.len() as u64;
    if let Some(min) = schema.get("minItems").and_then(Value::as_u64)
        && len < min
    {
        out.push(FieldProblem::new(
            path,
            format!("Invalid value: {len}: {path} in body should have at least {min} items"),
        ));
    }
    if let Some(max) = schema.get("maxItems").and_then(Value::as_u64)
        && len > max
    {
        out.push(FieldProblem::new(
            path,
            format!("Too many: {len}: must have at most {max} items"),
        ));
    }
    if schema.get("uniqueItems").and_then(Value::as_bool) == Some(true) {
        for (i, item) in items.iter().enumerate() {
            if items[..i].contains(item) {
                out.push(FieldProblem::new(
                    format!("{path}[{i}]"),
                    format!("Duplicate value: {item}"),
                ));
            }
        }
    }
    if let Some(item_schema) = schema.get("items") {
        for (i, item) in items.iter().enumerate() {
            check(item_schema, item, &format!("{path}[{i}]"), patterns, out);
        }
    }
}

fn format_ok(format: &str, s: &str) -> bool {
    match format {
        "ipv4" => s.parse::<Ipv4Addr>().is_ok(),
        "ipv6" => s.parse::<Ipv6Addr>().is_ok(),
        "cidr" => is_cidr(s),
        "mac" => is_mac(s),
        "uuid" => is_uuid(s),
        "hostname" => is_hostname(s),
        "date" => s.parse::<jiff::civil::Date>().is_ok() && s.len() == 10,
        "date-time" | "datetime" => s.parse::<jiff::Timestamp>().is_ok(),
        "byte" => base64::engine::general_purpose::STANDARD.decode(s).is_ok(),
        "uri" => is_uri(s),
        "email" => is_email(s),
        _ => true,
    }
}

fn is_cidr(s: &str) -> bool {
    let Some((ip, bits)) = s.split_once('/') else {
        return false;
    };
    let Ok(bits) = bits.parse::<u8>() else {
        return false;
    };
    match ip.parse::<IpAddr>() {
        Ok(IpAddr::V4(_)) => bits <= 32,
        Ok(IpAddr::V6(_)) => bits <= 128,
        Err(_) => false,
    }
}

fn is_mac(s: &str) -> bool {
    let sep = if s.contains('-') { '-' } else { ':' };
    let groups: Vec<&str> = s.split(sep).collect();
    matches!(groups.len(), 6 | 8 | 20)
        && groups
            .iter()
            .all(|g| g.len() == 2 && g.chars().all(|c| c.is_ascii_hexdigit()))
}

fn is_uuid(s: &str) -> bool {
    let lens = [8, 4, 4, 4, 12];
    let parts: Vec<&str> = s.split('-').collect();
    parts.len() == lens.len()
        && parts
            .iter()
            .zip(lens)
            .all(|(p, n)| p.len() == n && p.chars().all(|c| c.is_ascii_hexdigit()))
}

fn is_hostname(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 253
        && s.trim_end_matches('.').split('.').all(|label| {
            !label.is_empty()
                && label.len() <= 63
                && !label.starts_with('-')
                && !label.ends_with('-')
                && label.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
        })
}

fn is_uri(s: &str) -> bool {
    let Some((scheme, rest)) = s.split_once(':') else {
        return false;
    };
    let mut chars = scheme.chars();
    chars.next().is_some_and(|c| c.is_ascii_alphabetic())
        && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'))
        && !rest.is_empty()
        && !s.chars().any(char::is_whitespace)
}

fn is_email(s: &str) -> bool {
    s.split_once('@').is_some_and(|(local, domain)| {
        !local.is_empty() && !local.chars().any(char::is_whitespace) && is_hostname(domain)
    })
}

#[cfg(test)]
mod tests;
