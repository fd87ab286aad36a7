//! Label selectors (delegated to `nephrite-krm`) and field selectors (`=`, `==`, `!=` on
//! dotted paths such as `metadata.name`).

use serde_json::Value;

/// A label selector as the `labelSelector` query parameter gives it, parsed and matched by
/// `nephrite-krm` (the same semantics every Nephrite controller uses: `!=` and `notin` also match
/// objects without the label).
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct LabelSelector(nephrite_krm::LabelSelector);

/// An object's `metadata.labels`, read in place from its JSON.
struct JsonLabels<'a>(Option<&'a serde_json::Map<String, Value>>);

impl nephrite_krm::LabelLookup for JsonLabels<'_> {
    fn label_value(&self, key: &str) -> Option<&str> {
        self.0?.get(key)?.as_str()
    }
}

impl LabelSelector {
    /// Parses the `labelSelector` query parameter; the empty string selects everything.
    pub fn parse(s: &str) -> Result<Self, String> {
        if s.trim().is_empty() {
            return Ok(Self::default());
        }
        s.parse().map(Self).map_err(|e| e.to_string())
    }

    /// Whether the object's `metadata.labels` satisfy every requirement.
    pub fn matches(&self, obj: &Value) -> bool {
        let labels = obj.pointer("/metadata/labels").and_then(Value::as_object);
        self.0.matches(&JsonLabels(labels))
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
    pub fn matches(&self, obj: &Value) -> bool {
        self.0.iter().all(|(path, equal, want)| {
            let mut cur = Some(obj);
            for seg in path.split('.') {
                cur = cur.and_then(|c| c.get(seg));
            }
            let have = match cur {
                None | Some(Value::Null) => String::new(),
                Some(Value::String(s)) => s.clone(),
                Some(other) => other.to_string(),
            };
            (have == *want) == *equal
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn obj(labels: Value) -> Value {
        json!({"metadata": {"name": "a", "namespace": "ns", "labels": labels}})
    }

    #[test]
    fn label_operators() {
        let o = obj(json!({"app": "web", "tier": "front"}));
        for (sel, want) in [
            ("", true),
            ("app=web", true),
            ("app==web", true),
            ("app!=web", false),
            ("app in (web, db)", true),
            ("app notin (web,db)", false),
            ("tier", true),
            ("!tier", false),
            ("!missing", true),
            ("missing!=x", true),
            ("app=web,tier in (back)", false),
            ("app in (db),tier", false),
        ] {
            let s = LabelSelector::parse(sel).unwrap_or_else(|e| panic!("{sel}: {e}"));
            assert_eq!(s.matches(&o), want, "{sel}");
        }
    }

    #[test]
    fn label_parse_errors() {
        assert!(LabelSelector::parse("app in (a").is_err());
        assert!(LabelSelector::parse("a,,b").is_err());
        assert!(LabelSelector::parse("a b=c").is_err());
    }

    #[test]
    fn field_selectors() {
        let o = obj(json!({}));
        let m = |s: &str| FieldSelector::parse(s).map(|f| f.matches(&o));
        assert_eq!(m("metadata.name=a"), Ok(true));
        assert_eq!(m("metadata.name!=a"), Ok(false));
        assert_eq!(m("metadata.namespace==ns,metadata.name=b"), Ok(false));
        assert_eq!(m("spec.nodeName="), Ok(true));
        assert!(m("metadata..name=a").is_err());
        assert!(m("nonsense").is_err());
    }
}
