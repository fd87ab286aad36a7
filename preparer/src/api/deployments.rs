//! The deployment calls of the Data API: create, get, list, update, approve and delete.

use std::collections::{BTreeMap, BTreeSet};

use nephrite_merge::DeploymentResource;
use nephrite_preparer_client::{
    Created, Deployment, DeploymentInfo, DeploymentPage, DeploymentQuery, DeploymentRequest,
};

use super::{DataService, convert};
use crate::clock::{now_ms, now_text};
use crate::creation::{CreateDeployment, CreationContext, create_deployments};
use crate::errors::{ApiError, check_id, parse_package};
use crate::plugins::PreparerSet;
use crate::store::{DeploymentFilter, Window};

/// Whose update a call is: one that may write without a modification token (a person, the
/// daemon itself) or a plugin, which writes only inside the modification it was sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Writer {
    /// May write without a token.
    Tokenless,
    /// Writes only with a token.
    TokenOnly,
}

impl DataService {
    /// The ids of the templates (`template`) or sites whose metadata matches `map`; `None`
    /// when `map` is empty (no constraint).
    async fn resolve_ids(
        &self,
        template: bool,
        map: &BTreeMap<String, String>,
    ) -> Result<Option<BTreeSet<String>>, ApiError> {
        if map.is_empty() {
            return Ok(None);
        }
        let filter = convert::catalog_filter(&[], map)?;
        let mut ids = BTreeSet::new();
        let mut window = Window::largest_after("");
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

    /// Creates a deployment (or finds the one with the same instance key), as `author`'s.
    pub async fn create_deployment(
        &self,
        r: DeploymentRequest,
        author: &str,
    ) -> Result<Created, ApiError> {
        let merge = parse_package(
            "merge package".to_owned(),
            "merge_package_yaml",
            r.merge_package_yaml,
        )
        .await?;
        let preparers = PreparerSet::load(self.store.as_ref()).await?;
        let has_preparer = |gvk: &nephrite_krm::Gvk| preparers.has_preparer(gvk);
        let has_validator = |gvk: &nephrite_krm::Gvk| preparers.has_validator(gvk);
        let now = now_text();
        let context = CreationContext {
            auto_approve: self.auto_approve,
            has_preparer: &has_preparer,
            has_validator: &has_validator,
            now: &now,
            sites_verified: false,
            author,
        };
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
        let created = create_deployments(self.store.as_ref(), context, vec![request]).await?;
        let (created, deployment_id) = created
            .into_iter()
            .next()
            .ok_or_else(|| ApiError::Internal("the store created nothing".to_owned()))?;
        self.changes.bump();
        Ok(Created {
            created,
            deployment_id,
        })
    }

    /// A deployment with its package.
    pub async fn get_deployment(&self, id: &str) -> Result<Deployment, ApiError> {
        check_id("deployment id", id)?;
        let record = self.store.get_deployment(id).await?;
        Ok(Deployment {
            info: record.info,
            package_yaml: record.package_yaml,
        })
    }

    /// One page of deployments.
    pub async fn list_deployments(&self, q: DeploymentQuery) -> Result<DeploymentPage, ApiError> {
        if let Some(parent) = &q.parent_id {
            check_id("parent deployment id", parent)?;
        }
        let filter = DeploymentFilter {
            metadata: convert::selector("metadata pattern", &q.metadata_patterns)?,
            template_patterns: convert::patterns("template id pattern", &q.template_id_patterns)?,
            template_ids: self
                .resolve_ids(true, &q.template_metadata_patterns)
                .await?,
            site_patterns: convert::patterns("site id pattern", &q.site_id_patterns)?,
            site_ids: self.resolve_ids(false, &q.site_metadata_patterns).await?,
            parent_id: q.parent_id,
            prepared: q.prepared,
            approved: q.approved,
        };
        let window = convert::window(q.window)?;
        let revision = self.listing_revision().await?;
        let (rows, more) = self.store.list_deployments(&filter, &window).await?;
        let next_after_id = if more {
            rows.last().map(|r| r.id.clone())
        } else {
            None
        };
        Ok(DeploymentPage {
            deployments: rows,
            next_after_id,
            revision,
        })
    }

    /// Replaces a deployment's package, inside the modification `token` holds or, for a
    /// `writer` that may, in a modification of its own; `author` is who writes.
    pub async fn update_deployment(
        &self,
        id: &str,
        package_yaml: String,
        token: Option<String>,
        writer: Writer,
        author: &str,
    ) -> Result<DeploymentInfo, ApiError> {
        check_id("deployment id", id)?;
        let token = token.filter(|t| !t.is_empty());
        if token.is_none() && writer == Writer::TokenOnly {
            return Err(ApiError::Forbidden(
                "a plugin updates a deployment only with the modification token it was sent"
                    .to_owned(),
            ));
        }
        let package =
            parse_package(format!("deployment {id}"), "package_yaml", package_yaml).await?;
        let Some(token) = token else {
            return self
                .modify(id, author, "package updated", |current| {
                    *current = package;
                    Ok(())
                })
                .await;
        };
        let record = self.store.get_deployment(id).await?;
        let update = DataService::derive(
            &record,
            &package,
            author,
            "package updated inside a modification",
        );
        let info = self
            .store
            .write_modification(id, &token, now_ms(), Some(update), false)
            .await?;
        self.changes.bump();
        Ok(info)
    }

    /// Approves a prepared deployment, as `author`.
    pub async fn approve_deployment(
        &self,
        id: &str,
        author: &str,
    ) -> Result<DeploymentInfo, ApiError> {
        self.modify(id, author, "approved", |package| {
            if !DeploymentResource::is_prepared(package) {
                return Err(ApiError::Invalid(format!(
                    "deployment {id} is not prepared yet and cannot be approved"
                )));
            }
            DeploymentResource::mark_approved(package).map_err(|e| ApiError::Invalid(e.to_string()))
        })
        .await
    }

    /// Deletes a deployment and its descendants; whether it existed.
    pub async fn delete_deployment(&self, id: &str) -> Result<bool, ApiError> {
        check_id("deployment id", id)?;
        let deleted = self.store.delete_deployment(id).await?;
        self.changes.bump();
        Ok(!deleted.is_empty())
    }
}
