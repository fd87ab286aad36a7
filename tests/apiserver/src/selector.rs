//! Label selectors (delegated to `nephrite-krm`) and field selectors (`=`, `==`, `!=` on
//! dotted paths such as `metadata.name`).

use nephrite_krm::Object;
use serde_json::Value;

/// A label selector as the `labelSelector` query parameter gives it, parsed and matched by
/// `nephrite-krm` (the same semantics every Nephrite controller uses: `!=` and `notin` also match
/// objects without the label).
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct LabelSelector(nephrite_krm::LabelSelector);

impl LabelSelector {
    /// Parses the `labelSelector` query parameter; the empty string selects everything.
    pub fn parse(s: &str) -> Result<Self, String> {
        if s.trim().is_empty() {
            return Ok(Self::default());
        }
        s.parse().map(Self).map_err(|e| e.to_string())
    }

    /// Whether the object's `metadata.labels` satisfy every requirement.
    pub fn matches(&self, obj: &Object) -> bool {
        self.0.matches(obj)
    }
}

/// A parsed field selector; the empty selector matches everything.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct FieldSelector(Vec<(String, bool, String)>);

impl FieldSelector {
    /// Parses the `fieldSelector` query parameter (`path=value`, `path==value`, `path!=value`).
    pub fn parse(s: &str) -> Result<Self, String> {
        let mut reqs = Vec::new();
        if s.trim().is_empty() {
            return Ok(Self(reqs));
        }
        for part in s.split(',') {
            let part = part.trim();
            let (path, equal, value) = if let Some((k, v)) = part.split_once("!=") {
                (k, false, v)
            } else if let Some((k, v)) = part.split_once("==") {
                (k, true, v)
            } else if let Some((k, v)) = part.split_once('=') {
                (k, true, v)
            } else {
                return Err(format!("invalid field selector requirement {part:?}"));
            };
            let path = path.trim();
            if path.is_empty() || path.split('.').any(str::is_empty) {
                return Err(format!("invalid field path {path:?}"));
            }
            reqs.push((path.to_string(), equal, value.trim().to_string()));
        }
        Ok(Self(reqs))
    }

    /// A selector for exactly one name (used by the `/name?watch` form).
    pub fn for_name(name: &str) -> Self {
        Self(vec![("metadata.name".into(), true, name.into())])
    }

    /// Adds another selector's requirements.
    pub fn and(mut self, other: Self) -> Self {
        self.0.extend(other.0);
        self
    }

    /// Whether every requirement holds. Missing fields compare as the empty string.
    pub fn matches(&self, obj: &Object) -> bool {
        self.0.iter().all(|(path, equal, want)| {
            let have = match field_value(obj, path) {
                None | Some(Value::Null) => String::new(),
                Some(Value::String(s)) => s,
                Some(other) => other.to_string(),
            };
            (have == *want) == *equal
        })
    }
}

/// The value at a dotted path of an object (`metadata.name`, `spec.nodeName`).
fn field_value(obj: &Object, path: &str) -> Option<Value> {
    let mut segments = path.split('.');
    let root = match segments.next()? {
        "apiVersion" => Value::String(obj.api_version.clone()),
        "kind" => Value::String(obj.kind.clone()),
        "metadata" => match path {
            "metadata.name" => return obj.name().map(|n| Value::String(n.to_string())),
            "metadata.namespace" => return obj.namespace().map(|n| Value::String(n.to_string())),
            _ => serde_json::to_value(&obj.metadata).ok()?,
        },
        field => obj.body.get(field)?.clone(),
    };
    let mut cur = &root;
    for seg in segments {
        cur = cur.get(seg)?;
    }
    Some(cur.clone())
}

#[cfg(test)]
mod tests;
