//! The Data API for callers in the daemon's own process: [`DataService`] implements the
//! client's [`DataApi`] trait by making its calls directly, so the web dashboard reads and
//! writes through the same trait as a remote client, with the same errors (each passes through
//! the status a remote caller would get), without a socket or protobuf in between.

use std::time::Duration;

use async_trait::async_trait;
use futures::StreamExt as _;
use nephrite_preparer_client::{
    CatalogQuery, ChangeStream, Created, DataApi, DataError, Deployment, DeploymentInfo,
    DeploymentPage, DeploymentQuery, DeploymentRequest, DeploymentRevision, DeploymentWrite,
    EntityKind, Lease, LeaseFence, Listing, Modification, Plugin, PluginQuery, Site, SiteInfo,
    Template, TemplateInfo, WriteResult,
};

use super::{DataService, Writer};
use crate::errors::ApiError;

/// The author of this process's writes in deployments' histories.
const IN_PROCESS: &str = "in-process";

/// The error of `call` as a remote caller would see it.
fn refused(call: &'static str) -> impl Fn(ApiError) -> DataError {
    move |error| DataError::from_status(call, &tonic::Status::from(error))
}

/// The error of the lease call `call` as a remote caller would see it.
fn lease_refused(call: &'static str) -> impl Fn(ApiError) -> DataError {
    move |error| DataError::from_status(call, &super::leases::status(error))
}

#[async_trait]
impl DataApi for DataService {
    async fn register_template(&self, template: Template) -> Result<bool, DataError> {
        let call = "RegisterTemplate";
        DataService::register_template(self, template)
            .await
            .map_err(refused(call))
    }

    async fn get_template(&self, id: &str) -> Result<Template, DataError> {
        let call = "GetTemplate";
        DataService::get_template(self, id)
            .await
            .map_err(refused(call))
    }

    async fn list_templates(
        &self,
        query: CatalogQuery,
    ) -> Result<Listing<TemplateInfo>, DataError> {
        let call = "ListTemplates";
        DataService::list_templates(self, query)
            .await
            .map_err(refused(call))
    }

    async fn delete_template(&self, id: &str) -> Result<bool, DataError> {
        let call = "DeleteTemplate";
        DataService::delete_template(self, id)
            .await
            .map_err(refused(call))
    }

    async fn register_site(&self, site: Site) -> Result<bool, DataError> {
        let call = "RegisterSite";
        DataService::register_site(self, site)
            .await
            .map_err(refused(call))
    }

    async fn get_site(&self, id: &str) -> Result<Site, DataError> {
        let call = "GetSite";
        DataService::get_site(self, id).await.map_err(refused(call))
    }

    async fn list_sites(&self, query: CatalogQuery) -> Result<Listing<SiteInfo>, DataError> {
        let call = "ListSites";
        DataService::list_sites(self, query)
            .await
            .map_err(refused(call))
    }

    async fn delete_site(&self, id: &str) -> Result<bool, DataError> {
        let call = "DeleteSite";
        DataService::delete_site(self, id)
            .await
            .map_err(refused(call))
    }

    async fn register_plugin(&self, plugin: Plugin) -> Result<bool, DataError> {
        let call = "RegisterPlugin";
        DataService::register_plugin(self, plugin)
            .await
            .map_err(refused(call))
    }

    async fn get_plugin(&self, name: &str) -> Result<Plugin, DataError> {
        let call = "GetPlugin";
        DataService::get_plugin(self, name)
            .await
            .map_err(refused(call))
    }

    async fn list_plugins(&self, query: PluginQuery) -> Result<Listing<Plugin>, DataError> {
        let call = "ListPlugins";
        DataService::list_plugins(self, query)
            .await
            .map_err(refused(call))
    }

    async fn delete_plugin(&self, name: &str) -> Result<bool, DataError> {
        let call = "DeletePlugin";
        DataService::delete_plugin(self, name)
            .await
            .map_err(refused(call))
    }

    async fn apply_deployments(
        &self,
        writes: Vec<DeploymentWrite>,
        fence: Option<LeaseFence>,
    ) -> Result<Vec<WriteResult>, DataError> {
        let call = "ApplyDeployments";
        DataService::apply_deployments(self, writes, fence, Writer::Tokenless, IN_PROCESS)
            .await
            .map_err(refused(call))
    }

    async fn create_deployment(&self, request: DeploymentRequest) -> Result<Created, DataError> {
        let call = "CreateDeployment";
        DataService::create_deployment(self, request, IN_PROCESS)
            .await
            .map_err(refused(call))
    }

    async fn get_deployment(&self, id: &str) -> Result<Deployment, DataError> {
        let call = "GetDeployment";
        DataService::get_deployment(self, id)
            .await
            .map_err(refused(call))
    }

    async fn list_deployments(&self, query: DeploymentQuery) -> Result<DeploymentPage, DataError> {
        let call = "ListDeployments";
        DataService::list_deployments(self, query)
            .await
            .map_err(refused(call))
    }

    /// The daemon's own callers write as a person would: without a token when they hold none.
    async fn update_deployment(
        &self,
        id: &str,
        package_yaml: String,
        token: Option<String>,
    ) -> Result<DeploymentInfo, DataError> {
        let call = "UpdateDeployment";
        DataService::update_deployment(self, id, package_yaml, token, Writer::Tokenless, IN_PROCESS)
            .await
            .map_err(refused(call))
    }

    async fn approve_deployment(&self, id: &str) -> Result<DeploymentInfo, DataError> {
        let call = "ApproveDeployment";
        DataService::approve_deployment(self, id, IN_PROCESS)
            .await
            .map_err(refused(call))
    }

    async fn delete_deployment(&self, id: &str) -> Result<bool, DataError> {
        let call = "DeleteDeployment";
        DataService::delete_deployment(self, id)
            .await
            .map_err(refused(call))
    }

    async fn deployment_revisions(&self, id: &str) -> Result<Vec<DeploymentRevision>, DataError> {
        let call = "ListDeploymentRevisions";
        DataService::deployment_revisions(self, id)
            .await
            .map_err(refused(call))
    }

    async fn deployment_revision(
        &self,
        id: &str,
        number: i64,
    ) -> Result<DeploymentRevision, DataError> {
        let call = "GetDeploymentRevision";
        DataService::deployment_revision(self, id, number)
            .await
            .map_err(refused(call))
    }

    async fn rollback_deployment(
        &self,
        id: &str,
        number: i64,
    ) -> Result<DeploymentInfo, DataError> {
        let call = "RollbackDeployment";
        DataService::rollback_deployment(self, id, number, IN_PROCESS)
            .await
            .map_err(refused(call))
    }

    async fn start_modification(
        &self,
        id: &str,
        lease: Option<Duration>,
    ) -> Result<Modification, DataError> {
        let call = "StartModification";
        DataService::start_modification(self, id, lease)
            .await
            .map_err(refused(call))
    }

    async fn renew_modification(
        &self,
        id: &str,
        token: &str,
        lease: Option<Duration>,
    ) -> Result<Modification, DataError> {
        let call = "RenewModification";
        DataService::renew_modification(self, id, token, lease)
            .await
            .map_err(refused(call))
    }

    async fn end_modification(
        &self,
        id: &str,
        token: &str,
        package_yaml: Option<String>,
    ) -> Result<DeploymentInfo, DataError> {
        let call = "EndModification";
        DataService::end_modification(self, id, token, package_yaml, IN_PROCESS)
            .await
            .map_err(refused(call))
    }

    async fn cancel_modification(&self, id: &str, token: &str) -> Result<(), DataError> {
        let call = "CancelModification";
        DataService::cancel_modification(self, id, token)
            .await
            .map_err(refused(call))
    }

    async fn acquire_lease(
        &self,
        name: &str,
        holder: &str,
        duration: Option<Duration>,
    ) -> Result<Lease, DataError> {
        DataService::acquire_lease(self, name, holder, duration)
            .await
            .map_err(lease_refused("AcquireLease"))
    }

    async fn renew_lease(
        &self,
        name: &str,
        token: &str,
        duration: Option<Duration>,
    ) -> Result<Lease, DataError> {
        DataService::renew_lease(self, name, token, duration)
            .await
            .map_err(lease_refused("RenewLease"))
    }

    async fn release_lease(&self, name: &str, token: &str) -> Result<(), DataError> {
        DataService::release_lease(self, name, token)
            .await
            .map_err(lease_refused("ReleaseLease"))
    }

    async fn get_lease(&self, name: &str) -> Result<Lease, DataError> {
        DataService::get_lease(self, name)
            .await
            .map_err(lease_refused("GetLease"))
    }

    async fn watch(
        &self,
        from_revision: u64,
        kinds: &[EntityKind],
    ) -> Result<ChangeStream, DataError> {
        let call = "Watch";
        let changes = DataService::watch(self, from_revision, kinds.to_vec())
            .await
            .map_err(refused(call))?;
        Ok(Box::pin(changes.map(move |change| {
            change.map_err(|status| DataError::from_status(call, &status))
        })))
    }
}

#[cfg(test)]
mod tests {
    use futures::StreamExt as _;
    use nephrite_preparer_client::ErrorKind;

    use super::*;
    use crate::api::Changes;

    async fn service(dir: &tempfile::TempDir) -> DataService {
        let spec = format!("sqlite:{}", dir.path().join("p.db").display());
        let store = crate::store::open(&spec).await.expect("store");
        DataService::new(store, Changes::default(), true)
    }

    #[tokio::test]
    async fn a_refusal_in_process_is_the_one_a_remote_caller_gets() {
        let dir = tempfile::tempdir().expect("tempdir");
        let api: &dyn DataApi = &service(&dir).await;
        let missing = api
            .get_deployment("nope")
            .await
            .expect_err("no such deployment");
        assert!(missing.is_not_found(), "{missing:?}");
        assert_eq!(missing.call(), "GetDeployment");
        assert_eq!(missing.to_string(), "deployment not found: nope");
        let bad = api.get_site("a b").await.expect_err("a bad id");
        assert_eq!(bad.kind(), ErrorKind::InvalidArgument, "{bad:?}");
    }

    #[tokio::test]
    async fn a_deployment_made_in_process_is_listed_and_watched() {
        let dir = tempfile::tempdir().expect("tempdir");
        let api: &dyn DataApi = &service(&dir).await;
        let mut changes = api
            .watch(0, &[EntityKind::Deployment])
            .await
            .expect("watch");
        let created = api
            .create_deployment(DeploymentRequest {
                merge_package_yaml: "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n".into(),
                ..DeploymentRequest::default()
            })
            .await
            .expect("create");
        let listed = api
            .all_deployments(DeploymentQuery::default())
            .await
            .expect("list");
        assert_eq!(listed.len(), 1);
        assert_eq!(listed[0].id, created.deployment_id);
        let change = changes.next().await.expect("a change").expect("no error");
        assert_eq!(change.kind, EntityKind::Deployment);
        assert_eq!(change.id, created.deployment_id);
        assert!(!change.deleted);
        assert_eq!(
            change.deployment.map(|row| row.id),
            Some(created.deployment_id)
        );
    }
}
