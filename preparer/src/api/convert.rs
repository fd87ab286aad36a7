//! Domain ↔ store conversions of the Data API, with the argument checks a request's patterns,
//! windows and plugins pass before they reach the store.

use std::collections::BTreeMap;

use nephrite_krm::Gvk;
use nephrite_merge::id::IdPattern;
use nephrite_merge::metadata::MetadataSelector;
use nephrite_preparer_client::{Plugin, PluginType};

use crate::errors::{ApiError, check_count, check_length};
use crate::store::{CatalogFilter, PluginRecord, StoredGvk, Window};

pub(super) fn window(window: Window) -> Result<Window, ApiError> {
    check_length("window.after_id", &window.after_id)?;
    Ok(window)
}

pub(super) fn patterns(what: &str, patterns: &[String]) -> Result<Vec<IdPattern>, ApiError> {
    check_count(&format!("{what}s"), patterns.len())?;
    patterns
        .iter()
        .map(|p| {
            check_length(what, p)?;
            IdPattern::parse(p).map_err(|source| ApiError::BadId {
                what: what.to_owned(),
                source,
            })
        })
        .collect()
}

pub(super) fn selector(
    what: &str,
    map: &BTreeMap<String, String>,
) -> Result<MetadataSelector, ApiError> {
    check_count(&format!("{what}s"), map.len())?;
    for (key, value) in map {
        check_length(&format!("{what} key"), key)?;
        check_length(&format!("{what} for {key}"), value)?;
    }
    MetadataSelector::new(map.iter().map(|(k, v)| (k.clone(), v.clone()))).map_err(|source| {
        ApiError::BadId {
            what: what.to_owned(),
            source,
        }
    })
}

pub(super) fn catalog_filter(
    id_patterns: &[String],
    metadata: &BTreeMap<String, String>,
) -> Result<CatalogFilter, ApiError> {
    Ok(CatalogFilter {
        id_patterns: patterns("id pattern", id_patterns)?,
        metadata: selector("metadata pattern", metadata)?,
    })
}

pub(super) fn plugin_record(plugin: Plugin) -> Result<PluginRecord, ApiError> {
    let triggers = plugin
        .triggers
        .into_iter()
        .map(|t| {
            if t.version.is_empty() || t.kind.is_empty() {
                return Err(ApiError::Invalid(format!(
                    "plugin {}: trigger {}/{}/{} needs a version and a kind",
                    plugin.name, t.group, t.version, t.kind
                )));
            }
            Ok(StoredGvk {
                group: t.group,
                version: t.version,
                kind: t.kind,
            })
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok(PluginRecord {
        plugin_type: plugin.plugin_type.as_str().to_owned(),
        name: plugin.name,
        endpoint: plugin.endpoint,
        arguments: plugin.arguments,
        properties: plugin.properties,
        triggers,
    })
}

pub(super) fn plugin(record: PluginRecord) -> Result<Plugin, ApiError> {
    let plugin_type = PluginType::parse(&record.plugin_type).ok_or_else(|| {
        ApiError::Store(crate::store::StoreError::Corrupt {
            what: "plugin type",
            message: format!("plugin {}: {:?}", record.name, record.plugin_type),
        })
    })?;
    Ok(Plugin {
        plugin_type,
        name: record.name,
        endpoint: record.endpoint,
        arguments: record.arguments,
        properties: record.properties,
        triggers: record
            .triggers
            .into_iter()
            .map(|t| Gvk {
                group: t.group,
                version: t.version,
                kind: t.kind,
            })
            .collect(),
    })
}
