//! `preparer serve --web ADDR`: the web dashboard. One [`Feed`] over the daemon's own Data API
//! (in process, through the client's `DataApi` trait: the same `Watch` and listings a remote
//! client gets, without a socket or protobuf) keeps a
//! shared [`Board`]; pages are rendered on the server and every open page follows an event
//! stream (`text/event-stream`) that sends its `<main>` again when the board changes. The
//! listener speaks the same TLS as the gRPC API (`--tls-cert`, `--tls-key`, and client
//! certificates with `--tls-client-ca`) and the same credentials and roles (see the `auth` module: a
//! bearer token, a login form's cookie or a client certificate). Nothing is fetched from elsewhere: the script and the
//! style sheet are compiled into the binary.

use std::net::SocketAddr;
use std::sync::{Arc, RwLock};

use nephrite_preparer_client::DataApi;
use nephrite_runtime::{ServeArgs, ShutdownHandle};
use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;
use tower::ServiceExt;

use crate::api::DataService;
use crate::dashboard::{Board, Connector, Feed, FeedConfig, Outcome, Request, perform};

mod auth;
mod history;
pub mod pages;
mod routes;
mod tls;
mod writes;

pub use tls::WebTlsError;

/// Most board updates applied before open pages are told.
const BATCH: usize = 20_000;

/// What every request handler shares.
pub(crate) struct Shared {
    board: RwLock<Board>,
    changed: watch::Sender<u64>,
    connect: Connector,
    /// The Data API itself, for the writes made as the signed-in caller.
    api: DataService,
    shutdown: ShutdownHandle,
    auth: auth::WebAuth,
}

impl Shared {
    /// Reads the board.
    pub(crate) fn read<T>(&self, read: impl FnOnce(&Board) -> T) -> T {
        let board = self
            .board
            .read()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        read(&board)
    }

    /// Runs a person's request against the Data API.
    pub(crate) async fn perform(&self, request: Request) -> Outcome {
        perform(&self.connect, request).await
    }
}

/// A started web dashboard.
pub struct WebDashboard {
    /// The address it listens on.
    pub local_addr: SocketAddr,
    /// Whether it speaks TLS.
    pub tls: bool,
    task: JoinHandle<()>,
}

impl WebDashboard {
    /// Waits until it stopped (after shutdown).
    pub async fn wait(self) {
        let _ = self.task.await;
    }
}

/// The Data API of `api`, in this process.
fn in_process(api: DataService) -> Connector {
    let api: Arc<dyn DataApi> = Arc::new(api);
    Arc::new(move || Box::pin(std::future::ready(Ok(Arc::clone(&api)))))
}

/// Binds `addr` and serves the dashboard of `api` until `shutdown`.
///
/// # Errors
/// When the address cannot be bound or the TLS files named in `serve` cannot be read.
pub async fn start(
    addr: SocketAddr,
    serve: &ServeArgs,
    api: DataService,
    shutdown: ShutdownHandle,
) -> Result<WebDashboard, WebTlsError> {
    let acceptor = tls::acceptor(serve)?;
    let auth = auth::WebAuth::of(serve)?;
    if !auth.required() && !addr.ip().is_loopback() {
        if !serve.insecure {
            return Err(WebTlsError::Unauthenticated { addr });
        }
        tracing::warn!(%addr, "INSECURE: the web dashboard serves a non-loopback address without authentication (--insecure)");
    }
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|source| WebTlsError::Bind { addr, source })?;
    let local_addr = listener
        .local_addr()
        .map_err(|source| WebTlsError::Bind { addr, source })?;
    let connect = in_process(api.clone());
    let shared = Arc::new(Shared {
        board: RwLock::new(Board::default()),
        changed: watch::channel(0).0,
        connect: Arc::clone(&connect),
        api,
        shutdown: shutdown.clone(),
        auth,
    });
    let (updates_tx, updates) = mpsc::channel(4096);
    let feed = tokio::spawn(Feed::new(connect, FeedConfig::default()).run(updates_tx));
    let follow = tokio::spawn(follow(Arc::clone(&shared), updates));
    let router = routes::router(Arc::clone(&shared));
    let tls = acceptor.is_some();
    let task = tokio::spawn(async move {
        loop {
            let (stream, _) = tokio::select! {
                _ = shutdown.triggered() => break,
                accepted = listener.accept() => match accepted {
                    Ok(accepted) => accepted,
                    Err(err) => {
                        tracing::warn!(%err, "web dashboard: accept failed");
                        continue;
                    }
                },
            };
            let router = router.clone();
            let acceptor = acceptor.clone();
            tokio::spawn(async move {
                // The client certificate's identity (mutual TLS) goes with every request.
                let service = |peer: auth::PeerIdentity| {
                    hyper::service::service_fn(move |mut request: http::Request<_>| {
                        request.extensions_mut().insert(peer.clone());
                        router.clone().oneshot(request)
                    })
                };
                let http = hyper::server::conn::http1::Builder::new();
                let served = match acceptor {
                    Some(acceptor) => match acceptor.accept(stream).await {
                        Ok(stream) => {
                            let peer = auth::PeerIdentity(
                                stream
                                    .get_ref()
                                    .1
                                    .peer_certificates()
                                    .and_then(|chain| chain.first())
                                    .and_then(nephrite_runtime::auth::identity_of_certificate),
                            );
                            http.serve_connection(
                                hyper_util::rt::TokioIo::new(stream),
                                service(peer),
                            )
                            .await
                        }
                        Err(err) => {
                            tracing::debug!(%err, "web dashboard: TLS handshake failed");
                            return;
                        }
                    },
                    None => {
                        http.serve_connection(
                            hyper_util::rt::TokioIo::new(stream),
                            service(auth::PeerIdentity::default()),
                        )
                        .await
                    }
                };
                if let Err(err) = served {
                    tracing::debug!(%err, "web dashboard: connection ended");
                }
            });
        }
        feed.abort();
        follow.abort();
    });
    tracing::info!(%local_addr, tls, "web dashboard serving");
    Ok(WebDashboard {
        local_addr,
        tls,
        task,
    })
}

/// Applies the feed's updates to the shared board, a batch at a time, and tells the pages.
async fn follow(shared: Arc<Shared>, mut updates: mpsc::Receiver<crate::dashboard::Update>) {
    while let Some(update) = updates.recv().await {
        {
            let mut board = shared
                .board
                .write()
                .unwrap_or_else(|poisoned| poisoned.into_inner());
            board.apply(update);
            for _ in 1..BATCH {
                match updates.try_recv() {
                    Ok(update) => board.apply(update),
                    Err(_) => break,
                }
            }
        }
        shared.changed.send_modify(|n| *n = n.wrapping_add(1));
    }
}
