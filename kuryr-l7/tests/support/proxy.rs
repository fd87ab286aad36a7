//! A recording HTTP proxy in front of an API (Octavia): every request is passed on; each
//! mutating one (POST, PUT, DELETE) is counted and recorded as `METHOD /path`; one of them can
//! be held until the test says what becomes of it. That is how a test kills the controller
//! *during* a given call: hold the Nth call, SIGKILL the controller, then either forward the
//! call (the API did it, the answer was lost) or drop it (it never arrived).

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::Context;
use bytes::Bytes;
use http::{Request, Response, StatusCode};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;
use tokio::sync::{mpsc, oneshot};

#[derive(Default)]
struct State {
    mutations: Vec<String>,
    /// Hold the mutation with this number (1 = the first ever).
    trap: Option<usize>,
}

/// What becomes of a held call.
enum Fate {
    /// Sent on; the sender hears when the API answered.
    Forward(oneshot::Sender<()>),
    /// Never sent.
    Drop,
}

/// A held call.
pub struct Held {
    /// Its number among the mutations (1 = the first).
    pub number: usize,
    /// `METHOD /path`.
    pub call: String,
    fate: oneshot::Sender<Fate>,
}

impl Held {
    /// Sends the call on and waits until the API answered it (the answer goes nowhere).
    pub async fn forward(self) -> anyhow::Result<()> {
        let (done, answered) = oneshot::channel();
        self.fate
            .send(Fate::Forward(done))
            .map_err(|_| anyhow::anyhow!("the held call's connection is gone"))?;
        tokio::time::timeout(Duration::from_secs(60), answered)
            .await
            .context("the API did not answer the forwarded call")??;
        Ok(())
    }

    /// The call never reaches the API.
    pub fn drop_it(self) {
        let _ = self.fate.send(Fate::Drop);
    }
}

/// The proxy.
pub struct Proxy {
    /// Where it listens (`http://127.0.0.1:PORT`).
    pub url: String,
    state: Arc<Mutex<State>>,
    held: mpsc::UnboundedReceiver<Held>,
}

impl Proxy {
    /// A proxy to `upstream` (`http://host:port`, no trailing slash).
    pub async fn start(upstream: String) -> anyhow::Result<Proxy> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let address: SocketAddr = listener.local_addr()?;
        let state = Arc::new(Mutex::new(State::default()));
        let (hold, held) = mpsc::unbounded_channel();
        let client = reqwest::Client::builder()
            .timeout(Duration::from_secs(60))
            .build()?;
        let shared = state.clone();
        tokio::spawn(async move {
            loop {
                let Ok((stream, _)) = listener.accept().await else {
                    continue;
                };
                let (state, hold, client, upstream) = (
                    shared.clone(),
                    hold.clone(),
                    client.clone(),
                    upstream.clone(),
                );
                tokio::spawn(async move {
                    let service = service_fn(move |request: Request<Incoming>| {
                        let (state, hold, client, upstream) = (
                            state.clone(),
                            hold.clone(),
                            client.clone(),
                            upstream.clone(),
                        );
                        // Its own task: a held call outlives the connection of the
                        // controller killed meanwhile.
                        let passing = tokio::spawn(async move {
                            pass(request, &state, &hold, &client, &upstream).await
                        });
                        async move {
                            Ok::<_, Infallible>(passing.await.unwrap_or_else(|_| {
                                answer(StatusCode::BAD_GATEWAY, Bytes::new(), None)
                            }))
                        }
                    });
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(TokioIo::new(stream), service)
                        .await;
                });
            }
        });
        Ok(Proxy {
            url: format!("http://{address}"),
            state,
            held,
        })
    }

    /// The mutating calls so far, in order.
    pub fn mutations(&self) -> Vec<String> {
        self.state.lock().unwrap().mutations.clone()
    }

    /// Holds the `n`th mutating call from now (1 = the next).
    pub fn hold_after(&self, n: usize) {
        let mut state = self.state.lock().unwrap();
        state.trap = Some(state.mutations.len() + n);
    }

    /// The held call, once it arrives (within `limit`).
    pub async fn held(&mut self, limit: Duration) -> anyhow::Result<Held> {
        tokio::time::timeout(limit, self.held.recv())
            .await
            .context("no call was held in time")?
            .context("the proxy stopped")
    }
}

fn answer(
    status: StatusCode,
    body: Bytes,
    content_type: Option<http::HeaderValue>,
) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(body));
    *response.status_mut() = status;
    if let Some(value) = content_type {
        response
            .headers_mut()
            .insert(http::header::CONTENT_TYPE, value);
    }
    response
}

async fn pass(
    request: Request<Incoming>,
    state: &Mutex<State>,
    hold: &mpsc::UnboundedSender<Held>,
    client: &reqwest::Client,
    upstream: &str,
) -> Response<Full<Bytes>> {
    let (parts, body) = request.into_parts();
    let Ok(body) = body.collect().await.map(|b| b.to_bytes()) else {
        return answer(StatusCode::BAD_REQUEST, Bytes::new(), None);
    };
    let path = parts
        .uri
        .path_and_query()
        .map_or("/", |p| p.as_str())
        .to_owned();
    let mutating = matches!(
        parts.method,
        http::Method::POST | http::Method::PUT | http::Method::DELETE
    );
    let mut fate = None;
    if mutating {
        let call = format!("{} {}", parts.method, parts.uri.path());
        {
            let mut state = state.lock().unwrap();
            state.mutations.push(call.clone());
            let number = state.mutations.len();
            if state.trap == Some(number) {
                state.trap = None;
                let (decide, decided) = oneshot::channel();
                let _ = hold.send(Held {
                    number,
                    call,
                    fate: decide,
                });
                fate = Some(decided);
            }
        }
    }
    let done = match fate {
        None => None,
        Some(decided) => match decided.await {
            Ok(Fate::Forward(done)) => Some(done),
            Ok(Fate::Drop) | Err(_) => {
                return answer(StatusCode::BAD_GATEWAY, Bytes::new(), None);
            }
        },
    };
    let mut outgoing = client.request(parts.method.clone(), format!("{upstream}{path}"));
    for (name, value) in &parts.headers {
        if name != http::header::HOST && name != http::header::CONTENT_LENGTH {
            outgoing = outgoing.header(name, value);
        }
    }
    let response = match outgoing.body(body).send().await {
        Ok(response) => {
            let status = response.status();
            let content_type = response.headers().get(http::header::CONTENT_TYPE).cloned();
            let body = response.bytes().await.unwrap_or_default();
            answer(status, body, content_type)
        }
        Err(_) => answer(StatusCode::BAD_GATEWAY, Bytes::new(), None),
    };
    if let Some(done) = done {
        let _ = done.send(());
    }
    response
}
