//! Checking from outside who may call what: every method of a server called as each caller
//! with an empty request, and each answer compared with what that caller should get. The
//! authentication layer answers before any handler sees a request, so an empty request tells
//! whether a caller gets through; a handler that then refuses the empty request has still let
//! the caller in. The daemons' credential tests use it (every method × no credentials, wrong
//! ones, each role); an operator can point it at a daemon to check a policy file.

use std::time::Duration;

use tonic::Code;

use crate::client_args::AuthChannel;

/// How long one probe waits for an answer before it counts as wrong.
pub const PROBE_WAIT: Duration = Duration::from_secs(60);

/// What a caller should get from a method.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Expected {
    /// UNAUTHENTICATED: no credentials, or ones the server does not know.
    Unauthenticated,
    /// PERMISSION_DENIED: a known caller without a role for the method.
    PermissionDenied,
    /// Through authentication and authorisation: any answer but UNAUTHENTICATED,
    /// PERMISSION_DENIED or UNIMPLEMENTED (which would mean the method does not exist).
    Allowed,
}

impl Expected {
    /// Whether `answer` is what was expected.
    pub fn matches(self, answer: &Result<(), tonic::Status>) -> bool {
        let code = answer.as_ref().err().map(tonic::Status::code);
        match self {
            Expected::Unauthenticated => code == Some(Code::Unauthenticated),
            Expected::PermissionDenied => code == Some(Code::PermissionDenied),
            Expected::Allowed => !matches!(
                code,
                Some(Code::Unauthenticated | Code::PermissionDenied | Code::Unimplemented)
            ),
        }
    }
}

/// The methods of every service in `.proto` source text, as request paths
/// (`/package.Service/Method`), in the order written.
pub fn proto_methods(source: &str) -> Vec<String> {
    let mut package = String::new();
    let mut service: Option<String> = None;
    let mut methods = Vec::new();
    for line in source.lines() {
        let line = line.split("//").next().unwrap_or("").trim();
        if let Some(rest) = line.strip_prefix("package ") {
            package = rest.trim_end_matches(';').trim().to_owned();
        } else if let Some(rest) = line.strip_prefix("service ") {
            service = rest
                .split(|c: char| c == '{' || c.is_whitespace())
                .next()
                .map(str::to_owned);
        } else if let (Some(rest), Some(service)) = (line.strip_prefix("rpc "), &service) {
            let method = rest.split('(').next().unwrap_or("").trim();
            if package.is_empty() {
                methods.push(format!("/{service}/{method}"));
            } else {
                methods.push(format!("/{package}.{service}/{method}"));
            }
        }
    }
    methods
}

/// Calls `path` (`/package.Service/Method`) on `channel` with an empty request message: the
/// status it answers with, `Ok` once a response (or a stream's headers) arrives.
///
/// # Errors
/// The call's status; UNAVAILABLE when the channel is not ready, INVALID_ARGUMENT for a path
/// that is not one.
pub async fn call_empty(channel: &AuthChannel, path: &str) -> Result<(), tonic::Status> {
    let path = http::uri::PathAndQuery::try_from(path)
        .map_err(|e| tonic::Status::invalid_argument(format!("{path:?} is not a path: {e}")))?;
    let mut grpc = tonic::client::Grpc::new(channel.clone());
    grpc.ready()
        .await
        .map_err(|e| tonic::Status::unavailable(format!("the channel is not ready: {e}")))?;
    // Every method, unary or streaming, answers a server-streaming call on the wire; the
    // status of a refused call arrives before any message.
    let codec = tonic_prost::ProstCodec::<(), ()>::default();
    grpc.server_streaming(tonic::Request::new(()), path, codec)
        .await
        .map(drop)
}

/// Answers that differed from what was expected, over several callers and methods.
#[derive(Debug, Default)]
pub struct AccessReport {
    checked: usize,
    wrong: Vec<String>,
}

impl AccessReport {
    /// An empty report.
    pub fn new() -> Self {
        AccessReport::default()
    }

    /// Calls every one of `methods` as `caller` (a name for the report) over `channel`, which
    /// carries that caller's credentials, and records each answer that `expected` (given the
    /// method) does not match.
    pub async fn check(
        &mut self,
        caller: &str,
        channel: &AuthChannel,
        methods: &[String],
        expected: impl Fn(&str) -> Expected,
    ) {
        for method in methods {
            let want = expected(method);
            self.checked += 1;
            match tokio::time::timeout(PROBE_WAIT, call_empty(channel, method)).await {
                Ok(answer) if want.matches(&answer) => {}
                Ok(answer) => self.wrong.push(format!(
                    "{caller} calling {method}: expected {want:?}, got {}",
                    match &answer {
                        Ok(()) => "OK".to_owned(),
                        Err(status) => format!("{:?}: {}", status.code(), status.message()),
                    }
                )),
                Err(_) => self.wrong.push(format!(
                    "{caller} calling {method}: expected {want:?}, no answer within {PROBE_WAIT:?}"
                )),
            }
        }
    }

    /// How many calls were checked.
    pub fn checked(&self) -> usize {
        self.checked
    }

    /// The answers that were not as expected, one line each.
    pub fn wrong(&self) -> &[String] {
        &self.wrong
    }

    /// Panics listing every answer that was not as expected (and when nothing was checked).
    #[track_caller]
    pub fn assert_as_expected(&self) {
        assert!(self.checked > 0, "no call was checked");
        assert!(
            self.wrong.is_empty(),
            "{} of {} answers were not as expected:\n{}",
            self.wrong.len(),
            self.checked,
            self.wrong.join("\n")
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn methods_are_read_per_service_with_their_package() {
        let source = "syntax = \"proto3\";\npackage a.b.v1;\n\n// service Commented {\nservice One {\n  \
                      rpc Get(GetRequest) returns (Thing);\n  // rpc Hidden(X) returns (Y);\n  \
                      rpc Watch (WatchRequest) returns (stream Change); // trailing\n}\n\
                      message X {}\nservice Two{\n  rpc Put(X) returns (X);\n}\n";
        assert_eq!(
            proto_methods(source),
            ["/a.b.v1.One/Get", "/a.b.v1.One/Watch", "/a.b.v1.Two/Put"]
        );
    }

    #[test]
    fn allowed_means_past_authentication_authorisation_and_routing() {
        let status = |code| Err(tonic::Status::new(code, "x"));
        assert!(Expected::Allowed.matches(&Ok(())));
        assert!(Expected::Allowed.matches(&status(Code::NotFound)));
        assert!(Expected::Allowed.matches(&status(Code::InvalidArgument)));
        for code in [
            Code::Unauthenticated,
            Code::PermissionDenied,
            Code::Unimplemented,
        ] {
            assert!(!Expected::Allowed.matches(&status(code)), "{code:?}");
        }
        assert!(Expected::Unauthenticated.matches(&status(Code::Unauthenticated)));
        assert!(!Expected::Unauthenticated.matches(&status(Code::PermissionDenied)));
        assert!(!Expected::Unauthenticated.matches(&Ok(())));
        assert!(Expected::PermissionDenied.matches(&status(Code::PermissionDenied)));
        assert!(!Expected::PermissionDenied.matches(&status(Code::NotFound)));
    }
}
