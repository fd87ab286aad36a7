//! Deployment, template and site metadata: flat `key → value` strings.
//!
//! Metadata comes from resources of the group `metadata.nephio.org` whose
//! `nephio.org/metadata` mode is `Here` (or absent): every scalar under `spec` becomes a key
//! `<Kind>.<spec path>` — `kind: Site, spec: {region: metro}` gives `Site.region=metro`;
//! nested mappings join with `.` (`Site.location.city`), list items by index
//! (`Site.zones.0`). Keys given directly (`--metadata k=v`) are stored as given.
//!
//! Selection (`select.metadata` in topology resources, `--metadata k=PATTERN` in listings)
//! matches keys exactly and values as [`IdPattern`] value patterns (`*`, `**`).

use std::collections::BTreeMap;

use nephrite_krm::Package;
use serde_json::Value;

use crate::id::{IdError, IdPattern};
use crate::preparation::PrepareMode;

/// Flat metadata, sorted by key.
pub type Metadata = BTreeMap<String, String>;

/// The API group whose resources contribute metadata.
pub const METADATA_GROUP: &str = "metadata.nephio.org";

/// The metadata of `package`: the flattened `spec` of every `metadata.nephio.org` resource
/// whose `nephio.org/metadata` mode is `Here`, in package order (a later resource wins a key).
pub fn extract_metadata(package: &Package) -> Metadata {
    let mut metadata = Metadata::new();
    for object in package.iter() {
        if object.gvk().group != METADATA_GROUP
            || PrepareMode::metadata_of(object) != PrepareMode::Here
        {
            continue;
        }
        if let Some(spec) = object.spec() {
            flatten(&object.kind, spec, &mut metadata);
        }
    }
    metadata
}

fn flatten(prefix: &str, value: &Value, out: &mut Metadata) {
    match value {
        Value::Object(map) => {
            for (key, value) in map {
                flatten(&format!("{prefix}.{key}"), value, out);
            }
        }
        Value::Array(items) => {
            for (index, value) in items.iter().enumerate() {
                flatten(&format!("{prefix}.{index}"), value, out);
            }
        }
        Value::String(text) => {
            out.insert(prefix.to_owned(), text.clone());
        }
        Value::Null => {
            out.insert(prefix.to_owned(), String::new());
        }
        Value::Bool(_) | Value::Number(_) => {
            out.insert(prefix.to_owned(), value.to_string());
        }
    }
}

/// `base` with `own` laid over it: a key in both takes `own`'s value (a deployment's own
/// metadata wins over its template's).
pub fn overlay(base: &Metadata, own: &Metadata) -> Metadata {
    let mut merged = base.clone();
    merged.extend(own.iter().map(|(k, v)| (k.clone(), v.clone())));
    merged
}

/// A metadata selector: every key must be present with a value matching its pattern.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct MetadataSelector {
    entries: Vec<(String, IdPattern)>,
}

impl MetadataSelector {
    /// A selector from `key → value pattern` pairs.
    pub fn new<K: Into<String>>(
        pairs: impl IntoIterator<Item = (K, impl AsRef<str>)>,
    ) -> Result<Self, IdError> {
        let entries = pairs
            .into_iter()
            .map(|(key, pattern)| Ok((key.into(), IdPattern::parse_value(pattern.as_ref())?)))
            .collect::<Result<Vec<_>, IdError>>()?;
        Ok(MetadataSelector { entries })
    }

    /// Reads `select.metadata` (a mapping of strings; numbers and booleans are taken as text).
    pub fn from_json(value: Option<&Value>) -> Result<Self, IdError> {
        let Some(Value::Object(map)) = value else {
            return Ok(MetadataSelector::default());
        };
        MetadataSelector::new(map.iter().map(|(key, value)| {
            let text = match value {
                Value::String(text) => text.clone(),
                other => other.to_string(),
            };
            (key.clone(), text)
        }))
    }

    /// The `key → pattern` pairs.
    pub fn entries(&self) -> &[(String, IdPattern)] {
        &self.entries
    }

    /// Whether the selector has no entries (it matches everything).
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Whether `metadata` has every key with a matching value.
    pub fn matches(&self, metadata: &Metadata) -> bool {
        self.entries.iter().all(|(key, pattern)| {
            metadata
                .get(key)
                .is_some_and(|value| pattern.matches(value))
        })
    }
}

#[cfg(test)]
mod tests;
