//! The inspection client of the agent's socket (`nimbess.cni.v1.Agent`): what
//! `nimbess-agent ports`, `networks`, `pipelines`, `verify` and `explain` call. It presents the caller's
//! credentials ([`ClientArgs`]) and answers in plain values (the agent's JSON documents, the
//! renderings, the drift lines) or an [`InspectError`] that says what to do about a refusal.

use std::path::Path;

use nephrite_proto::nimbess::cni::v1::{self as pb, agent_client::AgentClient};
use nephrite_runtime::{AuthChannel, ClientArgs, ClientError, Endpoint};

/// Why an inspection call failed.
#[derive(Debug, thiserror::Error)]
pub enum InspectError {
    /// The agent's socket did not answer, or the credentials' files cannot be used.
    #[error("cannot reach the agent at {socket}: {source}")]
    Unreachable {
        /// The socket.
        socket: String,
        /// The dial (or credentials) error.
        source: ClientError,
    },
    /// The agent refused the call.
    #[error("the agent refused: {}{}", .0.message(), credentials_hint(.0))]
    Refused(#[from] tonic::Status),
}

/// What to do about a refusal of the caller's credentials.
fn credentials_hint(status: &tonic::Status) -> &'static str {
    match status.code() {
        tonic::Code::Unauthenticated | tonic::Code::PermissionDenied => {
            " (give --token-file, or --ca, --cert and --key, naming credentials the agent \
             gives the read role)"
        }
        _ => "",
    }
}

/// Port pipelines in three renderings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pipelines {
    /// JSON: per port, the module instances with gates, kernel objects and counters.
    pub json: String,
    /// Human-readable text.
    pub text: String,
    /// Graphviz DOT.
    pub dot: String,
}

/// The inspection subcommands' client.
#[derive(Debug, Clone)]
pub struct InspectClient {
    client: AgentClient<AuthChannel>,
}

impl InspectClient {
    /// Dial the agent's socket with `credentials`.
    ///
    /// # Errors
    /// The socket does not answer, or the credentials' files cannot be used.
    pub async fn connect(socket: &Path, credentials: &ClientArgs) -> Result<Self, InspectError> {
        let channel = credentials
            .dial(&Endpoint::unix(socket))
            .await
            .map_err(|source| InspectError::Unreachable {
                socket: socket.display().to_string(),
                source,
            })?;
        Ok(InspectClient {
            client: AgentClient::new(channel),
        })
    }

    /// Every port, as JSON.
    ///
    /// # Errors
    /// The agent refused.
    pub async fn ports(&mut self) -> Result<String, InspectError> {
        Ok(self
            .client
            .list_ports(pb::ListPortsRequest {})
            .await?
            .into_inner()
            .json)
    }

    /// Every network, as JSON.
    ///
    /// # Errors
    /// The agent refused.
    pub async fn networks(&mut self) -> Result<String, InspectError> {
        Ok(self
            .client
            .list_networks(pb::ListNetworksRequest {})
            .await?
            .into_inner()
            .json)
    }

    /// The pipelines of every port, or of one.
    ///
    /// # Errors
    /// The agent refused (an unknown port).
    pub async fn pipelines(&mut self, port: Option<String>) -> Result<Pipelines, InspectError> {
        let reply = self
            .client
            .get_pipelines(pb::GetPipelinesRequest {
                port: port.unwrap_or_default(),
            })
            .await?
            .into_inner();
        Ok(Pipelines {
            json: reply.json,
            text: reply.text,
            dot: reply.dot,
        })
    }

    /// Differences between the model and the data plane, one line each.
    ///
    /// # Errors
    /// The agent refused or cannot read its data plane.
    pub async fn verify(&mut self) -> Result<Vec<String>, InspectError> {
        Ok(self
            .client
            .verify(pb::VerifyRequest {})
            .await?
            .into_inner()
            .drift)
    }

    /// What `explain` reads of the agent (its networks, the pods at its
    /// ports, the Services' load balancers, the policy tiers it rendered),
    /// as JSON.
    ///
    /// # Errors
    /// The agent refused.
    pub async fn cluster(&mut self) -> Result<String, InspectError> {
        Ok(self
            .client
            .get_cluster(pb::GetClusterRequest {})
            .await?
            .into_inner()
            .json)
    }
}
