//! The catalog calls of the Data API: templates, sites and plugins, from domain values to the
//! store and back.

use nephrite_merge::Metadata;
use nephrite_merge::metadata::{extract_metadata, overlay};
use nephrite_preparer_client::{
    CatalogQuery, Listing, Plugin, PluginQuery, Site, SiteInfo, Template, TemplateInfo,
};

use super::{DataService, convert};
use crate::errors::{ApiError, check_id, parse_package};
use crate::store::{SiteRecord, TemplateRecord};

/// A template's or site's registration checked: its id, its package parsed (within the
/// request limits, off the async threads), and its metadata — the package's own, overlaid by the
/// request's. Returns the metadata and the package as stored.
async fn checked_package(
    kind: &str,
    id: &str,
    package_yaml: String,
    metadata: &Metadata,
) -> Result<(Metadata, String), ApiError> {
    check_id(&format!("{kind} id"), id)?;
    let package = parse_package(format!("{kind} {id}"), "package_yaml", package_yaml).await?;
    let metadata = overlay(&extract_metadata(&package), metadata);
    Ok((metadata, package.to_yaml()))
}

fn site_info(site: SiteRecord) -> SiteInfo {
    SiteInfo {
        id: site.id,
        metadata: site.metadata,
        template_id: site.template_id,
        deployment_id: site.deployment_id,
    }
}

impl DataService {
    /// Registers (or replaces) a template; whether it was new.
    pub async fn register_template(&self, template: Template) -> Result<bool, ApiError> {
        let Template { info, package_yaml } = template;
        let (metadata, package_yaml) =
            checked_package("template", &info.id, package_yaml, &info.metadata).await?;
        let created = self
            .store
            .put_template(TemplateRecord {
                id: info.id,
                metadata,
                package_yaml,
            })
            .await?;
        self.changes.bump();
        Ok(created)
    }

    /// A template with its package.
    pub async fn get_template(&self, id: &str) -> Result<Template, ApiError> {
        check_id("template id", id)?;
        let t = self.store.get_template(id).await?;
        Ok(Template {
            info: TemplateInfo {
                id: t.id,
                metadata: t.metadata,
            },
            package_yaml: t.package_yaml,
        })
    }

    /// One page of templates, with the revision it reflects.
    pub async fn list_templates(
        &self,
        query: CatalogQuery,
    ) -> Result<Listing<TemplateInfo>, ApiError> {
        let filter = convert::catalog_filter(&query.id_patterns, &query.metadata_patterns)?;
        let window = convert::window(query.window)?;
        let revision = self.listing_revision().await?;
        let rows = self.store.list_templates(&filter, &window).await?;
        Ok(Listing {
            items: rows
                .into_iter()
                .map(|(id, metadata)| TemplateInfo { id, metadata })
                .collect(),
            revision,
        })
    }

    /// Deletes a template; whether it existed.
    pub async fn delete_template(&self, id: &str) -> Result<bool, ApiError> {
        check_id("template id", id)?;
        let deleted = self.store.delete_template(id).await?;
        self.changes.bump();
        Ok(deleted)
    }

    /// Registers (or replaces) a site; whether it was new.
    pub async fn register_site(&self, site: Site) -> Result<bool, ApiError> {
        let Site { info, package_yaml } = site;
        let (metadata, package_yaml) =
            checked_package("site", &info.id, package_yaml, &info.metadata).await?;
        let created = self
            .store
            .put_site(SiteRecord {
                id: info.id,
                metadata,
                package_yaml,
                template_id: info.template_id,
                deployment_id: info.deployment_id,
            })
            .await?;
        self.changes.bump();
        Ok(created)
    }

    /// A site with its package.
    pub async fn get_site(&self, id: &str) -> Result<Site, ApiError> {
        check_id("site id", id)?;
        let mut site = self.store.get_site(id).await?;
        let package_yaml = std::mem::take(&mut site.package_yaml);
        Ok(Site {
            info: site_info(site),
            package_yaml,
        })
    }

    /// One page of sites, with the revision it reflects.
    pub async fn list_sites(&self, query: CatalogQuery) -> Result<Listing<SiteInfo>, ApiError> {
        let filter = convert::catalog_filter(&query.id_patterns, &query.metadata_patterns)?;
        let window = convert::window(query.window)?;
        let revision = self.listing_revision().await?;
        let rows = self.store.list_sites(&filter, &window).await?;
        Ok(Listing {
            items: rows.into_iter().map(site_info).collect(),
            revision,
        })
    }

    /// Deletes a site; whether it existed.
    pub async fn delete_site(&self, id: &str) -> Result<bool, ApiError> {
        check_id("site id", id)?;
        let deleted = self.store.delete_site(id).await?;
        self.changes.bump();
        Ok(deleted)
    }

    /// Registers (or replaces) a plugin; whether it was new.
    pub async fn register_plugin(&self, plugin: Plugin) -> Result<bool, ApiError> {
        check_id("plugin name", &plugin.name)?;
        if plugin
            .endpoint
            .parse::<nephrite_runtime::Endpoint>()
            .is_err()
        {
            return Err(ApiError::Invalid(format!(
                "plugin {}: invalid endpoint {:?}",
                plugin.name, plugin.endpoint
            )));
        }
        let record = convert::plugin_record(plugin)?;
        let created = self.store.put_plugin(record).await?;
        self.changes.bump();
        Ok(created)
    }

    /// A plugin.
    pub async fn get_plugin(&self, name: &str) -> Result<Plugin, ApiError> {
        check_id("plugin name", name)?;
        convert::plugin(self.store.get_plugin(name).await?)
    }

    /// One page of plugins, with the revision it reflects.
    pub async fn list_plugins(&self, query: PluginQuery) -> Result<Listing<Plugin>, ApiError> {
        let names = convert::patterns("name pattern", &query.name_patterns)?;
        let window = convert::window(query.window)?;
        let wanted_type = query.plugin_type.map(|t| t.as_str());
        let revision = self.listing_revision().await?;
        let plugins = self.store.list_plugins().await?;
        let items = plugins
            .into_iter()
            .filter(|p| p.name.as_str() > window.after_id.as_str())
            .filter(|p| wanted_type.is_none_or(|t| t == p.plugin_type))
            .filter(|p| names.is_empty() || names.iter().any(|n| n.matches(&p.name)))
            .filter(|p| {
                query.trigger.as_ref().is_none_or(|t| {
                    p.triggers
                        .iter()
                        .any(|g| g.group == t.group && g.version == t.version && g.kind == t.kind)
                })
            })
            .skip(window.offset as usize)
            .take(window.page_size())
            .map(convert::plugin)
            .collect::<Result<_, _>>()?;
        Ok(Listing { items, revision })
    }

    /// Deletes a plugin; whether it existed.
    pub async fn delete_plugin(&self, name: &str) -> Result<bool, ApiError> {
        check_id("plugin name", name)?;
        let deleted = self.store.delete_plugin(name).await?;
        self.changes.bump();
        Ok(deleted)
    }
}
