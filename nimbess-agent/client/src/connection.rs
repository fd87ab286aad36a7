//! The CNI client of the agent's socket: [`AgentConnection`] carries the plugin's commands
//! (`nimbess.cni.v1.Cni`), presenting the plugin's credentials ([`ClientArgs`]: a bearer token
//! file, or a CA, certificate and key for mutual TLS on the socket). It answers as the CNI
//! does, with a [`CniError`] whose code tells the runtime what to do: a refusal of the
//! credentials is a configuration error (7), an agent that does not answer is "try again
//! later" (11).

use std::time::{Duration, Instant};

use nephrite_proto::nimbess::cni::v1::{self as pb, cni_client::CniClient};
use nephrite_runtime::{AuthChannel, ClientArgs, ClientError, DialOptions, Endpoint};

use crate::cni::{CniError, CniRequest, CniResult, Command, ErrorCode};
use crate::wire::outcome;

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
