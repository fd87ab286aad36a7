//! The `kuryr.l7.v1.Rules` service every controller serves: the current snapshot, a Watch
//! stream of versions, and which version each router acknowledged.
//!
//! The [`Publisher`] holds the current snapshot as a domain value; this service turns each one
//! into its wire form once (however many routers watch) and names it by its content hash, so
//! a snapshot with the content routers already serve is not sent again. Watch streams end when the server shuts down, so the
//! SIGTERM drain is not held up by routers following the rules. A router that accepts deltas
//! gets, after a whole snapshot, each new version as the changes from the one before
//! ([`delta`](kuryr_l7_client::wire::delta)). The wire conversions are the rules client crate's
//! ([`kuryr_l7_client::wire`]), which routers and the `rules` CLI read with.
//!
//! Who may call what is [`rules_auth`]'s table: private keys go only to routers and admins, a
//! router watches and acknowledges only as itself; at most [`MAX_ROUTERS`] routers are kept.

use kuryr_l7_client::wire::delta::delta;
use kuryr_l7_client::wire::{short, to_wire};
use kuryr_l7_client::{HEARTBEAT, RouterAck};
use nephrite_proto::kuryr::l7::v1 as pb;
use nephrite_runtime::{CallerIdentity, ShutdownHandle};
use std::collections::BTreeMap;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use tokio::sync::mpsc;
use tokio_stream::Stream;
use tokio_stream::wrappers::ReceiverStream;
use tonic::{Request, Response, Status};

use crate::publisher::Publisher;
use crate::rules_auth;
use crate::source::Snapshot;

#[cfg(test)]
mod tests;

/// The most routers a controller keeps acknowledgements of.
pub const MAX_ROUTERS: usize = 4096;
/// The longest router name, address or version an acknowledgement may carry.
pub const MAX_NAME: usize = 256;

/// A snapshot and its wire form.
type Converted = (Arc<Snapshot>, Arc<pb::Snapshot>);

/// The wire form of the publisher's current snapshot, converted once per snapshot however
/// many routers watch.
#[derive(Clone, Default)]
struct WireCache {
    last: Arc<Mutex<Option<Converted>>>,
}

impl WireCache {
    fn wire(&self, snapshot: &Arc<Snapshot>) -> Arc<pb::Snapshot> {
        let mut last = self
            .last
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some((domain, wire)) = &*last
            && Arc::ptr_eq(domain, snapshot)
        {
            return wire.clone();
        }
        let wire = Arc::new(to_wire(&snapshot.translation, &snapshot.read_errors));
        if last
            .as_ref()
            .is_none_or(|(_, previous)| previous.version != wire.version)
        {
            tracing::info!(version = short(&wire.version), "rules version");
        }
        *last = Some((snapshot.clone(), wire.clone()));
        wire
    }
}

/// The tonic service.
#[derive(Clone)]
pub struct RulesService {
    publisher: Publisher,
    wire: WireCache,
    routers: Arc<Mutex<BTreeMap<String, RouterAck>>>,
    shutdown: ShutdownHandle,
}

impl RulesService {
    /// Serves `publisher`'s snapshots; Watch streams end when `shutdown` triggers.
    pub fn new(publisher: Publisher, shutdown: ShutdownHandle) -> Self {
        RulesService {
            publisher,
            wire: WireCache::default(),
            routers: Arc::default(),
            shutdown,
        }
    }

    /// The current snapshot in its wire form.
    fn current(&self) -> Arc<pb::Snapshot> {
        self.wire.wire(&self.publisher.current())
    }

    /// The tonic server to add to a `GrpcServer`.
    pub fn into_server(self) -> pb::rules_server::RulesServer<Self> {
        pb::rules_server::RulesServer::new(self)
            .max_encoding_message_size(usize::MAX)
            .max_decoding_message_size(64 << 20)
    }
}

type WatchStream = Pin<Box<dyn Stream<Item = Result<pb::WatchEvent, Status>> + Send>>;

/// `snapshot` as an event; without private keys unless `keys`.
fn snapshot_event(snapshot: &pb::Snapshot, keys: bool) -> pb::WatchEvent {
    let mut snapshot = snapshot.clone();
    if !keys {
        rules_auth::strip_keys(&mut snapshot);
    }
    pb::WatchEvent {
        event: Some(pb::watch_event::Event::Snapshot(snapshot)),
    }
}

/// INVALID_ARGUMENT when `value` (a router name or address) is longer than [`MAX_NAME`].
fn bounded(field: &str, value: &str) -> Result<(), Status> {
    if value.len() > MAX_NAME {
        return Err(Status::invalid_argument(format!(
            "{field} is {} bytes long, more than {MAX_NAME}",
            value.len()
        )));
    }
    Ok(())
}

fn unchanged_event(version: &str) -> pb::WatchEvent {
    pb::WatchEvent {
        event: Some(pb::watch_event::Event::Unchanged(pb::Unchanged {
            version: version.to_owned(),
        })),
    }
}

#[tonic::async_trait]
impl pb::rules_server::Rules for RulesService {
    type WatchStream = WatchStream;

    async fn watch(
        &self,
        request: Request<pb::WatchRequest>,
    ) -> Result<Response<WatchStream>, Status> {
        let caller = CallerIdentity::of(&request);
        let keys = rules_auth::sees_keys(caller);
        bounded("router", &request.get_ref().router)?;
        rules_auth::as_itself(caller, &request.get_ref().router)?;
        let request = request.into_inner();
        let mut current = self.publisher.subscribe();
        let shutdown = self.shutdown.clone();
        let wire = self.wire.clone();
        let (sender, receiver) = mpsc::channel(2);
        tracing::debug!(router = %request.router, known = short(&request.known_version), "watch");
        tokio::spawn(async move {
            let first = wire.wire(&current.borrow_and_update().clone());
            let mut version = first.version.clone();
            // What this stream last sent whole or as a delta: the base of the next delta.
            let mut sent: Option<Arc<pb::Snapshot>> = None;
            let event = if request.known_version == first.version {
                unchanged_event(&first.version)
            } else {
                sent = Some(first.clone());
                snapshot_event(&first, keys)
            };
            if sender.send(Ok(event)).await.is_err() {
                return;
            }
            loop {
                let event = tokio::select! {
                    changed = current.changed() => {
                        if changed.is_err() {
                            return;
                        }
                        let snapshot = wire.wire(&current.borrow_and_update().clone());
                        if snapshot.version == version {
                            continue;
                        }
                        version = snapshot.version.clone();
                        let event = match &sent {
                            Some(base) if request.accept_deltas => {
                                let mut delta = delta(base, &snapshot);
                                if !keys {
                                    rules_auth::strip_delta_keys(&mut delta);
                                }
                                pb::WatchEvent {
                                    event: Some(pb::watch_event::Event::Delta(delta)),
                                }
                            }
                            _ => snapshot_event(&snapshot, keys),
                        };
                        sent = Some(snapshot);
                        event
                    }
                    () = tokio::time::sleep(HEARTBEAT) => unchanged_event(&version),
                    _ = shutdown.triggered() => return,
                    () = sender.closed() => return,
                };
                if sender.send(Ok(event)).await.is_err() {
                    return;
                }
            }
        });
        Ok(Response::new(Box::pin(ReceiverStream::new(receiver))))
    }

    async fn get(
        &self,
        request: Request<pb::GetRequest>,
    ) -> Result<Response<pb::Snapshot>, Status> {
        let mut snapshot = (*self.current()).clone();
        if !rules_auth::sees_keys(CallerIdentity::of(&request)) {
            rules_auth::strip_keys(&mut snapshot);
        }
        Ok(Response::new(snapshot))
    }

    async fn acknowledge(
        &self,
        request: Request<pb::AcknowledgeRequest>,
    ) -> Result<Response<pb::AcknowledgeReply>, Status> {
        rules_auth::as_itself(CallerIdentity::of(&request), &request.get_ref().router)?;
        let request = request.into_inner();
        if request.router.is_empty() {
            return Err(Status::invalid_argument("router name is empty"));
        }
        bounded("router", &request.router)?;
        bounded("address", &request.address)?;
        bounded("version", &request.version)?;
        tracing::info!(router = %request.router, version = short(&request.version), "router serves");
        let ack = RouterAck {
            router: request.router.clone(),
            version: request.version,
            address: request.address,
            acknowledged_at: jiff::Timestamp::now().to_string(),
        };
        let mut routers = self
            .routers
            .lock()
            .map_err(|_| Status::internal("router table poisoned"))?;
        if !routers.contains_key(&request.router) && routers.len() >= MAX_ROUTERS {
            // The table is bounded: the router heard from longest ago makes room (a router
            // still running acknowledges again at its next version).
            let stalest = routers
                .values()
                .min_by_key(|a| a.acknowledged_at.parse::<jiff::Timestamp>().ok())
                .map(|a| a.router.clone());
            if let Some(stalest) = stalest {
                tracing::warn!(
                    router = %stalest,
                    "{MAX_ROUTERS} routers tracked: forgetting the one heard from longest ago"
                );
                routers.remove(&stalest);
            }
        }
        routers.insert(request.router, ack);
        Ok(Response::new(pb::AcknowledgeReply {}))
    }

    async fn list_routers(
        &self,
        _: Request<pb::ListRoutersRequest>,
    ) -> Result<Response<pb::ListRoutersReply>, Status> {
        let routers = self
            .routers
            .lock()
            .map_err(|_| Status::internal("router table poisoned"))?
            .values()
            .map(pb::RouterStatus::from)
            .collect();
        Ok(Response::new(pb::ListRoutersReply {
            current_version: self.current().version.clone(),
            routers,
        }))
    }
}
