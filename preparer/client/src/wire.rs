//! The protobuf ↔ domain conversions of the Data API (`nephrite.preparer.data.v1`), in both
//! directions: the client turns its requests into messages and the answers into domain
//! values; the preparer's server edge does the opposite with the same impls, so each message
//! is converted in one place. An answer that cannot convert (a missing field, an unknown enum
//! value) is a [`WireError`].
//!
//! Only the gRPC client of this crate and the preparer's server edge use these; everything
//! else sees the domain values alone.

mod batch;

use nephrite_krm::Gvk;
use nephrite_proto::krm_v1::GroupVersionKind;
use nephrite_proto::nephrite::preparer::data::v1 as pb;

use crate::{
    CatalogQuery, Change, Created, Deployment, DeploymentInfo, DeploymentPage, DeploymentQuery,
    DeploymentRequest, DeploymentRevision, EntityKind, Lease, Modification, Plugin, PluginQuery,
    PluginType, Site, SiteInfo, Template, TemplateInfo, Window, WireError,
};

fn gvk(gvk: GroupVersionKind) -> Gvk {
    Gvk {
        group: gvk.group,
        version: gvk.version,
        kind: gvk.kind,
    }
}

fn wire_gvk(gvk: Gvk) -> GroupVersionKind {
    GroupVersionKind {
        group: gvk.group,
        version: gvk.version,
        kind: gvk.kind,
    }
}

impl From<Window> for pb::Window {
    fn from(window: Window) -> Self {
        pb::Window {
            offset: window.offset,
            max_count: window.limit,
            after_id: window.after_id,
        }
    }
}

impl From<Option<pb::Window>> for Window {
    fn from(window: Option<pb::Window>) -> Self {
        let window = window.unwrap_or_default();
        Window {
            offset: window.offset,
            limit: window.max_count,
            after_id: window.after_id,
        }
    }
}

impl From<TemplateInfo> for pb::TemplateInfo {
    fn from(info: TemplateInfo) -> Self {
        pb::TemplateInfo {
            id: info.id,
            metadata: info.metadata.into_iter().collect(),
        }
    }
}

impl From<pb::TemplateInfo> for TemplateInfo {
    fn from(info: pb::TemplateInfo) -> Self {
        TemplateInfo {
            id: info.id,
            metadata: info.metadata.into_iter().collect(),
        }
    }
}

/// A template, site or deployment travels as its row (`info`, always set) and its package.
macro_rules! packaged {
    ($domain:ident, $wire:ty, $field:literal) => {
        impl From<$domain> for $wire {
            fn from(entry: $domain) -> Self {
                Self {
                    info: Some(entry.info.into()),
                    package_yaml: entry.package_yaml,
                }
            }
        }

        impl TryFrom<$wire> for $domain {
            type Error = WireError;

            fn try_from(entry: $wire) -> Result<Self, WireError> {
                Ok($domain {
                    info: entry
                        .info
                        .ok_or(WireError::Missing { field: $field })?
                        .into(),
                    package_yaml: entry.package_yaml,
                })
            }
        }
    };
}

packaged!(Template, pb::Template, "Template.info");
packaged!(Site, pb::Site, "Site.info");
packaged!(Deployment, pb::Deployment, "Deployment.info");

impl From<Template> for pb::RegisterTemplateRequest {
    fn from(template: Template) -> Self {
        pb::RegisterTemplateRequest {
            id: template.info.id,
            metadata: template.info.metadata.into_iter().collect(),
            package_yaml: template.package_yaml,
        }
    }
}

impl From<pb::RegisterTemplateRequest> for Template {
    fn from(request: pb::RegisterTemplateRequest) -> Self {
        Template {
            info: TemplateInfo {
                id: request.id,
                metadata: request.metadata.into_iter().collect(),
            },
            package_yaml: request.package_yaml,
        }
    }
}

impl From<SiteInfo> for pb::SiteInfo {
    fn from(info: SiteInfo) -> Self {
        pb::SiteInfo {
            id: info.id,
            metadata: info.metadata.into_iter().collect(),
            template_id: info.template_id,
            deployment_id: info.deployment_id,
        }
    }
}

impl From<pb::SiteInfo> for SiteInfo {
    fn from(info: pb::SiteInfo) -> Self {
        SiteInfo {
            id: info.id,
            metadata: info.metadata.into_iter().collect(),
            template_id: info.template_id,
            deployment_id: info.deployment_id,
        }
    }
}

impl From<Site> for pb::RegisterSiteRequest {
    fn from(site: Site) -> Self {
        pb::RegisterSiteRequest {
            id: site.info.id,
            metadata: site.info.metadata.into_iter().collect(),
            package_yaml: site.package_yaml,
            template_id: site.info.template_id,
            deployment_id: site.info.deployment_id,
        }
    }
}

impl From<pb::RegisterSiteRequest> for Site {
    fn from(request: pb::RegisterSiteRequest) -> Self {
        Site {
            info: SiteInfo {
                id: request.id,
                metadata: request.metadata.into_iter().collect(),
                template_id: request.template_id,
                deployment_id: request.deployment_id,
            },
            package_yaml: request.package_yaml,
        }
    }
}

/// The two catalog listings' requests carry the same fields: one pair of conversions each.
macro_rules! catalog_query {
    ($request:ty) => {
        impl From<CatalogQuery> for $request {
            fn from(query: CatalogQuery) -> Self {
                Self {
                    id_patterns: query.id_patterns,
                    metadata_patterns: query.metadata_patterns.into_iter().collect(),
                    window: Some(query.window.into()),
                }
            }
        }

        impl From<$request> for CatalogQuery {
            fn from(request: $request) -> Self {
                CatalogQuery {
                    id_patterns: request.id_patterns,
                    metadata_patterns: request.metadata_patterns.into_iter().collect(),
                    window: request.window.into(),
                }
            }
        }
    };
}

catalog_query!(pb::ListTemplatesRequest);
catalog_query!(pb::ListSitesRequest);

impl From<PluginType> for pb::PluginType {
    fn from(plugin_type: PluginType) -> Self {
        match plugin_type {
            PluginType::Prepare => pb::PluginType::Prepare,
            PluginType::Validate => pb::PluginType::Validate,
            PluginType::Schedule => pb::PluginType::Schedule,
        }
    }
}

/// A plugin type from its wire number; unspecified reads as `Prepare`.
fn plugin_type(field: &'static str, value: i32) -> Result<PluginType, WireError> {
    match pb::PluginType::try_from(value) {
        Ok(pb::PluginType::Prepare | pb::PluginType::Unspecified) => Ok(PluginType::Prepare),
        Ok(pb::PluginType::Validate) => Ok(PluginType::Validate),
        Ok(pb::PluginType::Schedule) => Ok(PluginType::Schedule),
        Err(_) => Err(WireError::UnknownValue { field, value }),
    }
}

impl From<Plugin> for pb::Plugin {
    fn from(plugin: Plugin) -> Self {
        pb::Plugin {
            r#type: pb::PluginType::from(plugin.plugin_type) as i32,
            name: plugin.name,
            endpoint: plugin.endpoint,
            arguments: plugin.arguments,
            properties: plugin.properties.into_iter().collect(),
            triggers: plugin.triggers.into_iter().map(wire_gvk).collect(),
        }
    }
}

impl TryFrom<pb::Plugin> for Plugin {
    type Error = WireError;

    fn try_from(plugin: pb::Plugin) -> Result<Self, WireError> {
        Ok(Plugin {
            plugin_type: plugin_type("Plugin.type", plugin.r#type)?,
            name: plugin.name,
            endpoint: plugin.endpoint,
            arguments: plugin.arguments,
            properties: plugin.properties.into_iter().collect(),
            triggers: plugin.triggers.into_iter().map(gvk).collect(),
        })
    }
}

impl From<PluginQuery> for pb::ListPluginsRequest {
    fn from(query: PluginQuery) -> Self {
        pb::ListPluginsRequest {
            r#type: query
                .plugin_type
                .map_or(pb::PluginType::Unspecified, pb::PluginType::from)
                as i32,
            name_patterns: query.name_patterns,
            trigger: query.trigger.map(wire_gvk),
            window: Some(query.window.into()),
        }
    }
}

impl TryFrom<pb::ListPluginsRequest> for PluginQuery {
    type Error = WireError;

    fn try_from(request: pb::ListPluginsRequest) -> Result<Self, WireError> {
        Ok(PluginQuery {
            plugin_type: (request.r#type != pb::PluginType::Unspecified as i32)
                .then(|| plugin_type("ListPluginsRequest.type", request.r#type))
                .transpose()?,
            name_patterns: request.name_patterns,
            trigger: request.trigger.map(gvk),
            window: request.window.into(),
        })
    }
}

impl From<DeploymentInfo> for pb::DeploymentInfo {
    fn from(info: DeploymentInfo) -> Self {
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
}

impl From<pb::DeploymentInfo> for DeploymentInfo {
    fn from(info: pb::DeploymentInfo) -> Self {
        DeploymentInfo {
            id: info.deployment_id,
            parent_id: info.parent_deployment_id,
            template_id: info.template_id,
            site_id: info.site_id,
            instance_key: info.instance_key,
            metadata: info.metadata.into_iter().collect(),
            created: info.created,
            updated: info.updated,
            prepared: info.prepared,
            approved: info.approved,
            error: info.error,
        }
    }
}

impl From<DeploymentRevision> for pb::DeploymentRevision {
    fn from(revision: DeploymentRevision) -> Self {
        pb::DeploymentRevision {
            number: revision.number,
            created: revision.created,
            author: revision.author,
            summary: revision.summary,
            package_yaml: revision.package_yaml,
        }
    }
}

impl From<pb::DeploymentRevision> for DeploymentRevision {
    fn from(revision: pb::DeploymentRevision) -> Self {
        DeploymentRevision {
            number: revision.number,
            created: revision.created,
            author: revision.author,
            summary: revision.summary,
            package_yaml: revision.package_yaml,
        }
    }
}

/// The row of an answer that carries one (`UpdateDeploymentResponse.info`, …).
pub fn required_info(
    field: &'static str,
    info: Option<pb::DeploymentInfo>,
) -> Result<DeploymentInfo, WireError> {
    info.map(DeploymentInfo::from)
        .ok_or(WireError::Missing { field })
}

impl From<DeploymentRequest> for pb::CreateDeploymentRequest {
    fn from(request: DeploymentRequest) -> Self {
        pb::CreateDeploymentRequest {
            parent_deployment_id: request.parent_id,
            template_id: request.template_id,
            site_id: request.site_id,
            merge_package_yaml: request.merge_package_yaml,
            merge_metadata: request.merge_metadata.into_iter().collect(),
            prepared: request.prepared,
            approved: request.approved,
            instance_key: request.instance_key,
        }
    }
}

impl From<pb::CreateDeploymentRequest> for DeploymentRequest {
    fn from(request: pb::CreateDeploymentRequest) -> Self {
        DeploymentRequest {
            parent_id: request.parent_deployment_id,
            template_id: request.template_id,
            site_id: request.site_id,
            merge_package_yaml: request.merge_package_yaml,
            merge_metadata: request.merge_metadata.into_iter().collect(),
            prepared: request.prepared,
            approved: request.approved,
            instance_key: request.instance_key,
        }
    }
}

impl From<Created> for pb::CreateDeploymentResponse {
    fn from(created: Created) -> Self {
        pb::CreateDeploymentResponse {
            created: created.created,
            deployment_id: created.deployment_id,
        }
    }
}

impl From<pb::CreateDeploymentResponse> for Created {
    fn from(response: pb::CreateDeploymentResponse) -> Self {
        Created {
            created: response.created,
            deployment_id: response.deployment_id,
        }
    }
}

impl From<DeploymentQuery> for pb::ListDeploymentsRequest {
    fn from(query: DeploymentQuery) -> Self {
        pb::ListDeploymentsRequest {
            parent_deployment_id: query.parent_id.unwrap_or_default(),
            metadata_patterns: query.metadata_patterns.into_iter().collect(),
            template_id_patterns: query.template_id_patterns,
            template_metadata_patterns: query.template_metadata_patterns.into_iter().collect(),
            site_id_patterns: query.site_id_patterns,
            site_metadata_patterns: query.site_metadata_patterns.into_iter().collect(),
            prepared: query.prepared,
            approved: query.approved,
            window: Some(query.window.into()),
        }
    }
}

impl From<pb::ListDeploymentsRequest> for DeploymentQuery {
    fn from(request: pb::ListDeploymentsRequest) -> Self {
        DeploymentQuery {
            parent_id: (!request.parent_deployment_id.is_empty())
                .then_some(request.parent_deployment_id),
            metadata_patterns: request.metadata_patterns.into_iter().collect(),
            template_id_patterns: request.template_id_patterns,
            template_metadata_patterns: request.template_metadata_patterns.into_iter().collect(),
            site_id_patterns: request.site_id_patterns,
            site_metadata_patterns: request.site_metadata_patterns.into_iter().collect(),
            prepared: request.prepared,
            approved: request.approved,
            window: request.window.into(),
        }
    }
}

impl From<DeploymentPage> for pb::ListDeploymentsResponse {
    fn from(page: DeploymentPage) -> Self {
        pb::ListDeploymentsResponse {
            deployments: page.deployments.into_iter().map(Into::into).collect(),
            next_after_id: page.next_after_id.unwrap_or_default(),
            revision: page.revision,
        }
    }
}

impl From<pb::ListDeploymentsResponse> for DeploymentPage {
    fn from(response: pb::ListDeploymentsResponse) -> Self {
        DeploymentPage {
            deployments: response.deployments.into_iter().map(Into::into).collect(),
            next_after_id: (!response.next_after_id.is_empty()).then_some(response.next_after_id),
            revision: response.revision,
        }
    }
}

impl From<Modification> for pb::Modification {
    fn from(modification: Modification) -> Self {
        pb::Modification {
            deployment_id: modification.deployment_id,
            token: modification.token,
            package_yaml: modification.package_yaml,
            lease_expires: modification.lease_expires,
        }
    }
}

impl From<pb::Modification> for Modification {
    fn from(modification: pb::Modification) -> Self {
        Modification {
            deployment_id: modification.deployment_id,
            token: modification.token,
            package_yaml: modification.package_yaml,
            lease_expires: modification.lease_expires,
        }
    }
}

impl From<Lease> for pb::Lease {
    fn from(lease: Lease) -> Self {
        pb::Lease {
            name: lease.name,
            holder: lease.holder,
            token: lease.token,
            transitions: lease.transitions,
            expires: lease.expires,
            remaining_ms: u64::try_from(lease.remaining.as_millis()).unwrap_or(u64::MAX),
        }
    }
}

impl From<pb::Lease> for Lease {
    fn from(lease: pb::Lease) -> Self {
        Lease {
            name: lease.name,
            holder: lease.holder,
            token: lease.token,
            transitions: lease.transitions,
            expires: lease.expires,
            remaining: std::time::Duration::from_millis(lease.remaining_ms),
        }
    }
}

impl From<EntityKind> for pb::EntityKind {
    fn from(kind: EntityKind) -> Self {
        match kind {
            EntityKind::Template => pb::EntityKind::Template,
            EntityKind::Site => pb::EntityKind::Site,
            EntityKind::Plugin => pb::EntityKind::Plugin,
            EntityKind::Deployment => pb::EntityKind::Deployment,
            EntityKind::Lease => pb::EntityKind::Lease,
        }
    }
}

/// An entity kind from its wire number (unspecified is not a kind).
pub fn entity_kind(field: &'static str, value: i32) -> Result<EntityKind, WireError> {
    match pb::EntityKind::try_from(value) {
        Ok(pb::EntityKind::Template) => Ok(EntityKind::Template),
        Ok(pb::EntityKind::Site) => Ok(EntityKind::Site),
        Ok(pb::EntityKind::Plugin) => Ok(EntityKind::Plugin),
        Ok(pb::EntityKind::Deployment) => Ok(EntityKind::Deployment),
        Ok(pb::EntityKind::Lease) => Ok(EntityKind::Lease),
        Ok(pb::EntityKind::Unspecified) | Err(_) => Err(WireError::UnknownValue { field, value }),
    }
}

impl From<Change> for pb::Change {
    fn from(change: Change) -> Self {
        pb::Change {
            revision: change.revision,
            kind: pb::EntityKind::from(change.kind) as i32,
            id: change.id,
            r#type: if change.deleted {
                pb::ChangeType::Delete
            } else {
                pb::ChangeType::Put
            } as i32,
            deployment: change.deployment.map(Into::into),
        }
    }
}

impl TryFrom<pb::Change> for Change {
    type Error = WireError;

    fn try_from(change: pb::Change) -> Result<Self, WireError> {
        let deleted = match pb::ChangeType::try_from(change.r#type) {
            Ok(pb::ChangeType::Put) => false,
            Ok(pb::ChangeType::Delete) => true,
            Ok(pb::ChangeType::Unspecified) | Err(_) => {
                return Err(WireError::UnknownValue {
                    field: "Change.type",
                    value: change.r#type,
                });
            }
        };
        Ok(Change {
            revision: change.revision,
            kind: entity_kind("Change.kind", change.kind)?,
            id: change.id,
            deleted,
            deployment: change.deployment.map(Into::into),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info() -> DeploymentInfo {
        DeploymentInfo {
            id: "d1".into(),
            parent_id: "p".into(),
            template_id: "t".into(),
            site_id: "s".into(),
            instance_key: "k".into(),
            metadata: [("a".to_owned(), "1".to_owned())].into(),
            created: "2026-01-01T00:00:00Z".into(),
            updated: "2026-01-02T00:00:00Z".into(),
            prepared: true,
            approved: false,
            error: "e".into(),
        }
    }

    #[test]
    fn a_deployment_row_survives_the_wire_both_ways() {
        let wire = pb::DeploymentInfo::from(info());
        assert_eq!(wire.deployment_id, "d1");
        assert_eq!(wire.parent_deployment_id, "p");
        assert_eq!(DeploymentInfo::from(wire), info());
    }

    #[test]
    fn a_change_survives_the_wire_and_an_unknown_kind_is_refused() {
        let change = Change {
            revision: 7,
            kind: EntityKind::Deployment,
            id: "d1".into(),
            deleted: true,
            deployment: Some(info()),
        };
        let wire = pb::Change::from(change.clone());
        assert_eq!(Change::try_from(wire.clone()), Ok(change));
        let unknown = pb::Change { kind: 0, ..wire };
        assert_eq!(
            Change::try_from(unknown),
            Err(WireError::UnknownValue {
                field: "Change.kind",
                value: 0
            })
        );
    }

    #[test]
    fn an_unspecified_plugin_type_reads_as_prepare_and_an_unknown_one_is_refused() {
        let plugin = pb::Plugin {
            r#type: 0,
            name: "p".into(),
            triggers: vec![wire_gvk(Gvk::new("", "v1", "ConfigMap"))],
            ..Default::default()
        };
        let read = Plugin::try_from(plugin.clone()).expect("converts");
        assert_eq!(read.plugin_type, PluginType::Prepare);
        assert_eq!(read.triggers, vec![Gvk::new("", "v1", "ConfigMap")]);
        assert_eq!(
            Plugin::try_from(pb::Plugin {
                r#type: 42,
                ..plugin
            }),
            Err(WireError::UnknownValue {
                field: "Plugin.type",
                value: 42
            })
        );
    }

    #[test]
    fn an_answer_without_its_row_is_refused_naming_the_field() {
        assert_eq!(
            Deployment::try_from(pb::Deployment::default()),
            Err(WireError::Missing {
                field: "Deployment.info"
            })
        );
        assert_eq!(
            Site::try_from(pb::Site::default()),
            Err(WireError::Missing { field: "Site.info" })
        );
    }

    #[test]
    fn an_empty_next_after_id_is_the_last_page_and_an_empty_parent_is_none() {
        let page = DeploymentPage::from(pb::ListDeploymentsResponse::default());
        assert_eq!(page.next_after_id, None);
        let query = DeploymentQuery::from(pb::ListDeploymentsRequest::default());
        assert_eq!(query.parent_id, None);
        assert_eq!(
            pb::ListDeploymentsRequest::from(DeploymentQuery::default()).parent_deployment_id,
            ""
        );
    }
}
