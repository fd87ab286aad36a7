//! Deployment handlers of the Data API: create, get, list, update, approve and delete.

use std::collections::BTreeSet;

use nephrite_merge::DeploymentResource;
use nephrite_proto::nephrite::preparer::data::v1 as pb;
use nephrite_runtime::CallerIdentity;
use tonic::{Request, Response, Status};

use super::{DataApi, Result, convert};
use crate::clock::{now_ms, now_text};
use crate::creation::{CreateDeployment, CreationContext, create_deployments};
use crate::errors::{ApiError, check_id, parse_package};
use crate::plugins::PreparerSet;
use crate::store::{DeploymentFilter, Window};

impl DataApi {
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

pub(super) async fn create_deployment(
    api: &DataApi,
    request: Request<pb::CreateDeploymentRequest>,
) -> Result<Response<pb::CreateDeploymentResponse>> {
    let r = request.into_inner();
    let merge = parse_package(
        "merge package".to_owned(),
        "merge_package_yaml",
        r.merge_package_yaml.clone(),
    )
    .await?;
    let preparers = PreparerSet::load(api.store.as_ref())
        .await
        .map_err(ApiError::from)?;
    let has_preparer = |gvk: &nephrite_krm::Gvk| preparers.has_preparer(gvk);
    let now = now_text();
    let context = CreationContext {
        auto_approve: api.auto_approve,
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
    let created = create_deployments(api.store.as_ref(), context, vec![request]).await?;
    let (created, deployment_id) = created
        .into_iter()
        .next()
        .ok_or_else(|| Status::internal("the store created nothing"))?;
    api.changes.bump();
    Ok(Response::new(pb::CreateDeploymentResponse {
        created,
        deployment_id,
    }))
}

pub(super) async fn get_deployment(
    api: &DataApi,
    request: Request<pb::GetRequest>,
) -> Result<Response<pb::Deployment>> {
    let id = request.into_inner().id;
    check_id("deployment id", &id)?;
    let record = api
        .store
        .get_deployment(&id)
        .await
        .map_err(ApiError::from)?;
    Ok(Response::new(pb::Deployment {
        info: Some(convert::info(record.info)),
        package_yaml: record.package_yaml,
    }))
}

pub(super) async fn list_deployments(
    api: &DataApi,
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
        template_ids: api.resolve_ids(true, &r.template_metadata_patterns).await?,
        site_patterns: convert::patterns("site id pattern", &r.site_id_patterns)?,
        site_ids: api.resolve_ids(false, &r.site_metadata_patterns).await?,
        prepared: r.prepared,
        approved: r.approved,
    };
    let window = convert::window(r.window)?;
    let (rows, more) = api
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

pub(super) async fn update_deployment(
    api: &DataApi,
    request: Request<pb::UpdateDeploymentRequest>,
) -> Result<Response<pb::UpdateDeploymentResponse>> {
    let tokenless = crate::auth::may_write_without_token(CallerIdentity::of(&request));
    let r = request.into_inner();
    check_id("deployment id", &r.deployment_id)?;
    if r.modification_token.is_empty() && !tokenless {
        return Err(Status::permission_denied(
            "a plugin updates a deployment only with the modification token it was sent",
        ));
    }
    let package = parse_package(
        format!("deployment {}", r.deployment_id),
        "package_yaml",
        r.package_yaml.clone(),
    )
    .await?;
    let info = if r.modification_token.is_empty() {
        api.modify(&r.deployment_id, |current| {
            *current = package;
            Ok(())
        })
        .await?
    } else {
        let record = api
            .store
            .get_deployment(&r.deployment_id)
            .await
            .map_err(ApiError::from)?;
        let update = DataApi::derive(&record, &package);
        let info = api
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
        api.changes.bump();
        convert::info(info)
    };
    Ok(Response::new(pb::UpdateDeploymentResponse {
        info: Some(info),
    }))
}

pub(super) async fn approve_deployment(
    api: &DataApi,
    request: Request<pb::ApproveDeploymentRequest>,
) -> Result<Response<pb::ApproveDeploymentResponse>> {
    let id = request.into_inner().deployment_id;
    let info = api
        .modify(&id, |package| {
            if !DeploymentResource::is_prepared(package) {
                return Err(ApiError::Invalid(format!(
                    "deployment {id} is not prepared yet and cannot be approved"
                )));
            }
            DeploymentResource::mark_approved(package).map_err(|e| ApiError::Invalid(e.to_string()))
        })
        .await?;
    Ok(Response::new(pb::ApproveDeploymentResponse {
        info: Some(info),
    }))
}

pub(super) async fn delete_deployment(
    api: &DataApi,
    request: Request<pb::DeleteRequest>,
) -> Result<Response<pb::DeleteResponse>> {
    let id = request.into_inner().id;
    check_id("deployment id", &id)?;
    let deleted = api
        .store
        .delete_deployment(&id)
        .await
        .map_err(ApiError::from)?;
    api.changes.bump();
    Ok(Response::new(pb::DeleteResponse {
        deleted: !deleted.is_empty(),
    }))
}
