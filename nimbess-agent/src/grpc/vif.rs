//! `nimbess.cni.v1.Vifs` on the wire: the service over the agent's VIF calls, the client
//! kuryr-l7's VIF handler dials ([`VifClient`]), and their conversions. Callers of the client
//! see [`crate::vif`]'s domain values and a typed [`VifCallError`].

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use nephrite_proto::nimbess::cni::v1::{
    self as pb, vifs_client::VifsClient, vifs_server::Vifs, vifs_server::VifsServer,
};
use nephrite_runtime::{AuthChannel, ClientArgs, ClientError, DialError, DialOptions, Endpoint};
use tonic::{Code, Request, Response, Status};

use super::convert::{WireError, parse, parse_optional};
use crate::agent::Agent;
use crate::vif::{Plugged, VifClaim, VifEntry, VifFailure, VifRef, VifView};

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
    let vif = vif.ok_or_else(|| Status::invalid_argument("vif is not set"))?;
    Ok(VifRef {
        pod_uid: vif.pod_uid,
        key: vif.key,
    })
}

fn wire_ref(vif: &VifRef) -> pb::VifRef {
    pb::VifRef {
        pod_uid: vif.pod_uid.clone(),
        key: vif.key.clone(),
    }
}

impl From<&VifView> for pb::VifInfo {
    fn from(view: &VifView) -> Self {
        let plugged = view.plugged.as_ref();
        pb::VifInfo {
            vif: Some(wire_ref(&view.entry.vif)),
            network: view.entry.network.clone(),
            address: view.entry.address.to_string(),
            gateway: view.gateway.map(|g| g.to_string()).unwrap_or_default(),
            pod_namespace: view.entry.pod_namespace.clone(),
            pod_name: view.entry.pod_name.clone(),
            port: plugged.map(|p| p.port.clone()).unwrap_or_default(),
            container_id: plugged.map(|p| p.container_id.clone()).unwrap_or_default(),
            ifname: plugged.map(|p| p.ifname.clone()).unwrap_or_default(),
            mac: plugged
                .and_then(|p| p.mac)
                .map(|m| m.to_string())
                .unwrap_or_default(),
            reserved_mac: view.entry.mac.map(|m| m.to_string()).unwrap_or_default(),
        }
    }
}

impl TryFrom<pb::VifInfo> for VifView {
    type Error = WireError;

    fn try_from(info: pb::VifInfo) -> Result<Self, WireError> {
        let vif = info.vif.unwrap_or_default();
        let plugged = if info.port.is_empty() {
            None
        } else {
            Some(Plugged {
                port: info.port,
                container_id: info.container_id,
                ifname: info.ifname,
                mac: parse_optional("mac", &info.mac)?,
            })
        };
        Ok(VifView {
            entry: VifEntry {
                vif: VifRef {
                    pod_uid: vif.pod_uid,
                    key: vif.key,
                },
                network: info.network,
                address: parse("address", &info.address)?,
                pod_namespace: info.pod_namespace,
                pod_name: info.pod_name,
                mac: parse_optional("reserved_mac", &info.reserved_mac)?,
            },
            gateway: parse_optional("gateway", &info.gateway)?,
            plugged,
        })
    }
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

/// Why a VIF call failed, as the client sees it.
#[derive(Debug, thiserror::Error)]
pub enum VifCallError {
    /// The socket did not answer.
    #[error("cannot reach the nimbess agent at {socket}: {source}")]
    Unreachable {
        /// The socket.
        socket: String,
        /// The dial error.
        source: DialError,
    },
    /// An unknown network, or a VIF that does not exist (the agent's message names it).
    #[error("{0}")]
    NotFound(String),
    /// The request was refused as wrong (the agent's message says why).
    #[error("{0}")]
    Invalid(String),
    /// The agent cannot now (no free address, its state, the call did not get through).
    #[error("the nimbess agent: {0}")]
    Unavailable(String),
    /// The agent refused the caller's credentials (none, wrong, or without the `vif` role).
    #[error(
        "the nimbess agent refused the call: {0} (give the caller credentials with the vif role: --token-file, or --ca/--cert/--key)"
    )]
    Refused(String),
    /// The caller's own credentials are unusable (an unreadable token file, a bad certificate).
    #[error("credentials for the nimbess agent: {0}")]
    Credentials(String),
    /// The answer does not parse.
    #[error("the nimbess agent's answer: {0}")]
    Wire(#[from] WireError),
}

impl VifCallError {
    /// Whether trying again later can help.
    pub fn is_retryable(&self) -> bool {
        matches!(
            self,
            VifCallError::Unreachable { .. }
                | VifCallError::Unavailable(_)
                // A rotated token file or a granted role helps without a restart.
                | VifCallError::Refused(_)
                | VifCallError::Credentials(_)
        )
    }
}

impl From<Status> for VifCallError {
    fn from(status: Status) -> Self {
        let message = status.message().to_string();
        match status.code() {
            Code::NotFound => VifCallError::NotFound(message),
            Code::InvalidArgument | Code::FailedPrecondition | Code::AlreadyExists => {
                VifCallError::Invalid(message)
            }
            Code::Unauthenticated | Code::PermissionDenied => VifCallError::Refused(message),
            code => VifCallError::Unavailable(format!("{code:?}: {message}")),
        }
    }
}

/// A client of the agent's `Vifs` service. Each call dials the socket (a Unix socket: cheap),
/// so a client outlives agent restarts, and re-reads a rotated token file.
#[derive(Debug, Clone)]
pub struct VifClient {
    socket: std::path::PathBuf,
    credentials: ClientArgs,
}

impl VifClient {
    /// A client of the agent at `socket`, presenting no credentials.
    pub fn new(socket: &Path) -> Self {
        Self::with_credentials(socket, ClientArgs::default())
    }

    /// A client of the agent at `socket` presenting `credentials` (a token file, or a client
    /// certificate for an agent serving TLS on its socket).
    pub fn with_credentials(socket: &Path, credentials: ClientArgs) -> Self {
        VifClient {
            socket: socket.to_path_buf(),
            credentials,
        }
    }

    async fn client(&self) -> Result<VifsClient<AuthChannel>, VifCallError> {
        let options = DialOptions {
            connect_timeout: Duration::from_secs(2),
            request_timeout: Some(Duration::from_secs(30)),
            ..DialOptions::default()
        };
        let channel = self
            .credentials
            .dial_with(&Endpoint::unix(&self.socket), &options)
            .await
            .map_err(|e| match e {
                ClientError::Dial(source) => VifCallError::Unreachable {
                    socket: self.socket.display().to_string(),
                    source,
                },
                other => VifCallError::Credentials(other.to_string()),
            })?;
        Ok(VifsClient::new(channel))
    }

    /// Reserve (or find) a VIF.
    ///
    /// # Errors
    /// See [`VifCallError`].
    pub async fn allocate(&self, claim: &VifClaim) -> Result<VifView, VifCallError> {
        let reply = self
            .client()
            .await?
            .allocate_vif(pb::AllocateVifRequest {
                vif: Some(wire_ref(&claim.vif)),
                network: claim.network.clone(),
                pod_namespace: claim.pod_namespace.clone(),
                pod_name: claim.pod_name.clone(),
            })
            .await?
            .into_inner();
        Ok(VifView::try_from(reply.vif.unwrap_or_default())?)
    }

    /// Release a VIF; `false` when it did not exist.
    ///
    /// # Errors
    /// See [`VifCallError`].
    pub async fn release(&self, vif: &VifRef) -> Result<bool, VifCallError> {
        Ok(self
            .client()
            .await?
            .release_vif(pb::ReleaseVifRequest {
                vif: Some(wire_ref(vif)),
            })
            .await?
            .into_inner()
            .released)
    }

    /// The VIFs of a pod, or every VIF.
    ///
    /// # Errors
    /// See [`VifCallError`].
    pub async fn list(&self, pod_uid: Option<&str>) -> Result<Vec<VifView>, VifCallError> {
        let reply = self
            .client()
            .await?
            .list_vifs(pb::ListVifsRequest {
                pod_uid: pod_uid.unwrap_or_default().to_string(),
            })
            .await?
            .into_inner();
        reply
            .vifs
            .into_iter()
            .map(|v| VifView::try_from(v).map_err(VifCallError::from))
            .collect()
    }

    /// One VIF, `None` when it does not exist.
    ///
    /// # Errors
    /// See [`VifCallError`].
    pub async fn get(&self, vif: &VifRef) -> Result<Option<VifView>, VifCallError> {
        match self.client().await?.get_vif(wire_ref(vif)).await {
            Ok(reply) => Ok(Some(VifView::try_from(
                reply.into_inner().vif.unwrap_or_default(),
            )?)),
            Err(status) if status.code() == Code::NotFound => Ok(None),
            Err(status) => Err(status.into()),
        }
    }
}
