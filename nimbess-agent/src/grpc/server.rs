//! The gRPC services over one [`Agent`]: `nimbess.cni.v1.Cni` (what the
//! plugin calls) and `nimbess.cni.v1.Agent` (what `ports`, `pipelines`,
//! `networks`, `verify` and `explain` call). Each call converts the request, asks the
//! agent and converts the answer; nothing else happens here.

use std::sync::Arc;

use nephrite_proto::nimbess::cni::v1::{
    self as pb, agent_server::Agent as AgentApi, agent_server::AgentServer, cni_server::Cni,
    cni_server::CniServer,
};
use nephrite_runtime::GrpcServer;
use nimbess_client::wire::reply;
use serde::Serialize;
use tonic::{Request, Response, Status};

use crate::agent::Agent;
use crate::cni::{CniError, CniRequest, CniResult, Command, ErrorCode, SUPPORTED_VERSIONS};

/// Both services over one agent.
#[derive(Debug, Clone)]
pub struct AgentService {
    agent: Arc<Agent>,
}

impl AgentService {
    /// Serve `agent`.
    pub fn new(agent: Arc<Agent>) -> Self {
        AgentService { agent }
    }

    async fn command(
        &self,
        command: Command,
        request: Request<pb::CniRequest>,
    ) -> Result<Response<pb::CniReply>, Status> {
        let req = match CniRequest::try_from(request.into_inner()) {
            Ok(req) => req,
            Err(e) => {
                let e =
                    CniError::new(ErrorCode::Decode, "the request does not parse").with_details(e);
                return Ok(Response::new(reply(&Err(e))));
            }
        };
        let outcome: Result<Option<CniResult>, CniError> = match command {
            Command::Add => self.agent.add(&req).await.map(Some),
            Command::Del => self.agent.del(&req).await.map(|()| None),
            Command::Check => self.agent.check(&req).await.map(|()| None),
            Command::Status => self.agent.status(&req).await.map(|()| None),
            Command::Gc => self.agent.gc(&req).await.map(|()| None),
            Command::Version => Ok(None),
        };
        match &outcome {
            Ok(_) => {
                tracing::info!(%command, container = %req.container_id, ifname = %req.ifname, network = %req.network, "done")
            }
            Err(e) => {
                tracing::warn!(%command, container = %req.container_id, ifname = %req.ifname, code = %e.code, msg = %e.msg, details = %e.details, "failed")
            }
        }
        Ok(Response::new(reply(&outcome)))
    }
}

/// Add the services over `agent` to `server`: `Cni`, `Agent` and `Vifs`.
pub fn add_services(server: GrpcServer, agent: Arc<Agent>) -> GrpcServer {
    let vifs = super::VifService::new(Arc::clone(&agent));
    let service = AgentService::new(agent);
    server
        .add_service(CniServer::new(service.clone()))
        .add_service(AgentServer::new(service))
        .add_service(vifs.server())
}

#[tonic::async_trait]
impl Cni for AgentService {
    async fn add(
        &self,
        request: Request<pb::CniRequest>,
    ) -> Result<Response<pb::CniReply>, Status> {
        self.command(Command::Add, request).await
    }

    async fn del(
        &self,
        request: Request<pb::CniRequest>,
    ) -> Result<Response<pb::CniReply>, Status> {
        self.command(Command::Del, request).await
    }

    async fn check(
        &self,
        request: Request<pb::CniRequest>,
    ) -> Result<Response<pb::CniReply>, Status> {
        self.command(Command::Check, request).await
    }

    async fn status(
        &self,
        request: Request<pb::CniRequest>,
    ) -> Result<Response<pb::CniReply>, Status> {
        self.command(Command::Status, request).await
    }

    async fn gc(&self, request: Request<pb::CniRequest>) -> Result<Response<pb::CniReply>, Status> {
        self.command(Command::Gc, request).await
    }

    async fn version(
        &self,
        _: Request<pb::VersionRequest>,
    ) -> Result<Response<pb::VersionReply>, Status> {
        Ok(Response::new(pb::VersionReply {
            supported_versions: SUPPORTED_VERSIONS.iter().map(|s| s.to_string()).collect(),
        }))
    }
}

fn to_json<T: Serialize>(value: &T) -> Result<String, Status> {
    serde_json::to_string_pretty(value).map_err(|e| Status::internal(format!("encode: {e}")))
}

#[tonic::async_trait]
impl AgentApi for AgentService {
    async fn list_ports(
        &self,
        _: Request<pb::ListPortsRequest>,
    ) -> Result<Response<pb::JsonReply>, Status> {
        let json = to_json(&self.agent.ports().await)?;
        Ok(Response::new(pb::JsonReply { json }))
    }

    async fn list_networks(
        &self,
        _: Request<pb::ListNetworksRequest>,
    ) -> Result<Response<pb::JsonReply>, Status> {
        let json = to_json(&self.agent.networks().await)?;
        Ok(Response::new(pb::JsonReply { json }))
    }

    async fn get_pipelines(
        &self,
        request: Request<pb::GetPipelinesRequest>,
    ) -> Result<Response<pb::PipelinesReply>, Status> {
        let want = request.into_inner().port;
        let pipelines = self
            .agent
            .pipelines((!want.is_empty()).then_some(want.as_str()))
            .await
            .map_err(|e| Status::not_found(e.to_string()))?;
        Ok(Response::new(pb::PipelinesReply {
            json: to_json(&pipelines.ports)?,
            text: pipelines.text,
            dot: pipelines.dot,
        }))
    }

    async fn verify(
        &self,
        _: Request<pb::VerifyRequest>,
    ) -> Result<Response<pb::VerifyReply>, Status> {
        let drift = self
            .agent
            .verify()
            .await
            .map_err(|e| Status::unavailable(format!("cannot read the data plane: {e}")))?;
        Ok(Response::new(pb::VerifyReply { drift }))
    }

    async fn get_cluster(
        &self,
        _: Request<pb::GetClusterRequest>,
    ) -> Result<Response<pb::JsonReply>, Status> {
        let json = to_json(&self.agent.cluster().await)?;
        Ok(Response::new(pb::JsonReply { json }))
    }
}
