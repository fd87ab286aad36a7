//! What can go wrong talking to Octavia, Neutron and Keystone, and whether trying again can help.
//!
//! Every error names the call (method and URL) and, for an answer, its status and the server's
//! own message (Octavia's `faultstring`, Neutron's `NeutronError.message`), so an Event or a
//! log line says what was refused. [`ApiError::is_retryable`] is the controller's one question:
//! a 5xx, a timeout, a refused connection or a load balancer stuck in a transition is worth a
//! retry with backoff; a 4xx is not, until the input changes.

use std::time::Duration;

use reqwest::Method;

/// A failed call to an OpenStack API.
#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    /// The server answered with a status the call does not expect.
    #[error("{method} {url}: {status} {message}")]
    Status {
        /// The request method.
        method: Method,
        /// The request URL.
        url: String,
        /// The HTTP status.
        status: u16,
        /// The server's message (or the raw body when it has no known error shape).
        message: String,
    },
    /// No answer: connection refused, reset, or timed out.
    #[error("{method} {url}: {source}")]
    Transport {
        /// The request method.
        method: Method,
        /// The request URL.
        url: String,
        /// What reqwest reported.
        #[source]
        source: reqwest::Error,
    },
    /// The answer was not the JSON the API documents.
    #[error("{method} {url}: unexpected answer: {detail}")]
    Decode {
        /// The request method.
        method: Method,
        /// The request URL.
        url: String,
        /// What did not parse.
        detail: String,
    },
    /// Octavia put an object in `ERROR`: the provider could not carry out the change.
    #[error("{kind} {id} is in provisioning status ERROR after {method} {url}")]
    ProvisioningFailed {
        /// "load balancer", "listener", "pool", "member", "L7 policy" or "L7 rule".
        kind: &'static str,
        /// Its id.
        id: String,
        /// The call after which it was found in `ERROR`.
        method: Method,
        /// That call's URL.
        url: String,
    },
    /// A load balancer stayed in a `PENDING_*` status longer than the settle timeout.
    #[error("load balancer {id} still {status} after {waited:?} ({url})")]
    NotSettled {
        /// The load balancer id.
        id: String,
        /// Its last provisioning status.
        status: String,
        /// How long the client waited.
        waited: Duration,
        /// The load balancer's URL.
        url: String,
    },
    /// Neutron refused a floating IP because no router joins the port's subnet to the
    /// external network (`ExternalGatewayForFloatingIPNotFound`).
    #[error(transparent)]
    ExternalGatewayNotFound(Box<ExternalGatewayNotFound>),
    /// Keystone did not issue a token.
    #[error("Keystone {url}: {detail}")]
    Auth {
        /// The token URL.
        url: String,
        /// Keystone's status, when it answered.
        status: Option<u16>,
        /// What went wrong.
        detail: String,
    },
    /// The token's service catalog has no endpoint for a service, and none was configured.
    #[error(
        "no {interface} endpoint of service type {service_type}{} in Keystone's catalog \
         (set endpoint_override)",
        region.as_ref().map(|r| format!(" in region {r}")).unwrap_or_default()
    )]
    NoEndpoint {
        /// The catalog's service type (`load-balancer`, `network`).
        service_type: String,
        /// `public`, `internal` or `admin`.
        interface: String,
        /// The region asked for, if any.
        region: Option<String>,
    },
}

/// Neutron's `ExternalGatewayForFloatingIPNotFound`: what the controller reports as a condition
/// naming the subnet, since only an operator (adding a router) can fix it.
#[derive(Debug, thiserror::Error)]
#[error(
    "{method} {url}: no router joins subnet {subnet_id} to external network {network_id}, \
     so port {port_id} cannot have a floating IP from it \
     (Neutron: ExternalGatewayForFloatingIPNotFound: {message})"
)]
pub struct ExternalGatewayNotFound {
    /// The request method.
    pub method: Method,
    /// The request URL.
    pub url: String,
    /// The subnet of the port that has no way out.
    pub subnet_id: String,
    /// The external network the floating IP was asked from.
    pub network_id: String,
    /// The port the floating IP was to be bound to.
    pub port_id: String,
    /// Neutron's message.
    pub message: String,
}

impl ApiError {
    /// Whether the same call may succeed later without any change on our side: a 5xx answer,
    /// no answer (timeout, refused or reset connection), a load balancer that did not settle
    /// or went to `ERROR` (the provider may recover; the object is replaced on the next sync),
    /// or Keystone failing in one of those ways.
    pub fn is_retryable(&self) -> bool {
        match self {
            ApiError::Status { status, .. } => *status >= 500,
            ApiError::Transport { source, .. } => {
                source.is_timeout() || source.is_connect() || source.is_request()
            }
            ApiError::NotSettled { .. } | ApiError::ProvisioningFailed { .. } => true,
            ApiError::Auth { status, .. } => status.is_none_or(|s| s >= 500),
            ApiError::Decode { .. }
            | ApiError::ExternalGatewayNotFound(_)
            | ApiError::NoEndpoint { .. } => false,
        }
    }

    /// The HTTP status of a refused call, when there was an answer.
    pub fn status(&self) -> Option<u16> {
        match self {
            ApiError::Status { status, .. } => Some(*status),
            ApiError::ExternalGatewayNotFound(_) => Some(404),
            ApiError::Auth { status, .. } => *status,
            _ => None,
        }
    }

    /// Whether the object the call named does not exist (404).
    pub fn is_not_found(&self) -> bool {
        matches!(self, ApiError::Status { status: 404, .. })
    }
}

/// The server's message in an error body: Octavia's `faultstring`, Neutron's
/// `NeutronError.message`, Keystone's `error.message`; else the body itself, trimmed.
pub(crate) fn server_message(body: &str) -> String {
    let parsed: Option<serde_json::Value> = serde_json::from_str(body).ok();
    let found = parsed.as_ref().and_then(|v| {
        v.get("faultstring")
            .or_else(|| v.pointer("/NeutronError/message"))
            .or_else(|| v.pointer("/error/message"))
            .and_then(serde_json::Value::as_str)
            .map(str::to_owned)
    });
    found.unwrap_or_else(|| {
        let trimmed = body.trim();
        let mut end = trimmed.len().min(500);
        while !trimmed.is_char_boundary(end) {
            end -= 1;
        }
        trimmed[..end].to_owned()
    })
}

/// Neutron's error type in an error body (`NeutronError.type`).
pub(crate) fn neutron_error_type(body: &str) -> Option<String> {
    let parsed: serde_json::Value = serde_json::from_str(body).ok()?;
    parsed
        .pointer("/NeutronError/type")
        .and_then(serde_json::Value::as_str)
        .map(str::to_owned)
}

/// The subnet in Neutron's `ExternalGatewayForFloatingIPNotFound` message ("External network
/// N is not reachable from subnet S.  Therefore, …").
pub(crate) fn unreachable_subnet(message: &str) -> Option<String> {
    let rest = message.split_once("from subnet ")?.1;
    let subnet: String = rest
        .chars()
        .take_while(|c| c.is_ascii_alphanumeric() || *c == '-')
        .collect();
    (!subnet.is_empty()).then_some(subnet)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_servers_own_message_is_found_in_each_apis_error_shape() {
        assert_eq!(
            server_message(
                r#"{"faultcode": "Client", "faultstring": "Load Balancer x is immutable and cannot be updated.", "debuginfo": null}"#
            ),
            "Load Balancer x is immutable and cannot be updated."
        );
        assert_eq!(
            server_message(
                r#"{"NeutronError": {"type": "NetworkNotFound", "message": "Network n could not be found.", "detail": ""}}"#
            ),
            "Network n could not be found."
        );
        assert_eq!(
            server_message(
                r#"{"error": {"code": 401, "title": "Unauthorized", "message": "The request you have made requires authentication."}}"#
            ),
            "The request you have made requires authentication."
        );
        assert_eq!(
            server_message("  <html>Bad gateway</html>\n"),
            "<html>Bad gateway</html>"
        );
        assert_eq!(server_message(&"é".repeat(400)).len(), 500);
    }

    #[test]
    fn the_unreachable_subnet_is_read_from_neutrons_message() {
        let message = "External network 4642b1a8-f4d8-41b9-9d39-226ddd85537c is not reachable \
                       from subnet 2610fc8e-604c-4644-bc40-3ebf038e057e.  Therefore, cannot \
                       associate Port cf13593f with a Floating IP.";
        assert_eq!(
            unreachable_subnet(message).as_deref(),
            Some("2610fc8e-604c-4644-bc40-3ebf038e057e")
        );
        assert_eq!(unreachable_subnet("something else"), None);
        assert_eq!(
            neutron_error_type(
                r#"{"NeutronError": {"type": "ExternalGatewayForFloatingIPNotFound", "message": "m", "detail": ""}}"#
            )
            .as_deref(),
            Some("ExternalGatewayForFloatingIPNotFound")
        );
    }

    #[test]
    fn server_errors_and_unsettled_load_balancers_are_retryable_client_errors_are_not() {
        let status = |status| ApiError::Status {
            method: Method::POST,
            url: "http://o/v2/lbaas/listeners".to_owned(),
            status,
            message: "m".to_owned(),
        };
        assert!(status(500).is_retryable());
        assert!(status(503).is_retryable());
        assert!(!status(400).is_retryable());
        assert!(!status(404).is_retryable());
        assert!(status(404).is_not_found());
        assert_eq!(status(409).status(), Some(409));
        assert_eq!(
            status(503).to_string(),
            "POST http://o/v2/lbaas/listeners: 503 m"
        );
        let unsettled = ApiError::NotSettled {
            id: "lb".to_owned(),
            status: "PENDING_UPDATE".to_owned(),
            waited: Duration::from_secs(300),
            url: "http://o/v2/lbaas/loadbalancers/lb".to_owned(),
        };
        assert!(unsettled.is_retryable());
        let auth = |status| ApiError::Auth {
            url: "http://k/v3/auth/tokens".to_owned(),
            status,
            detail: "d".to_owned(),
        };
        assert!(!auth(Some(401)).is_retryable());
        assert!(auth(Some(503)).is_retryable());
        assert!(auth(None).is_retryable());
    }
}
