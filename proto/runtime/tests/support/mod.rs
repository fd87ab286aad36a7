//! Fixtures for the runtime's integration tests: a deliberately slow gRPC
//! service and small clients for health, reflection, daemon info and
//! `/metrics`.

#![allow(dead_code)]

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use anyhow::{Context as _, bail};
use futures::StreamExt as _;
use nephrite_proto::daemon_v1::daemon_client::DaemonClient;
use nephrite_proto::daemon_v1::{DaemonInfo, GetInfoRequest};
use nephrite_runtime::Endpoint;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::sync::Notify;
use tonic::body::Body;
use tonic::server::NamedService;
use tonic::transport::Channel;
use tonic_health::pb::HealthCheckRequest;
use tonic_health::pb::health_check_response::ServingStatus;
use tonic_health::pb::health_client::HealthClient;
use tonic_reflection::pb::v1::ServerReflectionRequest;
use tonic_reflection::pb::v1::server_reflection_client::ServerReflectionClient;
use tonic_reflection::pb::v1::server_reflection_request::MessageRequest;
use tonic_reflection::pb::v1::server_reflection_response::MessageResponse;

/// `nephrite.test.Slow/Sleep(UInt64Value millis) -> Empty`: sleeps, then
/// answers. Written by hand (no .proto) with tonic's server plumbing.
#[derive(Clone, Default)]
pub struct SlowService {
    /// Notified each time a Sleep call starts.
    pub started: Arc<Notify>,
}

pub const SLOW_SERVICE: &str = "nephrite.test.Slow";

impl NamedService for SlowService {
    const NAME: &'static str = SLOW_SERVICE;
}

struct Sleep(Arc<Notify>);

impl tonic::server::UnaryService<u64> for Sleep {
    type Response = ();
    type Future = Pin<Box<dyn Future<Output = Result<tonic::Response<()>, tonic::Status>> + Send>>;

    fn call(&mut self, request: tonic::Request<u64>) -> Self::Future {
        let started = Arc::clone(&self.0);
        Box::pin(async move {
            started.notify_one();
            tokio::time::sleep(Duration::from_millis(*request.get_ref())).await;
            Ok(tonic::Response::new(()))
        })
    }
}

impl tower::Service<http::Request<Body>> for SlowService {
    type Response = http::Response<Body>;
    type Error = Infallible;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, Infallible>> + Send>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: http::Request<Body>) -> Self::Future {
        let started = Arc::clone(&self.started);
        Box::pin(async move {
            if request.uri().path() != "/nephrite.test.Slow/Sleep" {
                return Ok(tonic::Status::unimplemented("no such method").into_http());
            }
            let mut grpc = tonic::server::Grpc::new(tonic_prost::ProstCodec::default());
            Ok(grpc.unary(Sleep(started), request).await)
        })
    }
}

/// Call Sleep for `millis`.
pub async fn sleep_call(channel: Channel, millis: u64) -> Result<(), tonic::Status> {
    sleep_call_on(channel, millis).await
}

/// Call Sleep for `millis` on any channel (e.g. one that sends credentials).
pub async fn sleep_call_on<T>(channel: T, millis: u64) -> Result<(), tonic::Status>
where
    T: tonic::client::GrpcService<Body>,
    T::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
    T::ResponseBody: hyper::body::Body<Data = bytes::Bytes> + Send + 'static,
    <T::ResponseBody as hyper::body::Body>::Error:
        Into<Box<dyn std::error::Error + Send + Sync>> + Send,
{
    let mut client = tonic::client::Grpc::new(channel);
    client
        .ready()
        .await
        .map_err(|e| tonic::Status::unavailable(e.into().to_string()))?;
    let path = http::uri::PathAndQuery::from_static("/nephrite.test.Slow/Sleep");
    let _: tonic::Response<()> = client
        .unary(
            tonic::Request::new(millis),
            path,
            tonic_prost::ProstCodec::default(),
        )
        .await?;
    Ok(())
}

/// Health of `service` on any channel.
pub async fn health_on(
    channel: nephrite_runtime::AuthChannel,
    service: &str,
) -> anyhow::Result<ServingStatus> {
    Ok(HealthClient::new(channel)
        .check(HealthCheckRequest {
            service: service.to_owned(),
        })
        .await?
        .into_inner()
        .status())
}

/// `GetInfo` of the daemon on any channel.
pub async fn daemon_info_on(
    channel: nephrite_runtime::AuthChannel,
) -> Result<DaemonInfo, tonic::Status> {
    Ok(DaemonClient::new(channel)
        .get_info(GetInfoRequest {})
        .await?
        .into_inner())
}

/// Health of `service` ("" for the whole server).
pub async fn health(channel: Channel, service: &str) -> anyhow::Result<ServingStatus> {
    let response = HealthClient::new(channel)
        .check(HealthCheckRequest {
            service: service.to_owned(),
        })
        .await
        .with_context(|| format!("health check of {service:?}"))?;
    Ok(response.into_inner().status())
}

/// Service names listed through reflection v1, sorted.
pub async fn reflected_services(channel: Channel) -> anyhow::Result<Vec<String>> {
    let request = ServerReflectionRequest {
        host: String::new(),
        message_request: Some(MessageRequest::ListServices(String::new())),
    };
    let mut responses = ServerReflectionClient::new(channel)
        .server_reflection_info(futures::stream::iter([request]))
        .await?
        .into_inner();
    let response = responses
        .next()
        .await
        .context("reflection answered nothing")??;
    match response.message_response {
        Some(MessageResponse::ListServicesResponse(list)) => {
            let mut names: Vec<String> = list.service.into_iter().map(|s| s.name).collect();
            names.sort();
            Ok(names)
        }
        other => bail!("unexpected reflection response {other:?}"),
    }
}

/// Whether reflection can serve the file declaring `symbol`.
pub async fn reflection_knows_symbol(channel: Channel, symbol: &str) -> anyhow::Result<bool> {
    let request = ServerReflectionRequest {
        host: String::new(),
        message_request: Some(MessageRequest::FileContainingSymbol(symbol.to_owned())),
    };
    let mut responses = ServerReflectionClient::new(channel)
        .server_reflection_info(futures::stream::iter([request]))
        .await?
        .into_inner();
    let response = responses.next().await.context("no answer")??;
    Ok(matches!(
        response.message_response,
        Some(MessageResponse::FileDescriptorResponse(files)) if !files.file_descriptor_proto.is_empty()
    ))
}

/// `GetInfo` of the daemon.
pub async fn daemon_info(channel: Channel) -> anyhow::Result<DaemonInfo> {
    Ok(DaemonClient::new(channel)
        .get_info(GetInfoRequest {})
        .await?
        .into_inner())
}

/// GET /metrics over plain HTTP/1.0 with `accept` as the `Accept` header (if any); checks the
/// response's content type is `content_type` and returns the body.
pub async fn scrape(endpoint: &Endpoint, content_type: &str) -> anyhow::Result<String> {
    let authority = endpoint.authority().context("metrics on TCP")?;
    let mut stream = tokio::net::TcpStream::connect(&authority).await?;
    stream
        .write_all(format!("GET /metrics HTTP/1.0\r\nHost: {authority}\r\n\r\n").as_bytes())
        .await?;
    let mut response = String::new();
    stream.read_to_string(&mut response).await?;
    let (head, body) = response
        .split_once("\r\n\r\n")
        .context("malformed HTTP response")?;
    if !head.starts_with("HTTP/1.0 200") && !head.starts_with("HTTP/1.1 200") {
        bail!("metrics answered {head}");
    }
    if !head
        .to_ascii_lowercase()
        .contains(&format!("content-type: {content_type}"))
    {
        bail!("unexpected content type in {head}");
    }
    Ok(body.to_owned())
}

/// The value of the sample line starting with `prefix` (name and labels).
pub fn sample(metrics: &str, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
    metrics.lines().find_map(|line| {
        let rest = line.strip_prefix(name)?.strip_prefix('{')?;
        let (label_text, value) = rest.split_once("} ")?;
        let all = labels.iter().all(|(k, v)| {
            label_text
                .split(',')
                .any(|pair| pair == format!("{k}=\"{v}\""))
        });
        if all { value.trim().parse().ok() } else { None }
    })
}

/// A test CA with a server certificate for `localhost` / `127.0.0.1`, issuing client
/// certificates on demand.
pub struct Pki {
    pub ca_pem: String,
    pub server_cert_pem: String,
    pub server_key_pem: String,
    issuer: rcgen::Issuer<'static, rcgen::KeyPair>,
}

impl Pki {
    pub fn new() -> anyhow::Result<Self> {
        use rcgen::{BasicConstraints, CertificateParams, IsCa, Issuer, KeyPair};
        let ca_key = KeyPair::generate()?;
        let mut ca_params = CertificateParams::new(Vec::<String>::new())?;
        ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        let ca_cert = ca_params.self_signed(&ca_key)?;
        let issuer = Issuer::new(ca_params, ca_key);
        let server_key = KeyPair::generate()?;
        let server_cert =
            CertificateParams::new(vec!["localhost".to_owned(), "127.0.0.1".to_owned()])?
                .signed_by(&server_key, &issuer)?;
        Ok(Pki {
            ca_pem: ca_cert.pem(),
            server_cert_pem: server_cert.pem(),
            server_key_pem: server_key.serialize_pem(),
            issuer,
        })
    }

    /// A client certificate and key (PEM) for the DNS name `san`, with the subject CN `cn`
    /// (`None`: an empty subject).
    pub fn client(&self, cn: Option<&str>, san: &str) -> anyhow::Result<(String, String)> {
        use rcgen::{CertificateParams, DistinguishedName, DnType, KeyPair};
        let key = KeyPair::generate()?;
        let mut params = CertificateParams::new(vec![san.to_owned()])?;
        params.distinguished_name = DistinguishedName::new();
        if let Some(cn) = cn {
            params.distinguished_name.push(DnType::CommonName, cn);
        }
        let cert = params.signed_by(&key, &self.issuer)?;
        Ok((cert.pem(), key.serialize_pem()))
    }
}
