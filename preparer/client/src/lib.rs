//! `nephrite-preparer-client`: the preparer's Data API (`nephrite.preparer.data.v1`) as domain
//! values, so that its callers never see protobuf.
//!
//! - [`DataApi`]: every call of the API, taking and returning the values of [`catalog`],
//!   [`deployment`] and [`change`] (`Watch` is a stream of [`Change`]s), failing with
//!   [`DataError`]. Its provided methods read every page of a listing. Listings answer the
//!   revision they reflect ([`Listing`], [`DeploymentPage::revision`]): list, then watch from
//!   it, and the watch starts right after the listing ([`listing`]).
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
pub mod lease;
pub mod listing;
mod window;
pub mod wire;

pub use catalog::{
    CatalogQuery, Metadata, Plugin, PluginQuery, PluginType, Site, SiteInfo, Template, TemplateInfo,
};
pub use change::{Change, EntityKind};
pub use deployment::{
    Created, Deployment, DeploymentInfo, DeploymentPage, DeploymentQuery, DeploymentRequest,
    DeploymentRevision, DeploymentWrite, LeaseFence, MAX_BATCH, Modification, WriteResult,
};
pub use error::{DataError, ErrorKind, WireError};
pub use grpc::PreparerClient;
pub use lease::Lease;
pub use listing::{Listing, REVISION_HEADER};
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
    /// One page of templates (without packages), with the revision it reflects.
    async fn list_templates(&self, query: CatalogQuery)
    -> Result<Listing<TemplateInfo>, DataError>;
    /// Deletes a template; whether it existed.
    async fn delete_template(&self, id: &str) -> Result<bool, DataError>;

    /// Registers (or replaces) a site; whether it was new.
    async fn register_site(&self, site: Site) -> Result<bool, DataError>;
    /// A site with its package.
    async fn get_site(&self, id: &str) -> Result<Site, DataError>;
    /// One page of sites (without packages), with the revision it reflects.
    async fn list_sites(&self, query: CatalogQuery) -> Result<Listing<SiteInfo>, DataError>;
    /// Deletes a site; whether it existed.
    async fn delete_site(&self, id: &str) -> Result<bool, DataError>;

    /// Registers (or replaces) a plugin; whether it was new.
    async fn register_plugin(&self, plugin: Plugin) -> Result<bool, DataError>;
    /// A plugin.
    async fn get_plugin(&self, name: &str) -> Result<Plugin, DataError>;
    /// One page of plugins, with the revision it reflects.
    async fn list_plugins(&self, query: PluginQuery) -> Result<Listing<Plugin>, DataError>;
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
    /// Applies `writes` (at most [`MAX_BATCH`]) in one transaction, in order: all are written
    /// or none is. Each is checked as its single call is; a refusal names the write's index
    /// and id, with the single call's kind (not found, busy, invalid, …). `Watch` shows one
    /// change per deployment written, in the writes' order. With `fence`, the batch is
    /// written only while the lease still has that holding (refused as
    /// [`ErrorKind::FailedPrecondition`] otherwise). One result per write, in order.
    async fn apply_deployments(
        &self,
        writes: Vec<DeploymentWrite>,
        fence: Option<LeaseFence>,
    ) -> Result<Vec<WriteResult>, DataError>;
    /// A deployment's kept revisions (its history), oldest first, without their packages.
    async fn deployment_revisions(&self, id: &str) -> Result<Vec<DeploymentRevision>, DataError>;
    /// One kept revision of a deployment, with its package.
    async fn deployment_revision(
        &self,
        id: &str,
        number: i64,
    ) -> Result<DeploymentRevision, DataError>;
    /// Writes kept revision `number`'s package as the deployment's new one (a new revision),
    /// its prepared and approved marks removed: it prepares and approves as any change.
    async fn rollback_deployment(&self, id: &str, number: i64)
    -> Result<DeploymentInfo, DataError>;

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

    /// Takes the named lease `name` for `holder` for `duration` (`None`: the server's
    /// default): granted when it is free, expired or already `holder`'s (its token then
    /// kept), refused as busy ([`DataError::is_busy`], the message naming the holder and
    /// the expiry) otherwise.
    async fn acquire_lease(
        &self,
        name: &str,
        holder: &str,
        duration: Option<Duration>,
    ) -> Result<Lease, DataError>;
    /// Extends the lease `token` holds; refused as [`ErrorKind::FailedPrecondition`] once
    /// another holder took it or it was released.
    async fn renew_lease(
        &self,
        name: &str,
        token: &str,
        duration: Option<Duration>,
    ) -> Result<Lease, DataError>;
    /// Frees the lease `token` holds (refused as the renewal is when it no longer does).
    async fn release_lease(&self, name: &str, token: &str) -> Result<(), DataError>;
    /// The lease as it is, without its token (not found when never acquired).
    async fn get_lease(&self, name: &str) -> Result<Lease, DataError>;

    /// Every change after `from_revision` (0: from the oldest kept) of the `kinds` given (empty:
    /// all), then changes as they happen. From a listing's revision: the changes after the
    /// listing, none before ([`listing`]).
    async fn watch(
        &self,
        from_revision: u64,
        kinds: &[EntityKind],
    ) -> Result<ChangeStream, DataError>;

    /// Every template matching `query`'s patterns, reading page after page.
    async fn all_templates(&self, query: CatalogQuery) -> Result<Vec<TemplateInfo>, DataError> {
        Ok(self.all_templates_listing(query).await?.items)
    }

    /// Every template matching `query`'s patterns, with the revision the listing reflects
    /// (its first page's): watch from it for what changes after.
    async fn all_templates_listing(
        &self,
        query: CatalogQuery,
    ) -> Result<Listing<TemplateInfo>, DataError> {
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
        Ok(self.all_sites_listing(query).await?.items)
    }

    /// Every site matching `query`'s patterns, with the revision the listing reflects (its
    /// first page's): watch from it for what changes after.
    async fn all_sites_listing(&self, query: CatalogQuery) -> Result<Listing<SiteInfo>, DataError> {
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
        Ok(self.all_plugins_listing(query).await?.items)
    }

    /// Every plugin matching `query`, with the revision the listing reflects (its first
    /// page's): watch from it for what changes after.
    async fn all_plugins_listing(&self, query: PluginQuery) -> Result<Listing<Plugin>, DataError> {
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
        Ok(self.all_deployments_listing(query).await?.items)
    }

    /// Every deployment matching `query`, with the revision the listing reflects (its first
    /// page's): watch from it for what changes after.
    async fn all_deployments_listing(
        &self,
        query: DeploymentQuery,
    ) -> Result<Listing<DeploymentInfo>, DataError> {
        let mut listing = Listing::default();
        let mut first = true;
        let mut after_id = String::new();
        loop {
            let window = Window::largest_after(after_id);
            let page = self
                .list_deployments(DeploymentQuery {
                    window,
                    ..query.clone()
                })
                .await?;
            if first {
                listing.revision = page.revision;
                first = false;
            }
            listing.items.extend(page.deployments);
            match page.next_after_id {
                Some(next) => after_id = next,
                None => return Ok(listing),
            }
        }
    }
}

/// Reads every page of a keyset listing: largest pages, each after the last key of the one
/// before, until a page is not full. The listing reflects its first page's revision (every
/// later page was read after it).
async fn every_page<T, F, Fut>(mut page: F, key: fn(&T) -> &String) -> Result<Listing<T>, DataError>
where
    F: FnMut(Window) -> Fut,
    Fut: std::future::Future<Output = Result<Listing<T>, DataError>>,
{
    let mut listing: Option<Listing<T>> = None;
    let mut after_id = String::new();
    loop {
        let next = page(Window::largest_after(after_id)).await?;
        let full = next.items.len() == MAX_PAGE as usize;
        after_id = next.items.last().map(key).cloned().unwrap_or_default();
        match &mut listing {
            None => listing = Some(next),
            Some(listing) => listing.items.extend(next.items),
        }
        if !full {
            return Ok(listing.unwrap_or_default());
        }
    }
}
