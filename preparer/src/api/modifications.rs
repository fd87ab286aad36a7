//! Modifications of the Data API: leases (start, renew, end, cancel) and the one-shot
//! modification behind direct updates, with the fields a package implies.

use std::time::Duration;

use nephrite_krm::Package;
use nephrite_merge::DeploymentResource;
use nephrite_merge::metadata::{extract_metadata, overlay};
use nephrite_preparer_client::{DeploymentInfo, Modification};

use super::{DEFAULT_LEASE, DataService};
use crate::clock::{ms_text, now_ms, now_text};
use crate::errors::{ApiError, check_id, parse_package, read_package};
use crate::store::{DeploymentRecord, DeploymentUpdate};

fn token() -> String {
    uuid::Uuid::new_v4().to_string()
}

/// A lease's length in ms: the default when none is asked for, at most an hour.
fn lease_ms(requested: Option<Duration>) -> i64 {
    match requested {
        None => DEFAULT_LEASE.as_millis() as i64,
        Some(lease) => lease.as_millis().min(3_600_000) as i64,
    }
}

impl DataService {
    /// The fields a package implies, for writing it as `author`'s write `summary`.
    pub(super) fn derive(
        record: &DeploymentRecord,
        package: &Package,
        author: &str,
        summary: &str,
    ) -> DeploymentUpdate {
        DeploymentUpdate {
            package_yaml: package.to_yaml(),
            prepared: DeploymentResource::is_prepared(package),
            approved: DeploymentResource::is_approved(package),
            error: DeploymentResource::last_error(package).unwrap_or_default(),
            metadata: overlay(&record.info.metadata, &extract_metadata(package)),
            updated: now_text(),
            author: author.to_owned(),
            summary: summary.to_owned(),
        }
    }

    /// Runs `edit` on a deployment's package inside a fresh modification, written as
    /// `author`'s write `summary` (its revision's).
    pub(super) async fn modify(
        &self,
        id: &str,
        author: &str,
        summary: &str,
        edit: impl FnOnce(&mut Package) -> Result<(), ApiError>,
    ) -> Result<DeploymentInfo, ApiError> {
        check_id("deployment id", id)?;
        let token = token();
        let now = now_ms();
        let record = self
            .store
            .start_modification(id, &token, now, now + lease_ms(None))
            .await?;
        let result = async {
            let mut package = read_package(&format!("deployment {id}"), &record.package_yaml)?;
            edit(&mut package)?;
            let update = DataService::derive(&record, &package, author, summary);
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
        Ok(info)
    }

    /// Takes the exclusive lease of a deployment for `lease` (`None`: [`DEFAULT_LEASE`]).
    pub async fn start_modification(
        &self,
        id: &str,
        lease: Option<Duration>,
    ) -> Result<Modification, ApiError> {
        check_id("deployment id", id)?;
        let token = token();
        let now = now_ms();
        let expires = now + lease_ms(lease);
        let record = self
            .store
            .start_modification(id, &token, now, expires)
            .await?;
        Ok(Modification {
            deployment_id: id.to_owned(),
            token,
            package_yaml: record.package_yaml,
            lease_expires: ms_text(expires),
        })
    }

    /// Extends the lease `token` holds.
    pub async fn renew_modification(
        &self,
        id: &str,
        token: &str,
        lease: Option<Duration>,
    ) -> Result<Modification, ApiError> {
        check_id("deployment id", id)?;
        let now = now_ms();
        let expires = now + lease_ms(lease);
        self.store
            .renew_modification(id, token, now, expires)
            .await?;
        Ok(Modification {
            deployment_id: id.to_owned(),
            token: token.to_owned(),
            package_yaml: String::new(),
            lease_expires: ms_text(expires),
        })
    }

    /// Writes `package_yaml` (when given, as `author`'s) and releases the lease.
    pub async fn end_modification(
        &self,
        id: &str,
        token: &str,
        package_yaml: Option<String>,
        author: &str,
    ) -> Result<DeploymentInfo, ApiError> {
        check_id("deployment id", id)?;
        let update = match package_yaml.filter(|yaml| !yaml.is_empty()) {
            None => None,
            Some(yaml) => {
                let package =
                    parse_package(format!("deployment {id}"), "package_yaml", yaml).await?;
                let record = self.store.get_deployment(id).await?;
                Some(DataService::derive(
                    &record,
                    &package,
                    author,
                    "package written at the end of a modification",
                ))
            }
        };
        let info = self
            .store
            .write_modification(id, token, now_ms(), update, true)
            .await?;
        self.changes.bump();
        Ok(info)
    }

    /// Releases the lease without writing.
    pub async fn cancel_modification(&self, id: &str, token: &str) -> Result<(), ApiError> {
        check_id("deployment id", id)?;
        self.store
            .write_modification(id, token, now_ms(), None, true)
            .await?;
        self.changes.bump();
        Ok(())
    }
}
