//! `nimbess.cni.v1.Vifs` served: the agent's VIF calls over the wire. Its client, and the
//! conversions both ends share, are the client crate's (`nimbess_client::VifClient`,
//! `nimbess_client::wire`); what is here is the server's own: a request to a claim, an
//! [`crate::vif::VifFailure`] to a status code.

use std::sync::Arc;

use nephrite_proto::nimbess::cni::v1::{self as pb, vifs_server::Vifs, vifs_server::VifsServer};
use tonic::{Request, Response, Status};

use crate::agent::Agent;
use crate::vif::{VifClaim, VifFailure, VifRef, VifView};

/// The `Vifs` service over one agent.
#[derive(Debug, Clone)]
pub struct VifService {
    agent: Arc<Agent>,
}

impl VifService {
    /// Serve `agent`'s VIFs.
    pub fn new(agent: Arc<Agent>) -> Self {
        VifService { agent }
    }

    /// The tonic server.
    pub fn server(self) -> VifsServer<Self> {
        VifsServer::new(self)
    }
}

fn status(failure: &VifFailure) -> Status {
    let text = failure.to_string();
    match failure {
        VifFailure::UnknownNetwork(_) | VifFailure::NotFound(_) => Status::not_found(text),
        VifFailure::Invalid(_) => Status::invalid_argument(text),
        VifFailure::Unavailable(_) => Status::unavailable(text),
    }
}

fn domain_ref(vif: Option<pb::VifRef>) -> Result<VifRef, Status> {
    vif.map(VifRef::from)
        .ok_or_else(|| Status::invalid_argument("vif is not set"))
}

fn reply(view: &VifView) -> Response<pb::VifReply> {
    Response::new(pb::VifReply {
        vif: Some(view.into()),
    })
}

#[tonic::async_trait]
impl Vifs for VifService {
    async fn allocate_vif(
        &self,
        request: Request<pb::AllocateVifRequest>,
    ) -> Result<Response<pb::VifReply>, Status> {
        let req = request.into_inner();
        let claim = VifClaim {
            vif: domain_ref(req.vif)?,
            network: req.network,
            pod_namespace: req.pod_namespace,
            pod_name: req.pod_name,
        };
        match self.agent.allocate_vif(&claim).await {
            Ok(view) => Ok(reply(&view)),
            Err(e) => {
                tracing::warn!(vif = %claim.vif, network = %claim.network, error = %e, "VIF not allocated");
                Err(status(&e))
            }
        }
    }

    async fn release_vif(
        &self,
        request: Request<pb::ReleaseVifRequest>,
    ) -> Result<Response<pb::ReleaseVifReply>, Status> {
        let vif = domain_ref(request.into_inner().vif)?;
        let released = self.agent.release_vif(&vif).await.map_err(|e| status(&e))?;
        Ok(Response::new(pb::ReleaseVifReply { released }))
    }

    async fn list_vifs(
        &self,
        request: Request<pb::ListVifsRequest>,
    ) -> Result<Response<pb::ListVifsReply>, Status> {
        let uid = request.into_inner().pod_uid;
        let views = self
            .agent
            .vifs((!uid.is_empty()).then_some(uid.as_str()))
            .await;
        Ok(Response::new(pb::ListVifsReply {
            vifs: views.iter().map(pb::VifInfo::from).collect(),
        }))
    }

    async fn get_vif(
        &self,
        request: Request<pb::VifRef>,
    ) -> Result<Response<pb::VifReply>, Status> {
        let vif = domain_ref(Some(request.into_inner()))?;
        match self.agent.vif(&vif).await {
            Ok(view) => Ok(reply(&view)),
            Err(e) => Err(status(&e)),
        }
    }
}
