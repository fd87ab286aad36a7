//! A tower layer that gives every gRPC request a tracing span (method path,
//! peer, status code, duration) and records it in the gRPC metrics.
//!
//! The status of a gRPC call is usually only known from the response
//! trailers, so the response body is wrapped and the request is recorded
//! when the trailers pass by (or when the body is dropped early: CANCELLED).

use std::collections::HashSet;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Instant;

use http::{HeaderMap, Request, Response};
use hyper::body::{Body, Frame, SizeHint};
use tonic::Code;
use tonic::transport::server::{TcpConnectInfo, TlsConnectInfo, UdsConnectInfo};
use tower::{Layer, Service};
use tracing::Instrument as _;

use crate::metrics::{GrpcLabels, GrpcMetrics};

/// Label used for the service and method of requests to unknown services, so
/// that arbitrary paths cannot grow the metric families without bound.
const UNKNOWN: &str = "unknown";

#[derive(Clone)]
pub(crate) struct RequestTelemetryLayer {
    shared: Arc<Shared>,
}

struct Shared {
    metrics: GrpcMetrics,
    services: HashSet<String>,
}

impl RequestTelemetryLayer {
    pub(crate) fn new(metrics: GrpcMetrics, services: impl IntoIterator<Item = String>) -> Self {
        RequestTelemetryLayer {
            shared: Arc::new(Shared {
                metrics,
                services: services.into_iter().collect(),
            }),
        }
    }
}

impl<S> Layer<S> for RequestTelemetryLayer {
    type Service = RequestTelemetry<S>;

    fn layer(&self, inner: S) -> Self::Service {
        RequestTelemetry {
            inner,
            shared: Arc::clone(&self.shared),
        }
    }
}

#[derive(Clone)]
pub(crate) struct RequestTelemetry<S> {
    inner: S,
    shared: Arc<Shared>,
}

impl<S, ReqBody, ResBody> Service<Request<ReqBody>> for RequestTelemetry<S>
where
    S: Service<Request<ReqBody>, Response = Response<ResBody>>,
    S::Future: Send + 'static,
    S::Error: 'static,
    ResBody: Body + Unpin,
{
    type Response = Response<TelemetryBody<ResBody>>;
    type Error = S::Error;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, S::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request<ReqBody>) -> Self::Future {
        let path = request.uri().path().to_owned();
        let (service, method) = split_path(&path, &self.shared.services);
        let peer = peer_of(&request);
        let span = tracing::info_span!(
            "grpc_request",
            grpc.path = %path,
            peer = %peer,
            grpc.code = tracing::field::Empty,
            duration_ms = tracing::field::Empty,
        );
        let recorder = Recorder {
            shared: Arc::clone(&self.shared),
            service,
            method,
            start: Instant::now(),
            span: span.clone(),
            header_code: None,
            done: false,
        };
        let future = self.inner.call(request).instrument(span);
        Box::pin(async move {
            match future.await {
                Ok(response) => {
                    let mut recorder = recorder;
                    recorder.header_code = grpc_status(response.headers());
                    Ok(response.map(|inner| TelemetryBody { inner, recorder }))
                }
                Err(error) => {
                    let mut recorder = recorder;
                    recorder.finish(Code::Unknown);
                    Err(error)
                }
            }
        })
    }
}

/// The response body, passed through unchanged; records the request when
/// the trailers arrive, the body ends, or it is dropped.
pub(crate) struct TelemetryBody<B> {
    inner: B,
    recorder: Recorder,
}

impl<B> Body for TelemetryBody<B>
where
    B: Body + Unpin,
{
    type Data = B::Data;
    type Error = B::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Self::Data>, Self::Error>>> {
        let this = self.get_mut();
        let polled = std::task::ready!(Pin::new(&mut this.inner).poll_frame(cx));
        match &polled {
            Some(Ok(frame)) => {
                if let Some(code) = frame.trailers_ref().and_then(grpc_status) {
                    this.recorder.finish(code);
                }
            }
            Some(Err(_)) => this.recorder.finish(Code::Unknown),
            None => {
                let code = this.recorder.header_code.unwrap_or(Code::Unknown);
                this.recorder.finish(code);
            }
        }
        Poll::Ready(polled)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

struct Recorder {
    shared: Arc<Shared>,
    service: String,
    method: String,
    start: Instant,
    span: tracing::Span,
    header_code: Option<Code>,
    done: bool,
}

impl Recorder {
    fn finish(&mut self, code: Code) {
        if std::mem::replace(&mut self.done, true) {
            return;
        }
        let elapsed = self.start.elapsed();
        let code_name = code_name(code);
        self.shared.metrics.record(
            &GrpcLabels {
                grpc_service: self.service.clone(),
                grpc_method: self.method.clone(),
                grpc_code: code_name.to_owned(),
            },
            elapsed.as_secs_f64(),
        );
        // microsecond precision is plenty for a log line
        let duration_ms = (elapsed.as_secs_f64() * 1_000_000.0).round() / 1000.0;
        self.span
            .record("grpc.code", tracing::field::display(code_name));
        self.span.record("duration_ms", duration_ms);
        let _entered = self.span.enter();
        if is_server_error(code) {
            tracing::warn!("gRPC request failed");
        } else {
            tracing::debug!("gRPC request finished");
        }
    }
}

impl Drop for Recorder {
    fn drop(&mut self) {
        // Dropped before the status was seen: the response was abandoned,
        // typically by the client going away.
        let code = self.header_code.unwrap_or(Code::Cancelled);
        self.finish(code);
    }
}

fn split_path(path: &str, services: &HashSet<String>) -> (String, String) {
    match path.trim_start_matches('/').split_once('/') {
        Some((service, method)) if services.contains(service) && !method.contains('/') => {
            (service.to_owned(), method.to_owned())
        }
        _ => (UNKNOWN.to_owned(), UNKNOWN.to_owned()),
    }
}

fn grpc_status(headers: &HeaderMap) -> Option<Code> {
    let value = headers.get("grpc-status")?.to_str().ok()?;
    value.trim().parse::<i32>().ok().map(Code::from_i32)
}

fn peer_of<B>(request: &Request<B>) -> String {
    let extensions = request.extensions();
    let tcp = |info: &TcpConnectInfo| {
        info.remote_addr()
            .map_or_else(|| "tcp:unknown".to_owned(), |a| a.to_string())
    };
    let uds = |info: &UdsConnectInfo| match &info.peer_cred {
        Some(cred) => match cred.pid() {
            Some(pid) => format!("unix:pid={pid},uid={}", cred.uid()),
            None => format!("unix:uid={}", cred.uid()),
        },
        None => "unix".to_owned(),
    };
    if let Some(info) = extensions.get::<TcpConnectInfo>() {
        tcp(info)
    } else if let Some(info) = extensions.get::<TlsConnectInfo<TcpConnectInfo>>() {
        tcp(info.get_ref())
    } else if let Some(info) = extensions.get::<UdsConnectInfo>() {
        uds(info)
    } else if let Some(info) = extensions.get::<TlsConnectInfo<UdsConnectInfo>>() {
        uds(info.get_ref())
    } else {
        "unknown".to_owned()
    }
}

fn is_server_error(code: Code) -> bool {
    matches!(
        code,
        Code::Unknown | Code::Internal | Code::DataLoss | Code::Unavailable | Code::Unimplemented
    )
}

/// The canonical gRPC name of a status code, e.g. `NOT_FOUND`.
pub(crate) fn code_name(code: Code) -> &'static str {
    match code {
        Code::Ok => "OK",
        Code::Cancelled => "CANCELLED",
        Code::Unknown => "UNKNOWN",
        Code::InvalidArgument => "INVALID_ARGUMENT",
        Code::DeadlineExceeded => "DEADLINE_EXCEEDED",
        Code::NotFound => "NOT_FOUND",
        Code::AlreadyExists => "ALREADY_EXISTS",
        Code::PermissionDenied => "PERMISSION_DENIED",
        Code::ResourceExhausted => "RESOURCE_EXHAUSTED",
        Code::FailedPrecondition => "FAILED_PRECONDITION",
        Code::Aborted => "ABORTED",
        Code::OutOfRange => "OUT_OF_RANGE",
        Code::Unimplemented => "UNIMPLEMENTED",
        Code::Internal => "INTERNAL",
        Code::Unavailable => "UNAVAILABLE",
        Code::DataLoss => "DATA_LOSS",
        Code::Unauthenticated => "UNAUTHENTICATED",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_services_collapse_into_one_label() {
        let services: HashSet<String> = ["a.v1.Svc".to_owned()].into();
        assert_eq!(
            split_path("/a.v1.Svc/Get", &services),
            ("a.v1.Svc".to_owned(), "Get".to_owned())
        );
        for path in ["/b.v1.Other/Get", "/", "/a.v1.Svc/Get/extra", "junk"] {
            assert_eq!(
                split_path(path, &services),
                (UNKNOWN.to_owned(), UNKNOWN.to_owned()),
                "{path}"
            );
        }
    }

    #[test]
    fn status_header_parsing() {
        let mut headers = HeaderMap::new();
        assert_eq!(grpc_status(&headers), None);
        headers.insert("grpc-status", http::HeaderValue::from_static("5"));
        assert_eq!(grpc_status(&headers), Some(Code::NotFound));
        assert_eq!(code_name(Code::NotFound), "NOT_FOUND");
    }
}
