//! A deployment's history through the Data API: its kept revisions, one revision's package,
//! and rollback — a kept revision's package written as a new revision, its prepared and
//! approved marks removed so that the loop prepares, validates and approves it as it would
//! any change.

use nephrite_krm::keys;
use nephrite_merge::DeploymentResource;
use nephrite_merge::deployment::DEPLOYMENT_NAME;
use nephrite_preparer_client::{DeploymentInfo, DeploymentRevision};

use super::DataService;
use crate::errors::{ApiError, check_id, read_package};

impl DataService {
    /// A deployment's kept revisions, oldest first, without packages.
    pub async fn deployment_revisions(
        &self,
        id: &str,
    ) -> Result<Vec<DeploymentRevision>, ApiError> {
        check_id("deployment id", id)?;
        Ok(self.store.deployment_revisions(id).await?)
    }

    /// One kept revision with its package.
    pub async fn deployment_revision(
        &self,
        id: &str,
        number: i64,
    ) -> Result<DeploymentRevision, ApiError> {
        check_id("deployment id", id)?;
        check_number(id, number)?;
        Ok(self.store.deployment_revision(id, number).await?)
    }

    /// Writes revision `number`'s package as the deployment's new one, as `author`'s write,
    /// unprepared and unapproved.
    pub async fn rollback_deployment(
        &self,
        id: &str,
        number: i64,
        author: &str,
    ) -> Result<DeploymentInfo, ApiError> {
        check_id("deployment id", id)?;
        check_number(id, number)?;
        let revision = self.store.deployment_revision(id, number).await?;
        let mut package = read_package(
            &format!("revision {number} of deployment {id}"),
            &revision.package_yaml,
        )?;
        if let Some(resource) = package.get_mut(&DeploymentResource::gvk(), DEPLOYMENT_NAME) {
            resource.remove_annotation(keys::PREPARED);
            resource.remove_annotation(keys::APPROVED);
        }
        let summary = format!("rolled back to revision {number}");
        self.modify(id, author, &summary, |current| {
            *current = package;
            Ok(())
        })
        .await
    }
}

fn check_number(id: &str, number: i64) -> Result<(), ApiError> {
    if number < 1 {
        return Err(ApiError::Invalid(format!(
            "deployment {id}: revision {number} does not exist (revisions count from 1)"
        )));
    }
    Ok(())
}
