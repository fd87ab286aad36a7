//! The Data API's gRPC edge: `nephrite.preparer.data.v1.Data` served by [`DataService`]. Each
//! call converts its request to domain values (the client crate's [`wire`] impls), makes the
//! service's call and converts the answer back; the service's errors become statuses
//! (`ApiError`'s mapping), a request that does not convert is INVALID_ARGUMENT.
//!
//! [`wire`]: nephrite_preparer_client::wire

use std::pin::Pin;
use std::time::Duration;

use futures::{Stream, StreamExt as _};
use nephrite_preparer_client::wire::entity_kind;
use nephrite_preparer_client::{
    CatalogQuery, DeploymentQuery, DeploymentRequest, DeploymentWrite, LeaseFence, Listing, Plugin,
    PluginQuery, REVISION_HEADER, Site, Template, WireError,
};
use nephrite_proto::nephrite::preparer::data::v1 as pb;
use nephrite_proto::nephrite::preparer::data::v1::data_server::{Data, DataServer};
use nephrite_runtime::CallerIdentity;
use tonic::metadata::MetadataValue;
use tonic::{Request, Response, Status};

use super::DataService;
use super::deployments::Writer;
use super::leases;

type Result<T> = std::result::Result<Response<T>, Status>;
type Stream_<T> = Pin<Box<dyn Stream<Item = std::result::Result<T, Status>> + Send>>;

/// The gRPC service of `service`, to add to the daemon's server.
pub fn server(service: DataService) -> DataServer<DataService> {
    DataServer::new(service)
}

fn respond<T, U: From<T>>(answer: std::result::Result<T, crate::errors::ApiError>) -> Result<U> {
    Ok(Response::new(U::from(answer?)))
}

/// A listing as a stream of its items, its revision in the `nephrite-revision` header.
fn stream<T: Send + 'static, U: From<T> + Send + 'static>(
    answer: std::result::Result<Listing<T>, crate::errors::ApiError>,
) -> Result<Stream_<U>> {
    let listing = answer?;
    let items = listing.items.into_iter().map(|item| Ok(U::from(item)));
    let mut response = Response::new(Box::pin(tokio_stream::iter(items)) as Stream_<U>);
    response
        .metadata_mut()
        .insert(REVISION_HEADER, MetadataValue::from(listing.revision));
    Ok(response)
}

fn invalid(error: WireError) -> Status {
    Status::invalid_argument(error.to_string())
}

fn lease(ms: u64) -> Option<Duration> {
    (ms != 0).then(|| Duration::from_millis(ms))
}

fn info(info: nephrite_preparer_client::DeploymentInfo) -> Option<pb::DeploymentInfo> {
    Some(info.into())
}

#[tonic::async_trait]
impl Data for DataService {
    async fn register_template(
        &self,
        request: Request<pb::RegisterTemplateRequest>,
    ) -> Result<pb::RegisterResponse> {
        let template = Template::from(request.into_inner());
        let created = self.register_template(template).await?;
        Ok(Response::new(pb::RegisterResponse { created }))
    }

    async fn get_template(&self, request: Request<pb::GetRequest>) -> Result<pb::Template> {
        respond(self.get_template(&request.into_inner().id).await)
    }

    type ListTemplatesStream = Stream_<pb::TemplateInfo>;
    async fn list_templates(
        &self,
        request: Request<pb::ListTemplatesRequest>,
    ) -> Result<Self::ListTemplatesStream> {
        stream(
            self.list_templates(CatalogQuery::from(request.into_inner()))
                .await,
        )
    }

    async fn delete_template(
        &self,
        request: Request<pb::DeleteRequest>,
    ) -> Result<pb::DeleteResponse> {
        let deleted = self.delete_template(&request.into_inner().id).await?;
        Ok(Response::new(pb::DeleteResponse { deleted }))
    }

    async fn register_site(
        &self,
        request: Request<pb::RegisterSiteRequest>,
    ) -> Result<pb::RegisterResponse> {
        let created = self.register_site(Site::from(request.into_inner())).await?;
        Ok(Response::new(pb::RegisterResponse { created }))
    }

    async fn get_site(&self, request: Request<pb::GetRequest>) -> Result<pb::Site> {
        respond(self.get_site(&request.into_inner().id).await)
    }

    type ListSitesStream = Stream_<pb::SiteInfo>;
    async fn list_sites(
        &self,
        request: Request<pb::ListSitesRequest>,
    ) -> Result<Self::ListSitesStream> {
        stream(
            self.list_sites(CatalogQuery::from(request.into_inner()))
                .await,
        )
    }

    async fn delete_site(&self, request: Request<pb::DeleteRequest>) -> Result<pb::DeleteResponse> {
        let deleted = self.delete_site(&request.into_inner().id).await?;
        Ok(Response::new(pb::DeleteResponse { deleted }))
    }

    async fn register_plugin(
        &self,
        request: Request<pb::RegisterPluginRequest>,
    ) -> Result<pb::RegisterResponse> {
        let plugin = request
            .into_inner()
            .plugin
            .ok_or_else(|| Status::invalid_argument("RegisterPlugin: plugin is required"))?;
        let created = self
            .register_plugin(Plugin::try_from(plugin).map_err(invalid)?)
            .await?;
        Ok(Response::new(pb::RegisterResponse { created }))
    }

    async fn get_plugin(&self, request: Request<pb::GetRequest>) -> Result<pb::Plugin> {
        respond(self.get_plugin(&request.into_inner().id).await)
    }

    type ListPluginsStream = Stream_<pb::Plugin>;
    async fn list_plugins(
        &self,
        request: Request<pb::ListPluginsRequest>,
    ) -> Result<Self::ListPluginsStream> {
        let query = PluginQuery::try_from(request.into_inner()).map_err(invalid)?;
        stream(self.list_plugins(query).await)
    }

    async fn delete_plugin(
        &self,
        request: Request<pb::DeleteRequest>,
    ) -> Result<pb::DeleteResponse> {
        let deleted = self.delete_plugin(&request.into_inner().id).await?;
        Ok(Response::new(pb::DeleteResponse { deleted }))
    }

    async fn create_deployment(
        &self,
        request: Request<pb::CreateDeploymentRequest>,
    ) -> Result<pb::CreateDeploymentResponse> {
        respond({
            let author = author_of(&request);
            self.create_deployment(DeploymentRequest::from(request.into_inner()), &author)
                .await
        })
    }

    async fn get_deployment(&self, request: Request<pb::GetRequest>) -> Result<pb::Deployment> {
        respond(self.get_deployment(&request.into_inner().id).await)
    }

    async fn list_deployments(
        &self,
        request: Request<pb::ListDeploymentsRequest>,
    ) -> Result<pb::ListDeploymentsResponse> {
        respond(
            self.list_deployments(DeploymentQuery::from(request.into_inner()))
                .await,
        )
    }

    async fn update_deployment(
        &self,
        request: Request<pb::UpdateDeploymentRequest>,
    ) -> Result<pb::UpdateDeploymentResponse> {
        let writer = if crate::auth::may_write_without_token(CallerIdentity::of(&request)) {
            Writer::Tokenless
        } else {
            Writer::TokenOnly
        };
        let author = author_of(&request);
        let r = request.into_inner();
        let token = (!r.modification_token.is_empty()).then_some(r.modification_token);
        let updated = self
            .update_deployment(&r.deployment_id, r.package_yaml, token, writer, &author)
            .await?;
        Ok(Response::new(pb::UpdateDeploymentResponse {
            info: info(updated),
        }))
    }

    async fn approve_deployment(
        &self,
        request: Request<pb::ApproveDeploymentRequest>,
    ) -> Result<pb::ApproveDeploymentResponse> {
        let author = author_of(&request);
        let approved = self
            .approve_deployment(&request.into_inner().deployment_id, &author)
            .await?;
        Ok(Response::new(pb::ApproveDeploymentResponse {
            info: info(approved),
        }))
    }

    async fn delete_deployment(
        &self,
        request: Request<pb::DeleteRequest>,
    ) -> Result<pb::DeleteResponse> {
        let deleted = self.delete_deployment(&request.into_inner().id).await?;
        Ok(Response::new(pb::DeleteResponse { deleted }))
    }

    async fn apply_deployments(
        &self,
        request: Request<pb::ApplyDeploymentsRequest>,
    ) -> Result<pb::ApplyDeploymentsResponse> {
        let writer = if crate::auth::may_write_without_token(CallerIdentity::of(&request)) {
            Writer::Tokenless
        } else {
            Writer::TokenOnly
        };
        let author = author_of(&request);
        let r = request.into_inner();
        let writes = r
            .writes
            .into_iter()
            .enumerate()
            .map(|(index, write)| {
                DeploymentWrite::try_from(write).map_err(|error| {
                    Status::invalid_argument(format!("write {index} of the batch: {error}"))
                })
            })
            .collect::<std::result::Result<Vec<_>, Status>>()?;
        let fence = r.fence.map(LeaseFence::from);
        let results = self
            .apply_deployments(writes, fence, writer, &author)
            .await?;
        Ok(Response::new(pb::ApplyDeploymentsResponse {
            results: results
                .into_iter()
                .map(pb::DeploymentWriteResult::from)
                .collect(),
        }))
    }

    async fn list_deployment_revisions(
        &self,
        request: Request<pb::GetRequest>,
    ) -> Result<pb::ListDeploymentRevisionsResponse> {
        let revisions = self.deployment_revisions(&request.into_inner().id).await?;
        Ok(Response::new(pb::ListDeploymentRevisionsResponse {
            revisions: revisions
                .into_iter()
                .map(pb::DeploymentRevision::from)
                .collect(),
        }))
    }

    async fn get_deployment_revision(
        &self,
        request: Request<pb::GetDeploymentRevisionRequest>,
    ) -> Result<pb::DeploymentRevision> {
        let r = request.into_inner();
        let revision = self.deployment_revision(&r.deployment_id, r.number).await?;
        Ok(Response::new(revision.into()))
    }

    async fn rollback_deployment(
        &self,
        request: Request<pb::RollbackDeploymentRequest>,
    ) -> Result<pb::RollbackDeploymentResponse> {
        let author = author_of(&request);
        let r = request.into_inner();
        let rolled = self
            .rollback_deployment(&r.deployment_id, r.number, &author)
            .await?;
        Ok(Response::new(pb::RollbackDeploymentResponse {
            info: info(rolled),
        }))
    }

    async fn start_modification(
        &self,
        request: Request<pb::StartModificationRequest>,
    ) -> Result<pb::Modification> {
        let r = request.into_inner();
        respond(
            self.start_modification(&r.deployment_id, lease(r.lease_ms))
                .await,
        )
    }

    async fn renew_modification(
        &self,
        request: Request<pb::RenewModificationRequest>,
    ) -> Result<pb::Modification> {
        let r = request.into_inner();
        respond(
            self.renew_modification(&r.deployment_id, &r.token, lease(r.lease_ms))
                .await,
        )
    }

    async fn end_modification(
        &self,
        request: Request<pb::EndModificationRequest>,
    ) -> Result<pb::EndModificationResponse> {
        let author = author_of(&request);
        let r = request.into_inner();
        let package = (!r.package_yaml.is_empty()).then_some(r.package_yaml);
        let ended = self
            .end_modification(&r.deployment_id, &r.token, package, &author)
            .await?;
        Ok(Response::new(pb::EndModificationResponse {
            info: info(ended),
        }))
    }

    async fn cancel_modification(
        &self,
        request: Request<pb::CancelModificationRequest>,
    ) -> Result<pb::CancelModificationResponse> {
        let r = request.into_inner();
        self.cancel_modification(&r.deployment_id, &r.token).await?;
        Ok(Response::new(pb::CancelModificationResponse {}))
    }

    async fn acquire_lease(&self, request: Request<pb::AcquireLeaseRequest>) -> Result<pb::Lease> {
        let r = request.into_inner();
        let acquired = self
            .acquire_lease(&r.name, &r.holder, lease(r.duration_ms))
            .await
            .map_err(leases::status)?;
        Ok(Response::new(acquired.into()))
    }

    async fn renew_lease(&self, request: Request<pb::RenewLeaseRequest>) -> Result<pb::Lease> {
        let r = request.into_inner();
        let renewed = self
            .renew_lease(&r.name, &r.token, lease(r.duration_ms))
            .await
            .map_err(leases::status)?;
        Ok(Response::new(renewed.into()))
    }

    async fn release_lease(
        &self,
        request: Request<pb::ReleaseLeaseRequest>,
    ) -> Result<pb::ReleaseLeaseResponse> {
        let r = request.into_inner();
        self.release_lease(&r.name, &r.token)
            .await
            .map_err(leases::status)?;
        Ok(Response::new(pb::ReleaseLeaseResponse {}))
    }

    async fn get_lease(&self, request: Request<pb::GetRequest>) -> Result<pb::Lease> {
        let got = self
            .get_lease(&request.into_inner().id)
            .await
            .map_err(leases::status)?;
        Ok(Response::new(got.into()))
    }

    type WatchStream = Stream_<pb::Change>;
    async fn watch(&self, request: Request<pb::WatchRequest>) -> Result<Self::WatchStream> {
        let r = request.into_inner();
        let kinds = r
            .kinds
            .iter()
            .map(|kind| entity_kind("WatchRequest.kinds", *kind))
            .collect::<std::result::Result<Vec<_>, _>>()
            .map_err(invalid)?;
        let changes = self.watch(r.from_revision, kinds).await?;
        Ok(Response::new(Box::pin(
            changes.map(|change| change.map(pb::Change::from)),
        )))
    }
}

/// Who a write is by, for the deployment's history: the caller's identity, `anonymous` when
/// the daemon authenticates nobody.
fn author_of<T>(request: &Request<T>) -> String {
    CallerIdentity::of(request).map_or_else(|| "anonymous".to_owned(), |caller| caller.name.clone())
}
