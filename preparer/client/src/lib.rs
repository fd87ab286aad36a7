//! `nephrite-preparer-client`: the preparer's Data API (`nephrite.preparer.data.v1`) as domain
//! values, so that its callers never see protobuf.
//!
//! - [`DataApi`]: every call of the API, taking and returning the values of [`catalog`],
//!   [`deployment`] and [`change`] (`Watch` is a stream of [`Change`]s), failing with
//!   [`DataError`]. Its provided methods read every page of a listing.
//! - [`PreparerClient`]: the implementation over gRPC, on a channel the caller dialled with its
//!   credentials (`nephrite_runtime::ClientArgs::dial`). The preparer implements the same
//!   trait over its own store, in process.
//! - [`wire`]: the protobuf ↔ domain conversions, shared with the preparer's server edge.

use std::pin::Pin;
use std::time::Duration;

use async_trait::async_trait;
use futures::Stream;

pub mod catalog;
pub mod change;
pub mod deployment;
mod error;
mod grpc;
mod window;
pub mod wire;

pub use catalog::{
    CatalogQuery, Metadata, Plugin, PluginQuery, PluginType, Site, SiteInfo, Template, TemplateInfo,
};
pub use change::{Change, EntityKind};
pub use deployment::{
    Created, Deployment, DeploymentInfo, DeploymentPage, DeploymentQuery, DeploymentRequest,
    Modification,
};
pub use error::{DataError, ErrorKind, WireError};
pub use grpc::PreparerClient;
pub use window::{DEFAULT_PAGE, MAX_PAGE, Window};

/// The changes of a `Watch`, in revision order, until the stream fails or the preparer ends it.
pub type ChangeStream = Pin<Box<dyn Stream<Item = Result<Change, DataError>> + Send>>;

/// The preparer's Data API: templates, sites, plugins, deployments, modifications and the
/// change feed. Errors name the id or argument the preparer refused.
#[async_trait]
pub trait DataApi: Send + Sync {
    /// Registers (or replaces) a template; whether it was new.
    async fn register_template(&self, template: Template) -> Result<bool, DataError>;
    /// A template with its package.
    async fn get_template(&self, id: &str) -> Result<Template, DataError>;
    /// One page of templates (without packages).
    async fn list_templates(&self, query: CatalogQuery) -> Result<Vec<TemplateInfo>, DataError>;
    /// Deletes a template; whether it existed.
    async fn delete_template(&self, id: &str) -> Result<bool, DataError>;

    /// Registers (or replaces) a site; whether it was new.
    async fn register_site(&self, site: Site) -> Result<bool, DataError>;
    /// A site with its package.
    async fn get_site(&self, id: &str) -> Result<Site, DataError>;
    /// One page of sites (without packages).
    async fn list_sites(&self, query: CatalogQuery) -> Result<Vec<SiteInfo>, DataError>;
    /// Deletes a site; whether it existed.
    async fn delete_site(&self, id: &str) -> Result<bool, DataError>;

    /// Registers (or replaces) a plugin; whether it was new.
    async fn register_plugin(&self, plugin: Plugin) -> Result<bool, DataError>;
    /// A plugin.
    async fn get_plugin(&self, name: &str) -> Result<Plugin, DataError>;
    /// One page of plugins.
    async fn list_plugins(&self, query: PluginQuery) -> Result<Vec<Plugin>, DataError>;
    /// Deletes a plugin; whether it existed.
    async fn delete_plugin(&self, name: &str) -> Result<bool, DataError>;

    /// Creates a deployment (or finds the one with the same instance key).
    async fn create_deployment(&self, request: DeploymentRequest) -> Result<Created, DataError>;
    /// A deployment with its package.
    async fn get_deployment(&self, id: &str) -> Result<Deployment, DataError>;
    /// One page of deployments.
    async fn list_deployments(&self, query: DeploymentQuery) -> Result<DeploymentPage, DataError>;
    /// Replaces a deployment's package: inside the modification holding `token`, or, without
    /// one, in a modification of its own (refused as busy while another writer holds it).
    async fn update_deployment(
        &self,
        id: &str,
        package_yaml: String,
        token: Option<String>,
    ) -> Result<DeploymentInfo, DataError>;
    /// Approves a prepared deployment.
    async fn approve_deployment(&self, id: &str) -> Result<DeploymentInfo, DataError>;
    /// Deletes a deployment and its descendants; whether it existed.
    async fn delete_deployment(&self, id: &str) -> Result<bool, DataError>;

    /// Takes the exclusive lease of a deployment for `lease` (`None`: the server's default).
    async fn start_modification(
        &self,
        id: &str,
        lease: Option<Duration>,
    ) -> Result<Modification, DataError>;
    /// Extends the lease `token` holds.
    async fn renew_modification(
        &self,
        id: &str,
        token: &str,
        lease: Option<Duration>,
    ) -> Result<Modification, DataError>;
    /// Writes `package_yaml` (when given) and releases the lease.
    async fn end_modification(
        &self,
        id: &str,
        token: &str,
        package_yaml: Option<String>,
    ) -> Result<DeploymentInfo, DataError>;
    /// Releases the lease without writing.
    async fn cancel_modification(&self, id: &str, token: &str) -> Result<(), DataError>;

    /// Every change after `from_revision` (0: from the oldest kept) of the `kinds` given (empty:
    /// all), then changes as they happen.
    async fn watch(
        &self,
        from_revision: u64,
        kinds: &[EntityKind],
    ) -> Result<ChangeStream, DataError>;

    /// Every template matching `query`'s patterns, reading page after page.
    async fn all_templates(&self, query: CatalogQuery) -> Result<Vec<TemplateInfo>, DataError> {
        every_page(
            |window| {
                self.list_templates(CatalogQuery {
                    window,
                    ..query.clone()
                })
            },
            |t| &t.id,
        )
        .await
    }

    /// Every site matching `query`'s patterns, reading page after page.
    async fn all_sites(&self, query: CatalogQuery) -> Result<Vec<SiteInfo>, DataError> {
        every_page(
            |window| {
                self.list_sites(CatalogQuery {
                    window,
                    ..query.clone()
                })
            },
            |s| &s.id,
        )
        .await
    }

    /// Every plugin matching `query`, reading page after page.
    async fn all_plugins(&self, query: PluginQuery) -> Result<Vec<Plugin>, DataError> {
        every_page(
            |window| {
                self.list_plugins(PluginQuery {
                    window,
                    ..query.clone()
                })
            },
            |p| &p.name,
        )
        .await
    }

    /// Every deployment matching `query`, reading page after page.
    async fn all_deployments(
        &self,
        query: DeploymentQuery,
    ) -> Result<Vec<DeploymentInfo>, DataError> {
        let mut rows = Vec::new();
        let mut after_id = String::new();
        loop {
            let window = Window::largest_after(after_id);
            let page = self
                .list_deployments(DeploymentQuery {
                    window,
                    ..query.clone()
                })
                .await?;
            rows.extend(page.deployments);
            match page.next_after_id {
                Some(next) => after_id = next,
                None => return Ok(rows),
            }
        }
    }
}

/// Reads every page of a keyset listing: largest pages, each after the last key of the one
/// before, until a page is not full.
async fn every_page<T, F, Fut>(mut page: F, key: fn(&T) -> &String) -> Result<Vec<T>, DataError>
where
    F: FnMut(Window) -> Fut,
    Fut: std::future::Future<Output = Result<Vec<T>, DataError>>,
{
    let mut rows = Vec::new();
    let mut after_id = String::new();
    loop {
        let next = page(Window::largest_after(after_id)).await?;
        let full = next.len() == MAX_PAGE as usize;
        after_id = next.last().map(key).cloned().unwrap_or_default();
        rows.extend(next);
        if !full {
            return Ok(rows);
        }
    }
}
