//! The clients of the agent's socket: [`AgentConnection`] carries the
//! plugin's CNI commands, [`InspectClient`] the inspection subcommands'
//! calls. Both answer in domain values and typed errors.

use std::path::Path;
use std::time::{Duration, Instant};

use nephrite_proto::nimbess::cni::v1::{
    self as pb, agent_client::AgentClient, cni_client::CniClient,
};
use nephrite_runtime::{DialError, DialOptions, Endpoint, dial, dial_with};
use tonic::transport::Channel;

use super::convert::outcome;
use crate::cni::{CniError, CniRequest, CniResult, Command, ErrorCode};

/// The plugin's connection to the agent.
#[derive(Debug, Clone)]
pub struct AgentConnection {
    client: CniClient<Channel>,
}

impl AgentConnection {
    /// Dial the agent's socket, retrying for up to `wait` (an agent that is
    /// starting); after that the runtime is told to try again later.
    ///
    /// # Errors
    /// Code 11 naming the socket.
    pub async fn connect(socket: &str, wait: Duration) -> Result<Self, CniError> {
        let endpoint = Endpoint::unix(socket);
        let options = DialOptions {
            connect_timeout: Duration::from_secs(2),
            request_timeout: Some(Duration::from_secs(120)),
            ..DialOptions::default()
        };
        let started = Instant::now();
        loop {
            match dial_with(&endpoint, &options).await {
                Ok(channel) => {
                    return Ok(AgentConnection {
                        client: CniClient::new(channel),
                    });
                }
                Err(e) if started.elapsed() >= wait => {
                    return Err(CniError::new(
                        ErrorCode::TryAgainLater,
                        format!("the nimbess agent is unreachable at {socket}"),
                    )
                    .with_details(e));
                }
                Err(_) => tokio::time::sleep(Duration::from_millis(100)).await,
            }
        }
    }

    /// Carry `command` to the agent: the result of an ADD, nothing for the
    /// other commands, or the agent's error.
    ///
    /// # Errors
    /// The agent's error; 11 when it did not answer; 6 when its answer does
    /// not parse; 4 for VERSION, which the plugin answers itself.
    pub async fn call(
        &mut self,
        command: Command,
        request: &CniRequest,
    ) -> Result<Option<CniResult>, CniError> {
        let wire = pb::CniRequest::from(request);
        let reply = match command {
            Command::Add => self.client.add(wire).await,
            Command::Del => self.client.del(wire).await,
            Command::Check => self.client.check(wire).await,
            Command::Status => self.client.status(wire).await,
            Command::Gc => self.client.gc(wire).await,
            Command::Version => {
                return Err(CniError::new(
                    ErrorCode::InvalidEnvironment,
                    "VERSION is answered by the plugin, not the agent",
                ));
            }
        };
        let reply = reply.map_err(|status| {
            CniError::new(ErrorCode::TryAgainLater, "the nimbess agent did not answer")
                .with_details(status)
        })?;
        outcome(reply.into_inner()).map_err(|e| {
            CniError::new(
                ErrorCode::Decode,
                "the nimbess agent's answer does not parse",
            )
            .with_details(e)
        })?
    }
}

/// Why an inspection call failed.
#[derive(Debug, thiserror::Error)]
pub enum InspectError {
    /// The agent's socket did not answer.
    #[error("cannot reach the agent at {socket}: {source}")]
    Unreachable {
        /// The socket.
        socket: String,
        /// The dial error.
        source: DialError,
    },
    /// The agent refused the call.
    #[error("the agent refused: {0}")]
    Refused(#[from] tonic::Status),
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
    client: AgentClient<Channel>,
}

impl InspectClient {
    /// Dial the agent's socket.
    ///
    /// # Errors
    /// The socket does not answer.
    pub async fn connect(socket: &Path) -> Result<Self, InspectError> {
        let channel =
            dial(&Endpoint::unix(socket))
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
}
