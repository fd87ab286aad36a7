//! The client of the agent's `nimbess.cni.v1.Vifs` service, which kuryr-l7's VIF handler
//! dials: [`VifClient`] answers in [`crate::vif`]'s domain values and a typed
//! [`VifCallError`] that says whether trying again can help.

use std::path::{Path, PathBuf};
use std::time::Duration;

use nephrite_proto::nimbess::cni::v1::{self as pb, vifs_client::VifsClient};
use nephrite_runtime::{AuthChannel, ClientArgs, ClientError, DialError, DialOptions, Endpoint};
use tonic::{Code, Status};

use crate::vif::{VifClaim, VifRef, VifView};
use crate::wire::WireError;

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
    socket: PathBuf,
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
                vif: Some((&claim.vif).into()),
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
                vif: Some(vif.into()),
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
        match self.client().await?.get_vif(pb::VifRef::from(vif)).await {
            Ok(reply) => Ok(Some(VifView::try_from(
                reply.into_inner().vif.unwrap_or_default(),
            )?)),
            Err(status) if status.code() == Code::NotFound => Ok(None),
            Err(status) => Err(status.into()),
        }
    }
}
