//! [`DataApi`] over gRPC: each call converts its domain request to the wire ([`crate::wire`]),
//! calls the preparer and converts the answer back, so a refusal, an unreachable preparer and
//! an answer that does not convert each become their [`DataError`].

use std::time::Duration;

use async_trait::async_trait;
use futures::StreamExt as _;
use nephrite_proto::nephrite::preparer::data::v1 as pb;
use nephrite_proto::nephrite::preparer::data::v1::data_client::DataClient;
use nephrite_runtime::AuthChannel;
use tonic::Streaming;

use crate::wire::required_info;
use crate::{
    CatalogQuery, Change, ChangeStream, Created, DataApi, DataError, Deployment, DeploymentInfo,
    DeploymentPage, DeploymentQuery, DeploymentRequest, DeploymentRevision, DeploymentWrite,
    EntityKind, Lease, LeaseFence, Listing, Modification, Plugin, PluginQuery, REVISION_HEADER,
    Site, SiteInfo, Template, TemplateInfo, WireError, WriteResult,
};

/// The preparer's Data API over a gRPC channel (cheap to clone: clones share the channel).
#[derive(Debug, Clone)]
pub struct PreparerClient {
    client: DataClient<AuthChannel>,
}

impl PreparerClient {
    /// A client on `channel`, which presents the caller's credentials on every call.
    pub fn new(channel: AuthChannel) -> Self {
        PreparerClient {
            client: DataClient::new(channel),
        }
    }

    /// A copy of the generated client to call with (tonic's calls take `&mut`).
    fn wire(&self) -> DataClient<AuthChannel> {
        self.client.clone()
    }
}

/// The error of `call` for a failed status.
fn refused(call: &'static str) -> impl Fn(tonic::Status) -> DataError {
    move |status| DataError::from_status(call, &status)
}

/// The error of `call` for an answer that does not convert.
fn invalid(call: &'static str) -> impl Fn(WireError) -> DataError {
    move |source| DataError::InvalidAnswer { call, source }
}

/// Every item of a listing's stream, converted, with the revision its header names (0 when
/// it names none: a preparer from before list + watch).
async fn collect<W, T>(
    call: &'static str,
    answer: Result<tonic::Response<Streaming<W>>, tonic::Status>,
    convert: fn(W) -> Result<T, WireError>,
) -> Result<Listing<T>, DataError> {
    let answer = answer.map_err(refused(call))?;
    let revision = match answer.metadata().get(REVISION_HEADER) {
        None => 0,
        Some(value) => value
            .to_str()
            .ok()
            .and_then(|text| text.parse::<u64>().ok())
            .ok_or_else(|| DataError::InvalidAnswer {
                call,
                source: WireError::BadRevisionHeader {
                    header: REVISION_HEADER,
                    value: String::from_utf8_lossy(value.as_bytes()).into_owned(),
                },
            })?,
    };
    let mut stream = answer.into_inner();
    let mut items = Vec::new();
    while let Some(item) = stream.message().await.map_err(refused(call))? {
        items.push(convert(item).map_err(invalid(call))?);
    }
    Ok(Listing { items, revision })
}

fn lease_ms(lease: Option<Duration>) -> u64 {
    lease.map_or(0, |lease| {
        lease.as_millis().clamp(1, u64::MAX as u128) as u64
    })
}

fn get(id: &str) -> pb::GetRequest {
    pb::GetRequest { id: id.to_owned() }
}

fn delete(id: &str) -> pb::DeleteRequest {
    pb::DeleteRequest { id: id.to_owned() }
}

#[async_trait]
impl DataApi for PreparerClient {
    async fn register_template(&self, template: Template) -> Result<bool, DataError> {
        let call = "RegisterTemplate";
        let request = pb::RegisterTemplateRequest::from(template);
        let answer = self.wire().register_template(request).await;
        Ok(answer.map_err(refused(call))?.into_inner().created)
    }

    async fn get_template(&self, id: &str) -> Result<Template, DataError> {
        let call = "GetTemplate";
        let answer = self.wire().get_template(get(id)).await;
        Template::try_from(answer.map_err(refused(call))?.into_inner()).map_err(invalid(call))
    }

    async fn list_templates(
        &self,
        query: CatalogQuery,
    ) -> Result<Listing<TemplateInfo>, DataError> {
        let request = pb::ListTemplatesRequest::from(query);
        let answer = self.wire().list_templates(request).await;
        collect("ListTemplates", answer, |t| Ok(t.into())).await
    }

    async fn delete_template(&self, id: &str) -> Result<bool, DataError> {
        let answer = self.wire().delete_template(delete(id)).await;
        Ok(answer
            .map_err(refused("DeleteTemplate"))?
            .into_inner()
            .deleted)
    }

    async fn register_site(&self, site: Site) -> Result<bool, DataError> {
        let request = pb::RegisterSiteRequest::from(site);
        let answer = self.wire().register_site(request).await;
        Ok(answer
            .map_err(refused("RegisterSite"))?
            .into_inner()
            .created)
    }

    async fn get_site(&self, id: &str) -> Result<Site, DataError> {
        let call = "GetSite";
        let answer = self.wire().get_site(get(id)).await;
        Site::try_from(answer.map_err(refused(call))?.into_inner()).map_err(invalid(call))
    }

    async fn list_sites(&self, query: CatalogQuery) -> Result<Listing<SiteInfo>, DataError> {
        let request = pb::ListSitesRequest::from(query);
        let answer = self.wire().list_sites(request).await;
        collect("ListSites", answer, |s| Ok(s.into())).await
    }

    async fn delete_site(&self, id: &str) -> Result<bool, DataError> {
        let answer = self.wire().delete_site(delete(id)).await;
        Ok(answer.map_err(refused("DeleteSite"))?.into_inner().deleted)
    }

    async fn register_plugin(&self, plugin: Plugin) -> Result<bool, DataError> {
        let request = pb::RegisterPluginRequest {
            plugin: Some(plugin.into()),
        };
        let answer = self.wire().register_plugin(request).await;
        Ok(answer
            .map_err(refused("RegisterPlugin"))?
            .into_inner()
            .created)
    }

    async fn get_plugin(&self, name: &str) -> Result<Plugin, DataError> {
        let call = "GetPlugin";
        let answer = self.wire().get_plugin(get(name)).await;
        Plugin::try_from(answer.map_err(refused(call))?.into_inner()).map_err(invalid(call))
    }

    async fn list_plugins(&self, query: PluginQuery) -> Result<Listing<Plugin>, DataError> {
        let request = pb::ListPluginsRequest::from(query);
        let answer = self.wire().list_plugins(request).await;
        collect("ListPlugins", answer, Plugin::try_from).await
    }

    async fn delete_plugin(&self, name: &str) -> Result<bool, DataError> {
        let answer = self.wire().delete_plugin(delete(name)).await;
        Ok(answer
            .map_err(refused("DeletePlugin"))?
            .into_inner()
            .deleted)
    }

    async fn create_deployment(&self, request: DeploymentRequest) -> Result<Created, DataError> {
        let request = pb::CreateDeploymentRequest::from(request);
        let answer = self.wire().create_deployment(request).await;
        Ok(answer
            .map_err(refused("CreateDeployment"))?
            .into_inner()
            .into())
    }

    async fn get_deployment(&self, id: &str) -> Result<Deployment, DataError> {
        let call = "GetDeployment";
        let answer = self.wire().get_deployment(get(id)).await;
        Deployment::try_from(answer.map_err(refused(call))?.into_inner()).map_err(invalid(call))
    }

    async fn list_deployments(&self, query: DeploymentQuery) -> Result<DeploymentPage, DataError> {
        let request = pb::ListDeploymentsRequest::from(query);
        let answer = self.wire().list_deployments(request).await;
        Ok(answer
            .map_err(refused("ListDeployments"))?
            .into_inner()
            .into())
    }

    async fn update_deployment(
        &self,
        id: &str,
        package_yaml: String,
        token: Option<String>,
    ) -> Result<DeploymentInfo, DataError> {
        let call = "UpdateDeployment";
        let request = pb::UpdateDeploymentRequest {
            deployment_id: id.to_owned(),
            package_yaml,
            modification_token: token.unwrap_or_default(),
        };
        let answer = self.wire().update_deployment(request).await;
        let info = answer.map_err(refused(call))?.into_inner().info;
        required_info("UpdateDeploymentResponse.info", info).map_err(invalid(call))
    }

    async fn approve_deployment(&self, id: &str) -> Result<DeploymentInfo, DataError> {
        let call = "ApproveDeployment";
        let request = pb::ApproveDeploymentRequest {
            deployment_id: id.to_owned(),
        };
        let answer = self.wire().approve_deployment(request).await;
        let info = answer.map_err(refused(call))?.into_inner().info;
        required_info("ApproveDeploymentResponse.info", info).map_err(invalid(call))
    }

    async fn deployment_revisions(&self, id: &str) -> Result<Vec<DeploymentRevision>, DataError> {
        let answer = self.wire().list_deployment_revisions(get(id)).await;
        Ok(answer
            .map_err(refused("ListDeploymentRevisions"))?
            .into_inner()
            .revisions
            .into_iter()
            .map(DeploymentRevision::from)
            .collect())
    }

    async fn deployment_revision(
        &self,
        id: &str,
        number: i64,
    ) -> Result<DeploymentRevision, DataError> {
        let request = pb::GetDeploymentRevisionRequest {
            deployment_id: id.to_owned(),
            number,
        };
        let answer = self.wire().get_deployment_revision(request).await;
        Ok(answer
            .map_err(refused("GetDeploymentRevision"))?
            .into_inner()
            .into())
    }

    async fn rollback_deployment(
        &self,
        id: &str,
        number: i64,
    ) -> Result<DeploymentInfo, DataError> {
        let call = "RollbackDeployment";
        let request = pb::RollbackDeploymentRequest {
            deployment_id: id.to_owned(),
            number,
        };
        let answer = self.wire().rollback_deployment(request).await;
        let info = answer.map_err(refused(call))?.into_inner().info;
        required_info("RollbackDeploymentResponse.info", info).map_err(invalid(call))
    }

    async fn delete_deployment(&self, id: &str) -> Result<bool, DataError> {
        let answer = self.wire().delete_deployment(delete(id)).await;
        Ok(answer
            .map_err(refused("DeleteDeployment"))?
            .into_inner()
            .deleted)
    }

    async fn apply_deployments(
        &self,
        writes: Vec<DeploymentWrite>,
        fence: Option<LeaseFence>,
    ) -> Result<Vec<WriteResult>, DataError> {
        let call = "ApplyDeployments";
        let request = pb::ApplyDeploymentsRequest {
            writes: writes.into_iter().map(pb::DeploymentWrite::from).collect(),
            fence: fence.map(pb::LeaseFence::from),
        };
        let answer = self.wire().apply_deployments(request).await;
        answer
            .map_err(refused(call))?
            .into_inner()
            .results
            .into_iter()
            .map(|result| WriteResult::try_from(result).map_err(invalid(call)))
            .collect()
    }

    async fn start_modification(
        &self,
        id: &str,
        lease: Option<Duration>,
    ) -> Result<Modification, DataError> {
        let request = pb::StartModificationRequest {
            deployment_id: id.to_owned(),
            lease_ms: lease_ms(lease),
        };
        let answer = self.wire().start_modification(request).await;
        Ok(answer
            .map_err(refused("StartModification"))?
            .into_inner()
            .into())
    }

    async fn renew_modification(
        &self,
        id: &str,
        token: &str,
        lease: Option<Duration>,
    ) -> Result<Modification, DataError> {
        let request = pb::RenewModificationRequest {
            deployment_id: id.to_owned(),
            token: token.to_owned(),
            lease_ms: lease_ms(lease),
        };
        let answer = self.wire().renew_modification(request).await;
        Ok(answer
            .map_err(refused("RenewModification"))?
            .into_inner()
            .into())
    }

    async fn end_modification(
        &self,
        id: &str,
        token: &str,
        package_yaml: Option<String>,
    ) -> Result<DeploymentInfo, DataError> {
        let call = "EndModification";
        let request = pb::EndModificationRequest {
            deployment_id: id.to_owned(),
            token: token.to_owned(),
            package_yaml: package_yaml.unwrap_or_default(),
        };
        let answer = self.wire().end_modification(request).await;
        let info = answer.map_err(refused(call))?.into_inner().info;
        required_info("EndModificationResponse.info", info).map_err(invalid(call))
    }

    async fn cancel_modification(&self, id: &str, token: &str) -> Result<(), DataError> {
        let request = pb::CancelModificationRequest {
            deployment_id: id.to_owned(),
            token: token.to_owned(),
        };
        let answer = self.wire().cancel_modification(request).await;
        answer.map_err(refused("CancelModification"))?;
        Ok(())
    }

    async fn acquire_lease(
        &self,
        name: &str,
        holder: &str,
        duration: Option<Duration>,
    ) -> Result<Lease, DataError> {
        let request = pb::AcquireLeaseRequest {
            name: name.to_owned(),
            holder: holder.to_owned(),
            duration_ms: lease_ms(duration),
        };
        let answer = self.wire().acquire_lease(request).await;
        Ok(answer.map_err(refused("AcquireLease"))?.into_inner().into())
    }

    async fn renew_lease(
        &self,
        name: &str,
        token: &str,
        duration: Option<Duration>,
    ) -> Result<Lease, DataError> {
        let request = pb::RenewLeaseRequest {
            name: name.to_owned(),
            token: token.to_owned(),
            duration_ms: lease_ms(duration),
        };
        let answer = self.wire().renew_lease(request).await;
        Ok(answer.map_err(refused("RenewLease"))?.into_inner().into())
    }

    async fn release_lease(&self, name: &str, token: &str) -> Result<(), DataError> {
        let request = pb::ReleaseLeaseRequest {
            name: name.to_owned(),
            token: token.to_owned(),
        };
        let answer = self.wire().release_lease(request).await;
        answer.map_err(refused("ReleaseLease"))?;
        Ok(())
    }

    async fn get_lease(&self, name: &str) -> Result<Lease, DataError> {
        let answer = self.wire().get_lease(get(name)).await;
        Ok(answer.map_err(refused("GetLease"))?.into_inner().into())
    }

    async fn watch(
        &self,
        from_revision: u64,
        kinds: &[EntityKind],
    ) -> Result<ChangeStream, DataError> {
        let call = "Watch";
        let request = pb::WatchRequest {
            from_revision,
            kinds: kinds
                .iter()
                .map(|kind| pb::EntityKind::from(*kind) as i32)
                .collect(),
        };
        let stream = self.wire().watch(request).await.map_err(refused(call))?;
        Ok(Box::pin(stream.into_inner().map(move |item| {
            let change = item.map_err(refused(call))?;
            Change::try_from(change).map_err(invalid(call))
        })))
    }
}
