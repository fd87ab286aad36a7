//! The tower layer that authenticates and authorises every request before routing.

use std::sync::Arc;
use std::task::{Context, Poll};

use http::{Request, Response};
use tonic::transport::server::{TcpConnectInfo, TlsConnectInfo, UdsConnectInfo};
use tower::{Layer, Service};

use super::identity::{CallerIdentity, Credential, identity_of_certificate};
use super::policy::AuthPolicy;
use super::tokens::TokenFile;
use super::{AUTHENTICATED_SERVICES, OPEN_SERVICES};
use crate::status::bounded_status;

/// What the layer checks with.
#[derive(Debug, Clone)]
pub(crate) struct AuthConfig {
    /// `None`: every authenticated caller may call everything.
    pub(crate) policy: Option<AuthPolicy>,
    pub(crate) tokens: Option<TokenFile>,
    /// Whether client certificates are verified (mutual TLS), so they prove an identity.
    pub(crate) client_certificates: bool,
}

impl AuthConfig {
    /// Whether any credential can be checked: without one, the layer lets everything through.
    pub(crate) fn authenticates(&self) -> bool {
        self.tokens.is_some() || self.client_certificates
    }

    fn authenticate<B>(
        &self,
        request: &Request<B>,
    ) -> Result<Option<CallerIdentity>, tonic::Status> {
        let identity = |name: String, credential| CallerIdentity {
            roles: self
                .policy
                .as_ref()
                .map(|p| p.roles_of(&name))
                .unwrap_or_default(),
            name,
            credential,
        };
        if let Some(header) = request.headers().get(http::header::AUTHORIZATION) {
            let Some(tokens) = &self.tokens else {
                return Err(unauthenticated(
                    "bearer tokens are not accepted by this server",
                ));
            };
            let token = header.as_bytes().strip_prefix(b"Bearer ").ok_or_else(|| {
                unauthenticated("the authorization header is not \"Bearer TOKEN\"")
            })?;
            return match tokens.identity_of(token) {
                Some(name) => Ok(Some(identity(name, Credential::Token))),
                None => Err(unauthenticated("the bearer token is not valid")),
            };
        }
        if self.client_certificates
            && let Some(name) = peer_certificate_identity(request)
        {
            return Ok(Some(identity(name, Credential::Certificate)));
        }
        Ok(None)
    }

    fn authorise(
        &self,
        identity: Option<&CallerIdentity>,
        path: &str,
    ) -> Result<(), tonic::Status> {
        let service = service_of(path);
        if OPEN_SERVICES.contains(&service) {
            return Ok(());
        }
        let Some(identity) = identity else {
            return Err(unauthenticated(
                "credentials are required: a client certificate or a bearer token",
            ));
        };
        if AUTHENTICATED_SERVICES.contains(&service) {
            return Ok(());
        }
        match &self.policy {
            None => Ok(()),
            Some(policy) if policy.allows(&identity.roles, path) => Ok(()),
            Some(_) => Err(bounded_status(
                tonic::Code::PermissionDenied,
                format!(
                    "{} (roles: {}) may not call {path}",
                    identity.name,
                    if identity.roles.is_empty() {
                        "none".to_owned()
                    } else {
                        identity.roles.join(", ")
                    }
                ),
            )),
        }
    }
}

/// The service of a request path `/package.Service/Method`.
fn service_of(path: &str) -> &str {
    path.trim_start_matches('/').split('/').next().unwrap_or("")
}

fn is_open(path: &str) -> bool {
    OPEN_SERVICES.contains(&service_of(path))
}

fn unauthenticated(message: &str) -> tonic::Status {
    tonic::Status::unauthenticated(message)
}

fn peer_certificate_identity<B>(request: &Request<B>) -> Option<String> {
    let extensions = request.extensions();
    let certificates = extensions
        .get::<TlsConnectInfo<TcpConnectInfo>>()
        .and_then(TlsConnectInfo::peer_certs)
        .or_else(|| {
            extensions
                .get::<TlsConnectInfo<UdsConnectInfo>>()
                .and_then(TlsConnectInfo::peer_certs)
        })?;
    identity_of_certificate(certificates.first()?)
}

#[derive(Debug, Clone)]
pub(crate) struct AuthLayer {
    config: Arc<AuthConfig>,
}

impl AuthLayer {
    pub(crate) fn new(config: AuthConfig) -> Self {
        AuthLayer {
            config: Arc::new(config),
        }
    }
}

impl<S> Layer<S> for AuthLayer {
    type Service = Authorise<S>;

    fn layer(&self, inner: S) -> Self::Service {
        Authorise {
            inner,
            config: Arc::clone(&self.config),
        }
    }
}

#[derive(Debug, Clone)]
pub(crate) struct Authorise<S> {
    inner: S,
    config: Arc<AuthConfig>,
}

impl<S, ReqBody, ResBody> Service<Request<ReqBody>> for Authorise<S>
where
    S: Service<Request<ReqBody>, Response = Response<ResBody>>,
    S::Future: Send + 'static,
    ResBody: Default + Send + 'static,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future =
        futures::future::Either<S::Future, std::future::Ready<Result<Response<ResBody>, S::Error>>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut request: Request<ReqBody>) -> Self::Future {
        use futures::future::Either;
        // Open services are open whatever the request carries: a probe with a stale token
        // still learns the server's health.
        if !self.config.authenticates() || is_open(request.uri().path()) {
            return Either::Left(self.inner.call(request));
        }
        let checked = self.config.authenticate(&request).and_then(|identity| {
            self.config
                .authorise(identity.as_ref(), request.uri().path())
                .map(|()| identity)
        });
        match checked {
            Ok(identity) => {
                if let Some(identity) = identity {
                    request.extensions_mut().insert(identity);
                }
                Either::Left(self.inner.call(request))
            }
            Err(status) => {
                tracing::debug!(path = %request.uri().path(), code = ?status.code(), reason = %status.message(), "request refused");
                Either::Right(std::future::ready(Ok(status.into_http())))
            }
        }
    }
}
