//! A router following the rules service: Watch one controller, fail over to the next URL when
//! it stops answering, acknowledge every version served, and keep the last version while no
//! controller answers.
//!
//! - The router sends the version it already serves; a controller with the same content (the
//!   version is a content hash) answers `unchanged`, so reconnecting re-downloads nothing.
//! - Every snapshot is checked against its version before it is served (its conversion from
//!   the wire, [`crate::wire`]); a bad one is refused and the current one kept.
//! - A stream that is silent for [`WATCH_SILENCE`] (controllers send a heartbeat every
//!   [`HEARTBEAT`]) counts as lost.
//! - After a whole snapshot, new versions come as deltas ([`crate::wire::delta`]), applied to
//!   the last snapshot of the same stream and checked against their version; one that does not
//!   apply ends the stream, and the next Watch starts with a whole snapshot.
//! - With a cache file, the last snapshot is written to disk, so a router restarted while no
//!   controller answers serves what it served before.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use nephrite_proto::kuryr::l7::v1 as pb;
use nephrite_runtime::{AuthChannel, ClientArgs, Endpoint};
use prost::Message as _;
use tokio::sync::watch;

use crate::snapshot::Snapshot;
use crate::wire::{WireError, short};

#[cfg(test)]
mod tests;

/// How often a controller's Watch stream says `unchanged` while nothing changes, so a router
/// notices a controller that went silent (it gives up after [`WATCH_SILENCE`]).
pub const HEARTBEAT: Duration = Duration::from_secs(2);
/// A router that heard nothing for this long fails over to the next controller.
pub const WATCH_SILENCE: Duration = Duration::from_secs(6);

/// A served version: its content hash and the compiled snapshot.
#[derive(Debug, Default)]
pub struct Followed {
    /// The version (empty before the first one).
    pub version: String,
    /// The snapshot.
    pub snapshot: Snapshot,
}

/// Where and how a router follows the rules.
#[derive(Debug, Clone)]
pub struct Subscription {
    /// The controllers, tried in order.
    pub urls: Vec<Endpoint>,
    /// The router's name (unique among routers).
    pub router: String,
    /// Where it serves traffic (sent with acknowledgements).
    pub address: String,
    /// The credentials: TLS (a CA, a client certificate) and a bearer token.
    pub credentials: ClientArgs,
    /// Where the last snapshot is kept across restarts.
    pub cache: Option<PathBuf>,
}

/// Why one Watch ended.
#[derive(Debug, thiserror::Error)]
enum WatchEnd {
    #[error("{0}")]
    Dial(#[from] nephrite_runtime::ClientError),
    #[error("{0}")]
    Status(#[from] tonic::Status),
    #[error("no message for {0:?}")]
    Silent(Duration),
    #[error("the stream ended")]
    Ended,
    #[error("a delta before any snapshot")]
    DeltaFirst,
    #[error("delta refused: {0}")]
    Delta(WireError),
}

/// Reads a cached snapshot; `None` when there is none or it is not valid.
pub fn load_cache(path: &Path) -> Option<Followed> {
    let bytes = std::fs::read(path).ok()?;
    let message = match pb::Snapshot::decode(bytes.as_slice()) {
        Ok(message) => message,
        Err(err) => {
            tracing::warn!("ignoring rules cache {}: {err}", path.display());
            return None;
        }
    };
    match Snapshot::try_from(&message) {
        Ok(snapshot) => Some(Followed {
            version: message.version,
            snapshot,
        }),
        Err(err) => {
            tracing::warn!("ignoring rules cache {}: {err}", path.display());
            None
        }
    }
}

fn store_cache(path: &Path, message: &pb::Snapshot) {
    let temporary = path.with_extension("tmp");
    let written = std::fs::write(&temporary, message.encode_to_vec())
        .and_then(|()| std::fs::rename(&temporary, path));
    if let Err(err) = written {
        tracing::warn!("cannot write rules cache {}: {err}", path.display());
    }
}

impl Subscription {
    /// Follows the controllers until `sender` has no receivers, sending every new version.
    pub async fn run(self, sender: watch::Sender<Arc<Followed>>) {
        if self.urls.is_empty() {
            tracing::error!("no rules URL to follow");
            return;
        }
        let mut backoff = Duration::from_millis(50);
        let mut index = 0usize;
        // Connection failures and refusals in the current round of URLs; said once per outage
        // (again when what is said changes: from no answer to refused credentials).
        let mut unreachable: Vec<String> = Vec::new();
        let mut said: Option<String> = None;
        loop {
            let url = &self.urls[index % self.urls.len()];
            match self.watch(url, &sender).await {
                Ok(()) => return,
                Err(WatchEnd::Dial(err)) => {
                    tracing::debug!("rules {url}: {err}");
                    unreachable.push(err.to_string());
                }
                // Refused credentials do not mend by retrying at once: backed off and said
                // once per outage, like a controller that does not answer.
                Err(WatchEnd::Status(status))
                    if matches!(
                        status.code(),
                        tonic::Code::Unauthenticated | tonic::Code::PermissionDenied
                    ) =>
                {
                    tracing::debug!("rules {url}: {status}");
                    unreachable.push(format!("{url} refuses us: {}", status.message()));
                }
                Err(err) => {
                    tracing::warn!("rules {url}: {err}; keeping version {}", {
                        short(&sender.borrow().version).to_owned()
                    });
                    backoff = Duration::from_millis(50);
                    said = None;
                }
            }
            index += 1;
            if index.is_multiple_of(self.urls.len()) {
                if unreachable.len() == self.urls.len() {
                    let why = unreachable.join("; ");
                    if said.as_ref() != Some(&why) {
                        tracing::warn!(
                            "no controller serves us ({why}); keeping version {} and trying again",
                            short(&sender.borrow().version)
                        );
                        said = Some(why);
                    }
                }
                unreachable.clear();
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(Duration::from_secs(1));
            }
            if sender.is_closed() {
                return;
            }
        }
    }

    /// One Watch on `url`; `Ok` when the router is gone.
    async fn watch(
        &self,
        url: &Endpoint,
        sender: &watch::Sender<Arc<Followed>>,
    ) -> Result<(), WatchEnd> {
        let channel = self.credentials.dial(url).await?;
        let mut client = pb::rules_client::RulesClient::new(channel.clone())
            .max_decoding_message_size(usize::MAX);
        let known_version = sender.borrow().version.clone();
        let mut stream = client
            .watch(pb::WatchRequest {
                router: self.router.clone(),
                known_version,
                accept_deltas: true,
            })
            .await?
            .into_inner();
        tracing::info!("following rules at {url}");
        // Acknowledged to this controller: the first message, then every new version.
        let mut acknowledged = String::new();
        // The last snapshot this stream sent: what its next delta applies to.
        let mut base: Option<pb::Snapshot> = None;
        loop {
            let message = tokio::select! {
                message = tokio::time::timeout(WATCH_SILENCE, stream.message()) => message,
                () = sender.closed() => return Ok(()),
            };
            let event = match message {
                Err(_) => return Err(WatchEnd::Silent(WATCH_SILENCE)),
                Ok(Err(status)) => return Err(status.into()),
                Ok(Ok(None)) => return Err(WatchEnd::Ended),
                Ok(Ok(Some(event))) => event,
            };
            let message = match event.event {
                Some(pb::watch_event::Event::Snapshot(message)) => Some(message),
                Some(pb::watch_event::Event::Delta(delta)) => {
                    let Some(previous) = &base else {
                        return Err(WatchEnd::DeltaFirst);
                    };
                    // A delta that does not apply: start over, whole (known version aside).
                    let next =
                        crate::wire::delta::apply(previous, &delta).map_err(WatchEnd::Delta)?;
                    Some(next)
                }
                _ => None,
            };
            if let Some(message) = message {
                if let Err(err) = self.apply(&message, sender) {
                    tracing::error!("refusing rules from {url}: {err}");
                }
                base = Some(message);
            }
            let serving = sender.borrow().version.clone();
            if serving != acknowledged {
                self.acknowledge(&channel, &serving).await;
                acknowledged = serving;
            }
        }
    }

    fn apply(
        &self,
        message: &pb::Snapshot,
        sender: &watch::Sender<Arc<Followed>>,
    ) -> Result<(), WireError> {
        if message.version == sender.borrow().version {
            return Ok(());
        }
        let snapshot = Snapshot::try_from(message)?;
        snapshot.log();
        if let Some(cache) = &self.cache {
            store_cache(cache, message);
        }
        tracing::info!(
            version = short(&message.version),
            http = snapshot.table.http.len(),
            https = snapshot.table.https.len(),
            "serving new rules"
        );
        sender.send_replace(Arc::new(Followed {
            version: message.version.clone(),
            snapshot,
        }));
        Ok(())
    }

    async fn acknowledge(&self, channel: &AuthChannel, version: &str) {
        let mut client = pb::rules_client::RulesClient::new(channel.clone());
        let request = pb::AcknowledgeRequest {
            router: self.router.clone(),
            version: version.to_owned(),
            address: self.address.clone(),
        };
        if let Err(status) = client.acknowledge(request).await {
            tracing::warn!("acknowledging version {}: {status}", short(version));
        }
    }
}
