//! The Data API (`nephrite.preparer.data.v1.Data`) over a [`Store`]: argument checks (ids, patterns,
//! YAML with document and line), package-derived fields (prepared, approved, error,
//! metadata), modifications, and `Watch`. Every successful write wakes the preparation loop
//! and the watchers through [`Changes`].

use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use futures::Stream;
use nephrite_proto::nephrite::preparer::data::v1 as pb;
use nephrite_proto::nephrite::preparer::data::v1::data_server::Data;
use tokio::sync::watch;
use tonic::{Request, Response, Status};

use crate::errors::ApiError;
use crate::store::{CatalogFilter, Store};

pub use watching::{SLOW_WATCHER, WATCH_BUFFER, Watchers};

mod catalog;
mod convert;
mod deployments;
mod modifications;
mod watching;

/// Default modification lease.
pub const DEFAULT_LEASE: Duration = Duration::from_secs(30);

/// A counter bumped on every write; the loop and watchers wait on it.
#[derive(Debug, Clone)]
pub struct Changes(Arc<watch::Sender<u64>>);

impl Default for Changes {
    fn default() -> Self {
        Changes(Arc::new(watch::channel(0).0))
    }
}

impl Changes {
    /// Signals a change.
    pub fn bump(&self) {
        self.0.send_modify(|n| *n = n.wrapping_add(1));
    }

    /// A receiver that wakes on the next change.
    pub fn subscribe(&self) -> watch::Receiver<u64> {
        self.0.subscribe()
    }
}

/// The Data API service.
#[derive(Clone)]
pub struct DataApi {
    store: Arc<dyn Store>,
    changes: Changes,
    auto_approve: bool,
    shutdown: Option<nephrite_runtime::ShutdownHandle>,
    watchers: Watchers,
}

type Result<T> = std::result::Result<T, Status>;
type Stream_<T> = Pin<Box<dyn Stream<Item = Result<T>> + Send>>;

fn stream<T: Send + 'static>(items: Vec<T>) -> Stream_<T> {
    Box::pin(tokio_stream::iter(items.into_iter().map(Ok)))
}

impl DataApi {
    /// A service over `store`; `changes` is shared with the loop.
    pub fn new(store: Arc<dyn Store>, changes: Changes, auto_approve: bool) -> Self {
        DataApi {
            store,
            changes,
            auto_approve,
            shutdown: None,
            watchers: Watchers::default(),
        }
    }

    /// Its `Watch` streams share `watchers` (their patience, store reads and metrics).
    pub fn with_watchers(mut self, watchers: Watchers) -> Self {
        self.watchers = watchers;
        self
    }

    /// Ends `Watch` streams when `shutdown` triggers, so the server can drain.
    pub fn with_shutdown(mut self, shutdown: nephrite_runtime::ShutdownHandle) -> Self {
        self.shutdown = Some(shutdown);
        self
    }
}

#[tonic::async_trait]
impl Data for DataApi {
    async fn register_template(
        &self,
        request: Request<pb::RegisterTemplateRequest>,
    ) -> Result<Response<pb::RegisterResponse>> {
        catalog::register_template(self, request).await
    }

    async fn get_template(
        &self,
        request: Request<pb::GetRequest>,
    ) -> Result<Response<pb::Template>> {
        catalog::get_template(self, request).await
    }

    type ListTemplatesStream = Stream_<pb::TemplateInfo>;
    async fn list_templates(
        &self,
        request: Request<pb::ListTemplatesRequest>,
    ) -> Result<Response<Self::ListTemplatesStream>> {
        catalog::list_templates(self, request).await
    }

    async fn delete_template(
        &self,
        request: Request<pb::DeleteRequest>,
    ) -> Result<Response<pb::DeleteResponse>> {
        catalog::delete_template(self, request).await
    }

    async fn register_site(
        &self,
        request: Request<pb::RegisterSiteRequest>,
    ) -> Result<Response<pb::RegisterResponse>> {
        catalog::register_site(self, request).await
    }

    async fn get_site(&self, request: Request<pb::GetRequest>) -> Result<Response<pb::Site>> {
        catalog::get_site(self, request).await
    }

    type ListSitesStream = Stream_<pb::SiteInfo>;
    async fn list_sites(
        &self,
        request: Request<pb::ListSitesRequest>,
    ) -> Result<Response<Self::ListSitesStream>> {
        catalog::list_sites(self, request).await
    }

    async fn delete_site(
        &self,
        request: Request<pb::DeleteRequest>,
    ) -> Result<Response<pb::DeleteResponse>> {
        catalog::delete_site(self, request).await
    }

    async fn register_plugin(
        &self,
        request: Request<pb::RegisterPluginRequest>,
    ) -> Result<Response<pb::RegisterResponse>> {
        catalog::register_plugin(self, request).await
    }

    async fn get_plugin(&self, request: Request<pb::GetRequest>) -> Result<Response<pb::Plugin>> {
        catalog::get_plugin(self, request).await
    }

    type ListPluginsStream = Stream_<pb::Plugin>;
    async fn list_plugins(
        &self,
        request: Request<pb::ListPluginsRequest>,
    ) -> Result<Response<Self::ListPluginsStream>> {
        catalog::list_plugins(self, request).await
    }

    async fn delete_plugin(
        &self,
        request: Request<pb::DeleteRequest>,
    ) -> Result<Response<pb::DeleteResponse>> {
        catalog::delete_plugin(self, request).await
    }

    async fn create_deployment(
        &self,
        request: Request<pb::CreateDeploymentRequest>,
    ) -> Result<Response<pb::CreateDeploymentResponse>> {
        deployments::create_deployment(self, request).await
    }

    async fn get_deployment(
        &self,
        request: Request<pb::GetRequest>,
    ) -> Result<Response<pb::Deployment>> {
        deployments::get_deployment(self, request).await
    }

    async fn list_deployments(
        &self,
        request: Request<pb::ListDeploymentsRequest>,
    ) -> Result<Response<pb::ListDeploymentsResponse>> {
        deployments::list_deployments(self, request).await
    }

    async fn update_deployment(
        &self,
        request: Request<pb::UpdateDeploymentRequest>,
    ) -> Result<Response<pb::UpdateDeploymentResponse>> {
        deployments::update_deployment(self, request).await
    }

    async fn approve_deployment(
        &self,
        request: Request<pb::ApproveDeploymentRequest>,
    ) -> Result<Response<pb::ApproveDeploymentResponse>> {
        deployments::approve_deployment(self, request).await
    }

    async fn delete_deployment(
        &self,
        request: Request<pb::DeleteRequest>,
    ) -> Result<Response<pb::DeleteResponse>> {
        deployments::delete_deployment(self, request).await
    }

    async fn start_modification(
        &self,
        request: Request<pb::StartModificationRequest>,
    ) -> Result<Response<pb::Modification>> {
        modifications::start_modification(self, request).await
    }

    async fn renew_modification(
        &self,
        request: Request<pb::RenewModificationRequest>,
    ) -> Result<Response<pb::Modification>> {
        modifications::renew_modification(self, request).await
    }

    async fn end_modification(
        &self,
        request: Request<pb::EndModificationRequest>,
    ) -> Result<Response<pb::EndModificationResponse>> {
        modifications::end_modification(self, request).await
    }

    async fn cancel_modification(
        &self,
        request: Request<pb::CancelModificationRequest>,
    ) -> Result<Response<pb::CancelModificationResponse>> {
        modifications::cancel_modification(self, request).await
    }

    type WatchStream = Stream_<pb::Change>;
    async fn watch(
        &self,
        request: Request<pb::WatchRequest>,
    ) -> Result<Response<Self::WatchStream>> {
        watching::watch(self, request).await
    }
}

/// Convenience for callers that hold a proto filter map: `CatalogFilter` from patterns.
pub fn catalog_filter(
    ids: &[String],
    metadata: &std::collections::HashMap<String, String>,
) -> std::result::Result<CatalogFilter, ApiError> {
    convert::catalog_filter(ids, metadata)
}
