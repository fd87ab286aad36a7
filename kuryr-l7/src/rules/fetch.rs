//! The `rules` CLI's edge: asks a controller's rules service for its snapshot and routers, and
//! hands them on as domain values.

use nephrite_proto::kuryr::l7::v1 as pb;
use nephrite_runtime::{ClientArgs, Endpoint};

use super::Fetched;
use crate::publisher::RouterAck;
use crate::source::Snapshot;
use crate::wire::WireError;

/// Why a controller's rules could not be shown.
#[derive(Debug, thiserror::Error)]
pub enum FetchError {
    /// No connection, or the credentials cannot be used.
    #[error(transparent)]
    Dial(#[from] nephrite_runtime::ClientError),
    /// The call failed.
    #[error("{0}")]
    Call(#[from] tonic::Status),
    /// The snapshot is not valid.
    #[error(transparent)]
    Wire(#[from] WireError),
}

/// Asks the controller at `url` for its rules and routers, presenting `credentials`.
pub async fn fetch(url: &Endpoint, credentials: &ClientArgs) -> Result<Fetched, FetchError> {
    let channel = credentials.dial(url).await?;
    let mut client =
        pb::rules_client::RulesClient::new(channel).max_decoding_message_size(usize::MAX);
    let message = client.get(pb::GetRequest {}).await?.into_inner();
    let routers = client
        .list_routers(pb::ListRoutersRequest {})
        .await?
        .into_inner()
        .routers;
    Ok(Fetched {
        snapshot: Snapshot::try_from(&message)?,
        version: Some(message.version),
        routers: routers.into_iter().map(RouterAck::from).collect(),
    })
}
