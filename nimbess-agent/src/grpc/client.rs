//! The clients of the agent's socket: [`AgentConnection`] carries the
//! plugin's CNI commands, [`InspectClient`] the inspection subcommands'
//! calls. Both present the caller's credentials ([`ClientArgs`]: a bearer
//! token file, or a CA, certificate and key for mutual TLS on the socket)
//! and answer in domain values and typed errors.

use std::path::Path;
use std::time::{Duration, Instant};

use nephrite_proto::nimbess::cni::v1::{
    self as pb, agent_client::AgentClient, cni_client::CniClient,
};
use nephrite_runtime::{AuthChannel, ClientArgs, ClientError, DialOptions, Endpoint};

use super::convert::outcome;
use crate::cni::{CniError, CniRequest, CniResult, Command, ErrorCode};

/// The plugin's connection to the agent.
#[derive(Debug, Clone)]
pub struct AgentConnection {
    client: CniClient<AuthChannel>,
    socket: String,
}

impl AgentConnection {
    /// Dial the agent's socket with `credentials`, retrying for up to `wait`
    /// (an agent that is starting); after that the runtime is told to try
    /// again later.
    ///
    /// # Errors
    /// Code 11 naming the socket; 7 when the credentials' files cannot be used.
    pub async fn connect(
        socket: &str,
        credentials: &ClientArgs,
        wait: Duration,
    ) -> Result<Self, CniError> {
        let endpoint = Endpoint::unix(socket);
        let options = DialOptions {
            connect_timeout: Duration::from_secs(2),
            request_timeout: Some(Duration::from_secs(120)),
            ..DialOptions::default()
        };
        let started = Instant::now();
        loop {
            match credentials.dial_with(&endpoint, &options).await {
                Ok(channel) => {
                    return Ok(AgentConnection {
                        client: CniClient::new(channel),
                        socket: socket.to_owned(),
                    });
                }
                Err(ClientError::Dial(e)) if is_tls_refusal(&e.to_string()) => {
                    return Err(CniError::new(
                        ErrorCode::InvalidConfig,
                        format!("the TLS handshake with the nimbess agent at {socket} failed"),
                    )
                    .with_details(e));
                }
                Err(ClientError::Dial(e)) if started.elapsed() >= wait => {
                    return Err(CniError::new(
                        ErrorCode::TryAgainLater,
                        format!("the nimbess agent is unreachable at {socket}"),
                    )
                    .with_details(e));
                }
                Err(ClientError::Dial(_)) => tokio::time::sleep(Duration::from_millis(100)).await,
                Err(e) => {
                    return Err(CniError::new(
                        ErrorCode::InvalidConfig,
                        format!("the credentials for the nimbess agent at {socket} cannot be used"),
                    )
                    .with_details(e));
                }
            }
        }
    }

    /// Carry `command` to the agent: the result of an ADD, nothing for the
    /// other commands, or the agent's error.
    ///
    /// # Errors
    /// The agent's error; 7 when it refused the credentials (none, unknown
    /// ones, or an identity without the `cni` role); 11 when it did not
    /// answer; 6 when its answer does not parse; 4 for VERSION, which the
    /// plugin answers itself.
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
        let reply = reply.map_err(|status| refused(&self.socket, command, &status))?;
        outcome(reply.into_inner()).map_err(|e| {
            CniError::new(
                ErrorCode::Decode,
                "the nimbess agent's answer does not parse",
            )
            .with_details(e)
        })?
    }
}

/// The plugin's error for a call the agent answered with `status` instead of a reply.
fn refused(socket: &str, command: Command, status: &tonic::Status) -> CniError {
    match status.code() {
        tonic::Code::Unauthenticated | tonic::Code::PermissionDenied => CniError::new(
            ErrorCode::InvalidConfig,
            format!(
                "the nimbess agent at {socket} refused {command}: {}",
                status.message()
            ),
        )
        .with_details(
            "the network configuration's \"tokenFile\" (or \"ca\", \"cert\" and \"key\"), or \
             NEPHRITE_TOKEN_FILE (NEPHRITE_CA, NEPHRITE_CERT, NEPHRITE_KEY) in the runtime's \
             environment, must name credentials the agent gives the cni role",
        ),
        _ => match transport_cause(status).filter(|cause| is_tls_refusal(cause)) {
            Some(cause) => CniError::new(
                ErrorCode::InvalidConfig,
                format!(
                    "the nimbess agent at {socket} refused the plugin's TLS credentials: {cause}"
                ),
            )
            .with_details(
                "the network configuration's \"ca\", \"cert\" and \"key\" (or NEPHRITE_CA, \
                 NEPHRITE_CERT, NEPHRITE_KEY) must name a certificate of the agent's client CA",
            ),
            None => CniError::new(ErrorCode::TryAgainLater, "the nimbess agent did not answer")
                .with_details(status),
        },
    }
}

/// The innermost cause of a call that failed in the transport (the TLS alert, the IO error).
fn transport_cause(status: &tonic::Status) -> Option<String> {
    let mut cause: &(dyn std::error::Error + 'static) = std::error::Error::source(status)?;
    while let Some(next) = cause.source() {
        cause = next;
    }
    Some(cause.to_string())
}

/// Whether a transport error is a TLS refusal (an alert, a certificate not accepted), which
/// trying again does not mend.
fn is_tls_refusal(text: &str) -> bool {
    let text = text.to_ascii_lowercase();
    text.contains("alert") || text.contains("certificate")
}

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
}
