//! The batch write of the Data API (`ApplyDeployments`): creates, updates and deletes of
//! deployments checked one by one as their single calls check them, then written by the store
//! in one transaction (all or none). A refusal names the write's index and what it names; its
//! status is the single call's.

use nephrite_preparer_client::{Created, DeploymentWrite, LeaseFence, MAX_BATCH, WriteResult};

use nephrite_runtime::prometheus_client::metrics::counter::Counter;
use nephrite_runtime::prometheus_client::metrics::family::Family;
use nephrite_runtime::{GrpcServer, InvalidHelp};

use super::{DataService, Writer};
use crate::clock::{now_ms, now_text};
use crate::creation::{CreateDeployment, CreationContext, Creator};
use crate::errors::{ApiError, check_id, parse_package};
use crate::plugins::PreparerSet;
use crate::store::{BatchResult, BatchWrite, Fence, StoreError};

/// The deployments written through batches, by kind of write (`create`, `update`,
/// `delete`): what a controller's batches amount to, as the single calls' request counts
/// say for theirs.
#[derive(Debug, Clone, Default)]
pub struct BatchWrites(Family<Vec<(String, String)>, Counter>);

impl BatchWrites {
    /// Exposes `preparer_batch_deployment_writes_total{write}` on the server's `/metrics`.
    ///
    /// # Errors
    /// Never with this help text (the runtime checks it).
    pub fn register(&self, server: &mut GrpcServer) -> Result<(), InvalidHelp> {
        server.register_metric(
            "preparer_batch_deployment_writes",
            "Deployment writes applied through ApplyDeployments batches, by kind of write.",
            self.0.clone(),
        )
    }

    fn count(&self, write: &str) {
        self.0
            .get_or_create(&vec![("write".to_owned(), write.to_owned())])
            .inc();
    }
}

/// How a write is named in an error: what it does and to which deployment.
fn label(write: &DeploymentWrite) -> String {
    match write {
        DeploymentWrite::Create(request) if request.instance_key.is_empty() => {
            format!("create from template {:?}", request.template_id)
        }
        DeploymentWrite::Create(request) => {
            format!("create of instance {}", request.instance_key)
        }
        DeploymentWrite::Update { id, .. } => format!("update of deployment {id}"),
        DeploymentWrite::Delete { id } => format!("delete of deployment {id}"),
    }
}

fn check_fence(fence: &LeaseFence) -> Result<Fence, ApiError> {
    check_id("fence lease name", &fence.name)?;
    let transitions = i64::try_from(fence.transitions)
        .ok()
        .filter(|&t| t > 0)
        .ok_or_else(|| {
            ApiError::Invalid(format!(
                "fence of lease {}: transitions {} is not a holding (1 or more)",
                fence.name, fence.transitions
            ))
        })?;
    Ok(Fence {
        name: fence.name.clone(),
        transitions,
    })
}

impl DataService {
    /// Applies `writes` in one transaction, as `author`'s (see the module docs); `writer`
    /// says whether the caller may update without a modification token (a plugin may not).
    pub async fn apply_deployments(
        &self,
        writes: Vec<DeploymentWrite>,
        fence: Option<LeaseFence>,
        writer: Writer,
        author: &str,
    ) -> Result<Vec<WriteResult>, ApiError> {
        if writes.len() > MAX_BATCH {
            return Err(ApiError::Invalid(format!(
                "ApplyDeployments: {} writes, more than the limit of {MAX_BATCH} per batch",
                writes.len()
            )));
        }
        let fence = fence.as_ref().map(check_fence).transpose()?;
        let labels: Vec<String> = writes.iter().map(label).collect();
        let at = |index: usize| {
            let label = labels[index].clone();
            move |source: ApiError| ApiError::Item {
                index,
                label,
                source: Box::new(source),
            }
        };
        let preparers = match writes
            .iter()
            .any(|w| matches!(w, DeploymentWrite::Create(_)))
        {
            true => Some(PreparerSet::load(self.store.as_ref()).await?),
            false => None,
        };
        let has_preparer =
            |gvk: &nephrite_krm::Gvk| preparers.as_ref().is_some_and(|p| p.has_preparer(gvk));
        let has_validator =
            |gvk: &nephrite_krm::Gvk| preparers.as_ref().is_some_and(|p| p.has_validator(gvk));
        let now = now_text();
        let context = CreationContext {
            auto_approve: self.auto_approve,
            has_preparer: &has_preparer,
            has_validator: &has_validator,
            now: &now,
            sites_verified: false,
            author,
        };
        let mut creator = Creator::default();
        let mut stored = Vec::with_capacity(writes.len());
        for (index, write) in writes.into_iter().enumerate() {
            let write = match write {
                DeploymentWrite::Create(r) => {
                    let merge = parse_package(
                        "merge package".to_owned(),
                        "merge_package_yaml",
                        r.merge_package_yaml,
                    )
                    .await
                    .map_err(at(index))?;
                    let request = CreateDeployment {
                        parent_id: r.parent_id,
                        template_id: r.template_id,
                        site_id: r.site_id,
                        merge,
                        merge_metadata: r.merge_metadata,
                        prepared: r.prepared,
                        approved: r.approved,
                        instance_key: r.instance_key,
                    };
                    let row = creator.row(self.store.as_ref(), &context, request).await;
                    BatchWrite::Create(row.map_err(at(index))?)
                }
                DeploymentWrite::Update {
                    id,
                    package_yaml,
                    if_updated,
                } => {
                    let update = async {
                        check_id("deployment id", &id)?;
                        if writer == Writer::TokenOnly {
                            return Err(ApiError::Forbidden(
                                "a plugin updates a deployment only with the modification \
                                 token it was sent, never in a batch"
                                    .to_owned(),
                            ));
                        }
                        let package =
                            parse_package(format!("deployment {id}"), "package_yaml", package_yaml)
                                .await?;
                        let record = self.store.get_deployment(&id).await?;
                        Ok(DataService::derive(
                            &record,
                            &package,
                            author,
                            "package updated in a batch",
                        ))
                    }
                    .await
                    .map_err(at(index))?;
                    BatchWrite::Update {
                        id,
                        update,
                        if_updated,
                        now_ms: now_ms(),
                    }
                }
                DeploymentWrite::Delete { id } => {
                    check_id("deployment id", &id).map_err(at(index))?;
                    BatchWrite::Delete { id }
                }
            };
            stored.push(write);
        }
        let results =
            self.store
                .apply_deployments(stored, fence)
                .await
                .map_err(|error| match error {
                    StoreError::Item { index, source } if index < labels.len() => ApiError::Item {
                        index,
                        label: labels[index].clone(),
                        source: Box::new(ApiError::Store(*source)),
                    },
                    other => ApiError::Store(other),
                })?;
        self.changes.bump();
        Ok(results
            .into_iter()
            .map(|result| match result {
                BatchResult::Created(created, deployment_id) => {
                    self.batch_writes.count("create");
                    WriteResult::Created(Created {
                        created,
                        deployment_id,
                    })
                }
                BatchResult::Updated(info) => {
                    self.batch_writes.count("update");
                    WriteResult::Updated(info)
                }
                BatchResult::Deleted(ids) => {
                    self.batch_writes.count("delete");
                    WriteResult::Deleted(!ids.is_empty())
                }
            })
            .collect())
    }
}
