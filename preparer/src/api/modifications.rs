//! Modifications of the Data API: leases (start, renew, end, cancel) and the one-shot
//! modification behind direct updates, with the fields a package implies.

use nephrite_krm::Package;
use nephrite_merge::DeploymentResource;
use nephrite_merge::metadata::{extract_metadata, overlay};
use nephrite_proto::nephrite::preparer::data::v1 as pb;
use tonic::{Request, Response};

use super::{DEFAULT_LEASE, DataApi, Result, convert};
use crate::clock::{ms_text, now_ms, now_text};
use crate::errors::{ApiError, check_id, parse_package, read_package};
use crate::store::{DeploymentRecord, DeploymentUpdate};

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
    /// The fields a package implies, for writing it.
    pub(super) fn derive(record: &DeploymentRecord, package: &Package) -> DeploymentUpdate {
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
    pub(super) async fn modify(
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
}

pub(super) async fn start_modification(
    api: &DataApi,
    request: Request<pb::StartModificationRequest>,
) -> Result<Response<pb::Modification>> {
    let r = request.into_inner();
    check_id("deployment id", &r.deployment_id)?;
    let token = token();
    let now = now_ms();
    let expires = now + lease_ms(r.lease_ms);
    let record = api
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

pub(super) async fn renew_modification(
    api: &DataApi,
    request: Request<pb::RenewModificationRequest>,
) -> Result<Response<pb::Modification>> {
    let r = request.into_inner();
    check_id("deployment id", &r.deployment_id)?;
    let now = now_ms();
    let expires = now + lease_ms(r.lease_ms);
    api.store
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

pub(super) async fn end_modification(
    api: &DataApi,
    request: Request<pb::EndModificationRequest>,
) -> Result<Response<pb::EndModificationResponse>> {
    let r = request.into_inner();
    check_id("deployment id", &r.deployment_id)?;
    let update = if r.package_yaml.is_empty() {
        None
    } else {
        let package = parse_package(
            format!("deployment {}", r.deployment_id),
            "package_yaml",
            r.package_yaml.clone(),
        )
        .await?;
        let record = api
            .store
            .get_deployment(&r.deployment_id)
            .await
            .map_err(ApiError::from)?;
        Some(DataApi::derive(&record, &package))
    };
    let info = api
        .store
        .write_modification(&r.deployment_id, &r.token, now_ms(), update, true)
        .await
        .map_err(ApiError::from)?;
    api.changes.bump();
    Ok(Response::new(pb::EndModificationResponse {
        info: Some(convert::info(info)),
    }))
}

pub(super) async fn cancel_modification(
    api: &DataApi,
    request: Request<pb::CancelModificationRequest>,
) -> Result<Response<pb::CancelModificationResponse>> {
    let r = request.into_inner();
    check_id("deployment id", &r.deployment_id)?;
    api.store
        .write_modification(&r.deployment_id, &r.token, now_ms(), None, true)
        .await
        .map_err(ApiError::from)?;
    api.changes.bump();
    Ok(Response::new(pb::CancelModificationResponse {}))
}
