//! Catalog handlers of the Data API: templates, sites and plugins.

use std::collections::HashMap;

use nephrite_merge::Metadata;
use nephrite_merge::metadata::{extract_metadata, overlay};
use nephrite_proto::nephrite::preparer::data::v1 as pb;
use tonic::{Request, Response, Status};

use super::{DataApi, Result, Stream_, convert, stream};
use crate::errors::{ApiError, check_id, parse_package};
use crate::store::{SiteRecord, TemplateRecord};

/// A template's or site's registration checked: its id, its package parsed (within the
/// request limits, off the async threads), and its metadata — the package's own, overlaid by the
/// request's. Returns the metadata and the package as stored.
async fn checked_package(
    kind: &str,
    id: &str,
    package_yaml: String,
    metadata: HashMap<String, String>,
) -> Result<(Metadata, String)> {
    check_id(&format!("{kind} id"), id)?;
    let package = parse_package(format!("{kind} {id}"), "package_yaml", package_yaml).await?;
    let metadata = overlay(&extract_metadata(&package), &convert::metadata(metadata));
    Ok((metadata, package.to_yaml()))
}

pub(super) async fn register_template(
    api: &DataApi,
    request: Request<pb::RegisterTemplateRequest>,
) -> Result<Response<pb::RegisterResponse>> {
    let r = request.into_inner();
    let (metadata, package_yaml) =
        checked_package("template", &r.id, r.package_yaml, r.metadata).await?;
    let created = api
        .store
        .put_template(TemplateRecord {
            id: r.id,
            metadata,
            package_yaml,
        })
        .await
        .map_err(ApiError::from)?;
    api.changes.bump();
    Ok(Response::new(pb::RegisterResponse { created }))
}

pub(super) async fn get_template(
    api: &DataApi,
    request: Request<pb::GetRequest>,
) -> Result<Response<pb::Template>> {
    let id = request.into_inner().id;
    check_id("template id", &id)?;
    let t = api.store.get_template(&id).await.map_err(ApiError::from)?;
    Ok(Response::new(pb::Template {
        info: Some(pb::TemplateInfo {
            id: t.id,
            metadata: t.metadata.into_iter().collect(),
        }),
        package_yaml: t.package_yaml,
    }))
}

pub(super) async fn list_templates(
    api: &DataApi,
    request: Request<pb::ListTemplatesRequest>,
) -> Result<Response<Stream_<pb::TemplateInfo>>> {
    let r = request.into_inner();
    let filter = convert::catalog_filter(&r.id_patterns, &r.metadata_patterns)?;
    let rows = api
        .store
        .list_templates(&filter, &convert::window(r.window)?)
        .await
        .map_err(ApiError::from)?;
    Ok(Response::new(stream(
        rows.into_iter()
            .map(|(id, metadata)| pb::TemplateInfo {
                id,
                metadata: metadata.into_iter().collect(),
            })
            .collect(),
    )))
}

pub(super) async fn delete_template(
    api: &DataApi,
    request: Request<pb::DeleteRequest>,
) -> Result<Response<pb::DeleteResponse>> {
    let id = request.into_inner().id;
    check_id("template id", &id)?;
    let deleted = api
        .store
        .delete_template(&id)
        .await
        .map_err(ApiError::from)?;
    api.changes.bump();
    Ok(Response::new(pb::DeleteResponse { deleted }))
}

pub(super) async fn register_site(
    api: &DataApi,
    request: Request<pb::RegisterSiteRequest>,
) -> Result<Response<pb::RegisterResponse>> {
    let r = request.into_inner();
    let (metadata, package_yaml) =
        checked_package("site", &r.id, r.package_yaml, r.metadata).await?;
    let created = api
        .store
        .put_site(SiteRecord {
            id: r.id,
            metadata,
            package_yaml,
            template_id: r.template_id,
            deployment_id: r.deployment_id,
        })
        .await
        .map_err(ApiError::from)?;
    api.changes.bump();
    Ok(Response::new(pb::RegisterResponse { created }))
}

pub(super) async fn get_site(
    api: &DataApi,
    request: Request<pb::GetRequest>,
) -> Result<Response<pb::Site>> {
    let id = request.into_inner().id;
    check_id("site id", &id)?;
    let s = api.store.get_site(&id).await.map_err(ApiError::from)?;
    Ok(Response::new(pb::Site {
        info: Some(pb::SiteInfo {
            id: s.id,
            metadata: s.metadata.into_iter().collect(),
            template_id: s.template_id,
            deployment_id: s.deployment_id,
        }),
        package_yaml: s.package_yaml,
    }))
}

pub(super) async fn list_sites(
    api: &DataApi,
    request: Request<pb::ListSitesRequest>,
) -> Result<Response<Stream_<pb::SiteInfo>>> {
    let r = request.into_inner();
    let filter = convert::catalog_filter(&r.id_patterns, &r.metadata_patterns)?;
    let rows = api
        .store
        .list_sites(&filter, &convert::window(r.window)?)
        .await
        .map_err(ApiError::from)?;
    Ok(Response::new(stream(
        rows.into_iter()
            .map(|s| pb::SiteInfo {
                id: s.id,
                metadata: s.metadata.into_iter().collect(),
                template_id: s.template_id,
                deployment_id: s.deployment_id,
            })
            .collect(),
    )))
}

pub(super) async fn delete_site(
    api: &DataApi,
    request: Request<pb::DeleteRequest>,
) -> Result<Response<pb::DeleteResponse>> {
    let id = request.into_inner().id;
    check_id("site id", &id)?;
    let deleted = api.store.delete_site(&id).await.map_err(ApiError::from)?;
    api.changes.bump();
    Ok(Response::new(pb::DeleteResponse { deleted }))
}

pub(super) async fn register_plugin(
    api: &DataApi,
    request: Request<pb::RegisterPluginRequest>,
) -> Result<Response<pb::RegisterResponse>> {
    let plugin = request
        .into_inner()
        .plugin
        .ok_or_else(|| Status::invalid_argument("RegisterPlugin: plugin is required"))?;
    check_id("plugin name", &plugin.name)?;
    if plugin
        .endpoint
        .parse::<nephrite_runtime::Endpoint>()
        .is_err()
    {
        return Err(Status::invalid_argument(format!(
            "plugin {}: invalid endpoint {:?}",
            plugin.name, plugin.endpoint
        )));
    }
    let record = convert::plugin_record(plugin)?;
    let created = api.store.put_plugin(record).await.map_err(ApiError::from)?;
    api.changes.bump();
    Ok(Response::new(pb::RegisterResponse { created }))
}

pub(super) async fn get_plugin(
    api: &DataApi,
    request: Request<pb::GetRequest>,
) -> Result<Response<pb::Plugin>> {
    let name = request.into_inner().id;
    check_id("plugin name", &name)?;
    let plugin = api.store.get_plugin(&name).await.map_err(ApiError::from)?;
    Ok(Response::new(convert::plugin(plugin)))
}

pub(super) async fn list_plugins(
    api: &DataApi,
    request: Request<pb::ListPluginsRequest>,
) -> Result<Response<Stream_<pb::Plugin>>> {
    let r = request.into_inner();
    let names = convert::patterns("name pattern", &r.name_patterns)?;
    let wanted_type = (r.r#type != 0)
        .then(|| convert::plugin_type(r.r#type))
        .transpose()?;
    let window = convert::window(r.window)?;
    let plugins = api.store.list_plugins().await.map_err(ApiError::from)?;
    let rows: Vec<_> = plugins
        .into_iter()
        .filter(|p| p.name.as_str() > window.after_id.as_str())
        .filter(|p| wanted_type.is_none_or(|t| t == p.plugin_type))
        .filter(|p| names.is_empty() || names.iter().any(|n| n.matches(&p.name)))
        .filter(|p| {
            r.trigger.as_ref().is_none_or(|t| {
                p.triggers
                    .iter()
                    .any(|g| g.group == t.group && g.version == t.version && g.kind == t.kind)
            })
        })
        .skip(window.offset as usize)
        .take(window.page_size())
        .map(convert::plugin)
        .collect();
    Ok(Response::new(stream(rows)))
}

pub(super) async fn delete_plugin(
    api: &DataApi,
    request: Request<pb::DeleteRequest>,
) -> Result<Response<pb::DeleteResponse>> {
    let name = request.into_inner().id;
    check_id("plugin name", &name)?;
    let deleted = api
        .store
        .delete_plugin(&name)
        .await
        .map_err(ApiError::from)?;
    api.changes.bump();
    Ok(Response::new(pb::DeleteResponse { deleted }))
}
