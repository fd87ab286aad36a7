//! The Data API (`nephrite.data.v1.Data`) over a [`Store`]: argument checks (ids, patterns,
//! YAML with document and line), package-derived fields (prepared, approved, error,
//! metadata), modifications, and `Watch`. Every successful write wakes the preparation loop
//! and the watchers through [`Changes`].

use std::collections::BTreeSet;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use futures::Stream;
use nephrite_krm::Package;
use nephrite_merge::DeploymentResource;
use nephrite_merge::metadata::{extract_metadata, overlay};
use nephrite_proto::nephrite::data::v1 as pb;
use nephrite_proto::nephrite::data::v1::data_server::Data;
use tokio::sync::{mpsc, watch};
use tonic::{Request, Response, Status};

use crate::clock::{ms_text, now_ms, now_text};
use crate::creation::{CreateDeployment, CreationContext, create_deployments};
use crate::errors::{ApiError, check_id, read_package};
use crate::plugins::PreparerSet;
use crate::store::{
    CatalogFilter, DeploymentFilter, DeploymentRecord, DeploymentUpdate, EntityKind, SiteRecord,
    Store, TemplateRecord, Window,
};

mod convert;

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
}

type Result<T> = std::result::Result<T, Status>;
type Stream_<T> = Pin<Box<dyn Stream<Item = Result<T>> + Send>>;

fn stream<T: Send + 'static>(items: Vec<T>) -> Stream_<T> {
    Box::pin(tokio_stream::iter(items.into_iter().map(Ok)))
}

fn token() -> String {
    uuid::Uuid::new_v4().to_string()
}

fn lease_ms(requested: u64) -> i64 {
    if requested == 0 {
        DEFAULT_LEASE.as_millis() as i64
    } else {
        requested.min(3_600_000) as i64
    }
}

impl DataApi {
    /// A service over `store`; `changes` is shared with the loop.
    pub fn new(store: Arc<dyn Store>, changes: Changes, auto_approve: bool) -> Self {
        DataApi {
            store,
            changes,
            auto_approve,
            shutdown: None,
        }
    }

    /// Ends `Watch` streams when `shutdown` triggers, so the server can drain.
    pub fn with_shutdown(mut self, shutdown: nephrite_runtime::ShutdownHandle) -> Self {
        self.shutdown = Some(shutdown);
        self
    }

    /// The fields a package implies, for writing it.
    fn derive(record: &DeploymentRecord, package: &Package) -> DeploymentUpdate {
        DeploymentUpdate {
            package_yaml: package.to_yaml(),
            prepared: DeploymentResource::is_prepared(package),
            approved: DeploymentResource::is_approved(package),
            error: DeploymentResource::last_error(package).unwrap_or_default(),
            metadata: overlay(&record.info.metadata, &extract_metadata(package)),
            updated: now_text(),
        }
    }

    /// Runs `edit` on a deployment's package inside a fresh modification.
    async fn modify(
        &self,
        id: &str,
        edit: impl FnOnce(&mut Package) -> std::result::Result<(), ApiError>,
    ) -> std::result::Result<pb::DeploymentInfo, ApiError> {
        check_id("deployment id", id)?;
        let token = token();
        let now = now_ms();
        let record = self
            .store
            .start_modification(id, &token, now, now + lease_ms(0))
            .await?;
        let result = async {
            let mut package = read_package(&format!("deployment {id}"), &record.package_yaml)?;
            edit(&mut package)?;
            let update = DataApi::derive(&record, &package);
            Ok::<_, ApiError>(
                self.store
                    .write_modification(id, &token, now_ms(), Some(update), true)
                    .await?,
            )
        }
        .await;
        if result.is_err() {
            let _ = self
                .store
                .write_modification(id, &token, now_ms(), None, true)
                .await;
        }
        let info = result?;
        self.changes.bump();
        Ok(convert::info(info))
    }

    async fn resolve_ids(
        &self,
        template: bool,
        map: &std::collections::HashMap<String, String>,
    ) -> std::result::Result<Option<BTreeSet<String>>, ApiError> {
        if map.is_empty() {
            return Ok(None);
        }
        let filter = convert::catalog_filter(&[], map)?;
        let mut ids = BTreeSet::new();
        let mut window = Window {
            limit: crate::store::MAX_PAGE,
            ..Window::default()
        };
        loop {
            let page: Vec<String> = if template {
                self.store
                    .list_templates(&filter, &window)
                    .await?
                    .into_iter()
                    .map(|(id, _)| id)
                    .collect()
            } else {
                self.store
                    .list_sites(&filter, &window)
                    .await?
                    .into_iter()
                    .map(|s| s.id)
                    .collect()
            };
            let full = page.len() == window.page_size();
            if let Some(last) = page.last() {
                window.after_id = last.clone();
            }
            ids.extend(page);
            if !full {
                return Ok(Some(ids));
            }
        }
    }
}

#[tonic::async_trait]
impl Data for DataApi {
    async fn register_template(
        &self,
        request: Request<pb::RegisterTemplateRequest>,
    ) -> Result<Response<pb::RegisterResponse>> {
        let r = request.into_inner();
        check_id("template id", &r.id)?;
        let package = read_package(&format!("template {}", r.id), &r.package_yaml)?;
        let metadata = overlay(&extract_metadata(&package), &convert::metadata(r.metadata));
        let created = self
            .store
            .put_template(TemplateRecord {
                id: r.id,
                metadata,
                package_yaml: package.to_yaml(),
            })
            .await
            .map_err(ApiError::from)?;
        self.changes.bump();
        Ok(Response::new(pb::RegisterResponse { created }))
    }

    async fn get_template(
        &self,
        request: Request<pb::GetRequest>,
    ) -> Result<Response<pb::Template>> {
        let id = request.into_inner().id;
        check_id("template id", &id)?;
        let t = self.store.get_template(&id).await.map_err(ApiError::from)?;
        Ok(Response::new(pb::Template {
            info: Some(pb::TemplateInfo {
                id: t.id,
                metadata: t.metadata.into_iter().collect(),
            }),
            package_yaml: t.package_yaml,
        }))
    }

    type ListTemplatesStream = Stream_<pb::TemplateInfo>;
    async fn list_templates(
        &self,
        request: Request<pb::ListTemplatesRequest>,
    ) -> Result<Response<Self::ListTemplatesStream>> {
        let r = request.into_inner();
        let filter = convert::catalog_filter(&r.id_patterns, &r.metadata_patterns)?;
        let rows = self
            .store
            .list_templates(&filter, &convert::window(r.window))
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

    async fn delete_template(
        &self,
        request: Request<pb::DeleteRequest>,
    ) -> Result<Response<pb::DeleteResponse>> {
        let id = request.into_inner().id;
        check_id("template id", &id)?;
        let deleted = self
            .store
            .delete_template(&id)
            .await
            .map_err(ApiError::from)?;
        self.changes.bump();
        Ok(Response::new(pb::DeleteResponse { deleted }))
    }

    async fn register_site(
        &self,
        request: Request<pb::RegisterSiteRequest>,
    ) -> Result<Response<pb::RegisterResponse>> {
        let r = request.into_inner();
        check_id("site id", &r.id)?;
        let package = read_package(&format!("site {}", r.id), &r.package_yaml)?;
        let metadata = overlay(&extract_metadata(&package), &convert::metadata(r.metadata));
        let created = self
            .store
            .put_site(SiteRecord {
                id: r.id,
                metadata,
                package_yaml: package.to_yaml(),
                template_id: r.template_id,
                deployment_id: r.deployment_id,
            })
            .await
            .map_err(ApiError::from)?;
        self.changes.bump();
        Ok(Response::new(pb::RegisterResponse { created }))
    }

    async fn get_site(&self, request: Request<pb::GetRequest>) -> Result<Response<pb::Site>> {
        let id = request.into_inner().id;
        check_id("site id", &id)?;
        let s = self.store.get_site(&id).await.map_err(ApiError::from)?;
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

    type ListSitesStream = Stream_<pb::SiteInfo>;
    async fn list_sites(
        &self,
        request: Request<pb::ListSitesRequest>,
    ) -> Result<Response<Self::ListSitesStream>> {
        let r = request.into_inner();
        let filter = convert::catalog_filter(&r.id_patterns, &r.metadata_patterns)?;
        let rows = self
            .store
            .list_sites(&filter, &convert::window(r.window))
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

    async fn delete_site(
        &self,
        request: Request<pb::DeleteRequest>,
    ) -> Result<Response<pb::DeleteResponse>> {
        let id = request.into_inner().id;
        check_id("site id", &id)?;
        let deleted = self.store.delete_site(&id).await.map_err(ApiError::from)?;
        self.changes.bump();
        Ok(Response::new(pb::DeleteResponse { deleted }))
    }

    async fn register_plugin(
        &self,
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
        let created = self
            .store
            .put_plugin(record)
            .await
            .map_err(ApiError::from)?;
        self.changes.bump();
        Ok(Response::new(pb::RegisterResponse { created }))
    }

    async fn get_plugin(&self, request: Request<pb::GetRequest>) -> Result<Response<pb::Plugin>> {
        let name = request.into_inner().id;
        check_id("plugin name", &name)?;
        let plugin = self.store.get_plugin(&name).await.map_err(ApiError::from)?;
        Ok(Response::new(convert::plugin(plugin)))
    }

    type ListPluginsStream = Stream_<pb::Plugin>;
    async fn list_plugins(
        &self,
        request: Request<pb::ListPluginsRequest>,
    ) -> Result<Response<Self::ListPluginsStream>> {
        let r = request.into_inner();
        let names = convert::patterns("name pattern", &r.name_patterns)?;
        let wanted_type = (r.r#type != 0)
            .then(|| convert::plugin_type(r.r#type))
            .transpose()?;
        let window = convert::window(r.window);
        let plugins = self.store.list_plugins().await.map_err(ApiError::from)?;
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

    async fn delete_plugin(
        &self,
        request: Request<pb::DeleteRequest>,
    ) -> Result<Response<pb::DeleteResponse>> {
        let name = request.into_inner().id;
        check_id("plugin name", &name)?;
        let deleted = self
            .store
            .delete_plugin(&name)
            .await
            .map_err(ApiError::from)?;
        self.changes.bump();
        Ok(Response::new(pb::DeleteResponse { deleted }))
    }

    async fn create_deployment(
        &self,
        request: Request<pb::CreateDeploymentRequest>,
    ) -> Result<Response<pb::CreateDeploymentResponse>> {
        let r = request.into_inner();
        let merge = read_package("merge package", &r.merge_package_yaml)?;
        let preparers = PreparerSet::load(self.store.as_ref())
            .await
            .map_err(ApiError::from)?;
        let has_preparer = |gvk: &nephrite_krm::Gvk| preparers.has_preparer(gvk);
        let now = now_text();
        let context = CreationContext {
            auto_approve: self.auto_approve,
            has_preparer: &has_preparer,
            now: &now,
            sites_verified: false,
        };
        let request = CreateDeployment {
            parent_id: r.parent_deployment_id,
            template_id: r.template_id,
            site_id: r.site_id,
            merge,
            merge_metadata: convert::metadata(r.merge_metadata),
            prepared: r.prepared,
            approved: r.approved,
            instance_key: r.instance_key,
        };
        let created = create_deployments(self.store.as_ref(), context, vec![request]).await?;
        let (created, deployment_id) = created
            .into_iter()
            .next()
            .ok_or_else(|| Status::internal("the store created nothing"))?;
        self.changes.bump();
        Ok(Response::new(pb::CreateDeploymentResponse {
            created,
            deployment_id,
        }))
    }

    async fn get_deployment(
        &self,
        request: Request<pb::GetRequest>,
    ) -> Result<Response<pb::Deployment>> {
        let id = request.into_inner().id;
        check_id("deployment id", &id)?;
        let record = self
            .store
            .get_deployment(&id)
            .await
            .map_err(ApiError::from)?;
        Ok(Response::new(pb::Deployment {
            info: Some(convert::info(record.info)),
            package_yaml: record.package_yaml,
        }))
    }

    async fn list_deployments(
        &self,
        request: Request<pb::ListDeploymentsRequest>,
    ) -> Result<Response<pb::ListDeploymentsResponse>> {
        let r = request.into_inner();
        if !r.parent_deployment_id.is_empty() {
            check_id("parent deployment id", &r.parent_deployment_id)?;
        }
        let filter = DeploymentFilter {
            parent_id: (!r.parent_deployment_id.is_empty()).then_some(r.parent_deployment_id),
            metadata: convert::selector("metadata pattern", &r.metadata_patterns)?,
            template_patterns: convert::patterns("template id pattern", &r.template_id_patterns)?,
            template_ids: self
                .resolve_ids(true, &r.template_metadata_patterns)
                .await?,
            site_patterns: convert::patterns("site id pattern", &r.site_id_patterns)?,
            site_ids: self.resolve_ids(false, &r.site_metadata_patterns).await?,
            prepared: r.prepared,
            approved: r.approved,
        };
        let window = convert::window(r.window);
        let (rows, more) = self
            .store
            .list_deployments(&filter, &window)
            .await
            .map_err(ApiError::from)?;
        let next_after_id = if more {
            rows.last().map(|r| r.id.clone()).unwrap_or_default()
        } else {
            String::new()
        };
        Ok(Response::new(pb::ListDeploymentsResponse {
            deployments: rows.into_iter().map(convert::info).collect(),
            next_after_id,
        }))
    }

    async fn update_deployment(
        &self,
        request: Request<pb::UpdateDeploymentRequest>,
    ) -> Result<Response<pb::UpdateDeploymentResponse>> {
        let r = request.into_inner();
        check_id("deployment id", &r.deployment_id)?;
        let package = read_package(&format!("deployment {}", r.deployment_id), &r.package_yaml)?;
        let info = if r.modification_token.is_empty() {
            self.modify(&r.deployment_id, |current| {
                *current = package;
                Ok(())
            })
            .await?
        } else {
            let record = self
                .store
                .get_deployment(&r.deployment_id)
                .await
                .map_err(ApiError::from)?;
            let update = DataApi::derive(&record, &package);
            let info = self
                .store
                .write_modification(
                    &r.deployment_id,
                    &r.modification_token,
                    now_ms(),
                    Some(update),
                    false,
                )
                .await
                .map_err(ApiError::from)?;
            self.changes.bump();
            convert::info(info)
        };
        Ok(Response::new(pb::UpdateDeploymentResponse {
            info: Some(info),
        }))
    }

    async fn approve_deployment(
        &self,
        request: Request<pb::ApproveDeploymentRequest>,
    ) -> Result<Response<pb::ApproveDeploymentResponse>> {
        let id = request.into_inner().deployment_id;
        let info = self
            .modify(&id, |package| {
                if !DeploymentResource::is_prepared(package) {
                    return Err(ApiError::Invalid(format!(
                        "deployment {id} is not prepared yet and cannot be approved"
                    )));
                }
                DeploymentResource::mark_approved(package)
                    .map_err(|e| ApiError::Invalid(e.to_string()))
            })
            .await?;
        Ok(Response::new(pb::ApproveDeploymentResponse {
            info: Some(info),
        }))
    }

    async fn delete_deployment(
        &self,
        request: Request<pb::DeleteRequest>,
    ) -> Result<Response<pb::DeleteResponse>> {
        let id = request.into_inner().id;
        check_id("deployment id", &id)?;
        let deleted = self
            .store
            .delete_deployment(&id)
            .await
            .map_err(ApiError::from)?;
        self.changes.bump();
        Ok(Response::new(pb::DeleteResponse {
            deleted: !deleted.is_empty(),
        }))
    }

    async fn start_modification(
        &self,
        request: Request<pb::StartModificationRequest>,
    ) -> Result<Response<pb::Modification>> {
        let r = request.into_inner();
        check_id("deployment id", &r.deployment_id)?;
        let token = token();
        let now = now_ms();
        let expires = now + lease_ms(r.lease_ms);
        let record = self
            .store
            .start_modification(&r.deployment_id, &token, now, expires)
            .await
            .map_err(ApiError::from)?;
        Ok(Response::new(pb::Modification {
            deployment_id: r.deployment_id,
            token,
            package_yaml: record.package_yaml,
            lease_expires: ms_text(expires),
        }))
    }

    async fn renew_modification(
        &self,
        request: Request<pb::RenewModificationRequest>,
    ) -> Result<Response<pb::Modification>> {
        let r = request.into_inner();
        check_id("deployment id", &r.deployment_id)?;
        let now = now_ms();
        let expires = now + lease_ms(r.lease_ms);
        self.store
            .renew_modification(&r.deployment_id, &r.token, now, expires)
            .await
            .map_err(ApiError::from)?;
        Ok(Response::new(pb::Modification {
            deployment_id: r.deployment_id,
            token: r.token,
            package_yaml: String::new(),
            lease_expires: ms_text(expires),
        }))
    }

    async fn end_modification(
        &self,
        request: Request<pb::EndModificationRequest>,
    ) -> Result<Response<pb::EndModificationResponse>> {
        let r = request.into_inner();
        check_id("deployment id", &r.deployment_id)?;
        let update = if r.package_yaml.is_empty() {
            None
        } else {
            let package =
                read_package(&format!("deployment {}", r.deployment_id), &r.package_yaml)?;
            let record = self
                .store
                .get_deployment(&r.deployment_id)
                .await
                .map_err(ApiError::from)?;
            Some(DataApi::derive(&record, &package))
        };
        let info = self
            .store
            .write_modification(&r.deployment_id, &r.token, now_ms(), update, true)
            .await
            .map_err(ApiError::from)?;
        self.changes.bump();
        Ok(Response::new(pb::EndModificationResponse {
            info: Some(convert::info(info)),
        }))
    }

    async fn cancel_modification(
        &self,
        request: Request<pb::CancelModificationRequest>,
    ) -> Result<Response<pb::CancelModificationResponse>> {
        let r = request.into_inner();
        check_id("deployment id", &r.deployment_id)?;
        self.store
            .write_modification(&r.deployment_id, &r.token, now_ms(), None, true)
            .await
            .map_err(ApiError::from)?;
        self.changes.bump();
        Ok(Response::new(pb::CancelModificationResponse {}))
    }

    type WatchStream = Stream_<pb::Change>;
    async fn watch(
        &self,
        request: Request<pb::WatchRequest>,
    ) -> Result<Response<Self::WatchStream>> {
        let r = request.into_inner();
        let from = i64::try_from(r.from_revision)
            .map_err(|_| Status::invalid_argument("from_revision is too large"))?;
        // Fail fast on a compacted revision.
        self.store
            .changes_since(from, 1)
            .await
            .map_err(ApiError::from)?;
        let kinds: Vec<i32> = r.kinds;
        let store = Arc::clone(&self.store);
        let mut wake = self.changes.subscribe();
        let shutdown = self.shutdown.clone().unwrap_or_default();
        let (tx, rx) = mpsc::channel(256);
        tokio::spawn(async move {
            let mut revision = from;
            loop {
                let changes = match store.changes_since(revision, 500).await {
                    Ok(changes) => changes,
                    Err(err) => {
                        let _ = tx.send(Err(Status::from(ApiError::from(err)))).await;
                        return;
                    }
                };
                let caught_up = changes.len() < 500;
                for change in changes {
                    revision = change.revision;
                    let kind = match change.kind {
                        EntityKind::Template => pb::EntityKind::Template,
                        EntityKind::Site => pb::EntityKind::Site,
                        EntityKind::Plugin => pb::EntityKind::Plugin,
                        EntityKind::Deployment => pb::EntityKind::Deployment,
                    } as i32;
                    if !kinds.is_empty() && !kinds.contains(&kind) {
                        continue;
                    }
                    let deployment = if change.kind == EntityKind::Deployment && !change.deleted {
                        store
                            .get_deployment(&change.id)
                            .await
                            .ok()
                            .map(|r| convert::info(r.info))
                    } else {
                        None
                    };
                    let message = pb::Change {
                        revision: change.revision as u64,
                        kind,
                        id: change.id,
                        r#type: if change.deleted {
                            pb::ChangeType::Delete
                        } else {
                            pb::ChangeType::Put
                        } as i32,
                        deployment,
                    };
                    if tx.send(Ok(message)).await.is_err() {
                        return;
                    }
                }
                if caught_up {
                    tokio::select! {
                        _ = tx.closed() => return,
                        _ = shutdown.triggered() => return,
                        _ = wake.changed() => {}
                        // Other daemons on the same database write without waking us.
                        _ = tokio::time::sleep(Duration::from_secs(1)) => {}
                    }
                }
            }
        });
        Ok(Response::new(Box::pin(
            tokio_stream::wrappers::ReceiverStream::new(rx),
        )))
    }
}

/// Convenience for callers that hold a proto filter map: `CatalogFilter` from patterns.
pub fn catalog_filter(
    ids: &[String],
    metadata: &std::collections::HashMap<String, String>,
) -> std::result::Result<CatalogFilter, ApiError> {
    convert::catalog_filter(ids, metadata)
}
