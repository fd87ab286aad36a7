//! Proto ↔ store conversions for the Data API.

use std::collections::HashMap;

use nephrite_merge::id::IdPattern;
use nephrite_merge::metadata::{Metadata, MetadataSelector};
use nephrite_proto::nephrite::krm::v1::GroupVersionKind;
use nephrite_proto::nephrite::preparer::data::v1 as pb;

use crate::errors::{ApiError, check_count, check_length};
use crate::store::{self, CatalogFilter, DeploymentInfo, PluginRecord, StoredGvk};

pub(super) fn info(info: DeploymentInfo) -> pb::DeploymentInfo {
    pb::DeploymentInfo {
        deployment_id: info.id,
        parent_deployment_id: info.parent_id,
        template_id: info.template_id,
        site_id: info.site_id,
        metadata: info.metadata.into_iter().collect(),
        created: info.created,
        updated: info.updated,
        prepared: info.prepared,
        approved: info.approved,
        error: info.error,
        instance_key: info.instance_key,
    }
}

pub(super) fn metadata(map: HashMap<String, String>) -> Metadata {
    map.into_iter().collect()
}

pub(super) fn window(window: Option<pb::Window>) -> Result<store::Window, ApiError> {
    let window = window.unwrap_or_default();
    check_length("window.after_id", &window.after_id)?;
    Ok(store::Window {
        offset: window.offset,
        limit: window.max_count,
        after_id: window.after_id,
    })
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
    map: &HashMap<String, String>,
) -> Result<MetadataSelector, ApiError> {
    check_count(&format!("{what}s"), map.len())?;
    for (key, value) in map {
        check_length(&format!("{what} key"), key)?;
        check_length(&format!("{what} for {key}"), value)?;
    }
    let mut pairs: Vec<_> = map.iter().collect();
    pairs.sort();
    MetadataSelector::new(pairs.into_iter().map(|(k, v)| (k.clone(), v.clone()))).map_err(
        |source| ApiError::BadId {
            what: what.to_owned(),
            source,
        },
    )
}

pub(super) fn catalog_filter(
    id_patterns: &[String],
    metadata: &HashMap<String, String>,
) -> Result<CatalogFilter, ApiError> {
    Ok(CatalogFilter {
        id_patterns: patterns("id pattern", id_patterns)?,
        metadata: selector("metadata pattern", metadata)?,
    })
}

pub(super) fn plugin_type(value: i32) -> Result<&'static str, ApiError> {
    match pb::PluginType::try_from(value) {
        Ok(pb::PluginType::Prepare) | Ok(pb::PluginType::Unspecified) => Ok("prepare"),
        Ok(pb::PluginType::Validate) => Ok("validate"),
        Ok(pb::PluginType::Schedule) => Ok("schedule"),
        Err(_) => Err(ApiError::Invalid(format!("unknown plugin type {value}"))),
    }
}

fn plugin_type_number(text: &str) -> i32 {
    match text {
        "validate" => pb::PluginType::Validate as i32,
        "schedule" => pb::PluginType::Schedule as i32,
        _ => pb::PluginType::Prepare as i32,
    }
}

pub(super) fn plugin_record(plugin: pb::Plugin) -> Result<PluginRecord, ApiError> {
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
        plugin_type: plugin_type(plugin.r#type)?.to_owned(),
        name: plugin.name,
        endpoint: plugin.endpoint,
        arguments: plugin.arguments,
        properties: plugin.properties.into_iter().collect(),
        triggers,
    })
}

pub(super) fn plugin(record: PluginRecord) -> pb::Plugin {
    pb::Plugin {
        r#type: plugin_type_number(&record.plugin_type),
        name: record.name,
        endpoint: record.endpoint,
        arguments: record.arguments,
        properties: record.properties.into_iter().collect(),
        triggers: record
            .triggers
            .into_iter()
            .map(|t| GroupVersionKind {
                group: t.group,
                version: t.version,
                kind: t.kind,
            })
            .collect(),
    }
}
