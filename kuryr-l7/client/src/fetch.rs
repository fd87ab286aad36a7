//! The `rules` CLI's client (and any reader's, e.g. a dashboard): asks a controller's rules
//! service for its current snapshot and the routers that acknowledged a version, and hands them
//! on as domain values. A `read` identity receives each private key as its fingerprint; the
//! version still checks (see [`version_of`](crate::wire::version_of)).

use nephrite_proto::kuryr::l7::v1 as pb;
use nephrite_runtime::{ClientArgs, ClientError, Endpoint};
use tonic::Code;

use crate::snapshot::{RouterAck, Snapshot};
use crate::wire::WireError;

/// A controller's rules as a reader sees them.
#[derive(Debug)]
pub struct Fetched {
    /// The version of `snapshot` (its content hash).
    pub version: String,
    /// The rules, checked against their version and compiled.
    pub snapshot: Snapshot,
    /// The routers that acknowledged a version to the controller.
    pub routers: Vec<RouterAck>,
}

/// Why a controller's rules could not be fetched.
#[derive(Debug, thiserror::Error)]
pub enum FetchError {
    /// No connection, or the caller's credentials cannot be used.
    #[error("cannot reach the rules service at {url}: {source}")]
    Dial {
        /// The controller.
        url: String,
        /// The dialer's error.
        source: ClientError,
    },
    /// The controller refused the caller's credentials (none, unknown, or a role without
    /// `Get`/`ListRouters`).
    #[error(
        "the rules service at {url} refused {call}: {message} (present credentials with the read role: --token-file, or --ca/--cert/--key)"
    )]
    Refused {
        /// The controller.
        url: String,
        /// The call refused.
        call: &'static str,
        /// The controller's message.
        message: String,
    },
    /// The call failed otherwise (the controller is stopping, the connection broke).
    #[error("the rules service at {url}: {call} failed: {code:?}: {message}")]
    Call {
        /// The controller.
        url: String,
        /// The call that failed.
        call: &'static str,
        /// The gRPC status code.
        code: Code,
        /// The controller's message.
        message: String,
    },
    /// The snapshot does not match its version or holds what the model refuses.
    #[error("the rules service at {url} sent rules that cannot be used: {source}")]
    Wire {
        /// The controller.
        url: String,
        /// What is wrong with the snapshot.
        source: WireError,
    },
}

impl FetchError {
    fn call(url: &Endpoint, call: &'static str, status: &tonic::Status) -> Self {
        let url = url.to_string();
        let message = status.message().to_owned();
        match status.code() {
            Code::Unauthenticated | Code::PermissionDenied => {
                FetchError::Refused { url, call, message }
            }
            code => FetchError::Call {
                url,
                call,
                code,
                message,
            },
        }
    }
}

/// Asks the controller at `url` for its rules and routers, presenting `credentials`.
///
/// # Errors
/// [`FetchError`]: the controller cannot be dialled, refuses or fails a call, or sends a
/// snapshot that does not check.
pub async fn fetch(url: &Endpoint, credentials: &ClientArgs) -> Result<Fetched, FetchError> {
    let channel = credentials
        .dial(url)
        .await
        .map_err(|source| FetchError::Dial {
            url: url.to_string(),
            source,
        })?;
    let mut client =
        pb::rules_client::RulesClient::new(channel).max_decoding_message_size(usize::MAX);
    let message = client
        .get(pb::GetRequest {})
        .await
        .map_err(|status| FetchError::call(url, "Get", &status))?
        .into_inner();
    let routers = client
        .list_routers(pb::ListRoutersRequest {})
        .await
        .map_err(|status| FetchError::call(url, "ListRouters", &status))?
        .into_inner()
        .routers;
    let snapshot = Snapshot::try_from(&message).map_err(|source| FetchError::Wire {
        url: url.to_string(),
        source,
    })?;
    Ok(Fetched {
        snapshot,
        version: message.version,
        routers: routers.into_iter().map(RouterAck::from).collect(),
    })
}
