//! The command-line flags every daemon's `serve` subcommand shares.

use std::path::PathBuf;
use std::time::Duration;

use crate::auth::{AuthPolicy, PolicyError, TokenError, TokenFile};
use crate::endpoint::Endpoint;
use crate::telemetry::LogFormat;
use crate::tls::{ServerTls, TlsError};

/// Default gRPC listen address.
pub const DEFAULT_LISTEN: &str = "tcp://127.0.0.1:50051";

/// Serving flags, each also read from an environment variable.
///
/// Daemons embed it with `#[command(flatten)]`; tests parse it from an
/// argument list with [`clap::Parser::try_parse_from`].
#[derive(Debug, Clone, PartialEq, Eq, clap::Parser)]
#[command(about = "Serve gRPC")]
pub struct ServeArgs {
    /// gRPC listen address: HOST:PORT, tcp://HOST:PORT or unix:///PATH (port 0 picks a free port).
    #[arg(long, env = "NEPHRITE_LISTEN", default_value = DEFAULT_LISTEN, value_name = "ENDPOINT")]
    pub listen: Endpoint,

    /// Serve Prometheus metrics on GET /metrics at this address (HOST:PORT or unix:///PATH).
    #[arg(long, env = "NEPHRITE_METRICS_LISTEN", value_name = "ENDPOINT")]
    pub metrics_listen: Option<Endpoint>,

    /// Serve TLS with this PEM certificate chain (needs --tls-key).
    #[arg(
        long,
        env = "NEPHRITE_TLS_CERT",
        value_name = "PEM",
        requires = "tls_key"
    )]
    pub tls_cert: Option<PathBuf>,

    /// PEM private key of --tls-cert.
    #[arg(
        long,
        env = "NEPHRITE_TLS_KEY",
        value_name = "PEM",
        requires = "tls_cert"
    )]
    pub tls_key: Option<PathBuf>,

    /// Require client certificates signed by this PEM CA (mutual TLS; needs --tls-cert).
    #[arg(
        long,
        env = "NEPHRITE_TLS_CLIENT_CA",
        value_name = "PEM",
        requires = "tls_cert"
    )]
    pub tls_client_ca: Option<PathBuf>,

    /// Who may call what: a YAML file of roles (method patterns), identities' roles and the
    /// `default_roles` of identities it does not name (none when absent). Without it, the
    /// daemon's own role table applies and every authenticated caller gets the daemon's default
    /// roles (a daemon without a table: every method).
    #[arg(long, env = "NEPHRITE_AUTH_POLICY", value_name = "YAML")]
    pub auth_policy: Option<PathBuf>,

    /// Accept bearer tokens from this file (TOKEN,IDENTITY per line), re-read when it changes.
    #[arg(long, env = "NEPHRITE_AUTH_TOKENS", value_name = "FILE")]
    pub auth_tokens: Option<PathBuf>,

    /// Serve a non-loopback address without authentication (no --auth-tokens or
    /// --tls-client-ca). Refused otherwise.
    #[arg(long, env = "NEPHRITE_INSECURE")]
    pub insecure: bool,

    /// Calls in progress at once in this daemon (streams count until they end); more answer
    /// RESOURCE_EXHAUSTED. Health checks are not counted.
    #[arg(long, env = "NEPHRITE_MAX_CALLS", default_value_t = crate::call_limits::DEFAULT_MAX_CALLS, value_name = "N")]
    pub max_calls: usize,

    /// Concurrent HTTP/2 streams one connection may open.
    #[arg(long, env = "NEPHRITE_MAX_STREAMS_PER_CONNECTION", default_value_t = crate::call_limits::DEFAULT_MAX_STREAMS_PER_CONNECTION, value_name = "N")]
    pub max_streams_per_connection: u32,

    /// Time in-flight requests get to finish after SIGTERM, e.g. 10s, 500ms, 2m.
    #[arg(
        long,
        env = "NEPHRITE_SHUTDOWN_GRACE",
        default_value = "10s",
        value_parser = parse_duration,
        value_name = "DURATION"
    )]
    pub shutdown_grace: Duration,

    /// Log line format.
    #[arg(long, env = "NEPHRITE_LOG_FORMAT", value_enum, default_value_t = LogFormat::Text)]
    pub log_format: LogFormat,
}

impl ServeArgs {
    /// The server TLS material named by `--tls-cert`, `--tls-key` and
    /// `--tls-client-ca`, loaded and checked; `None` for plaintext.
    ///
    /// # Errors
    /// When a file cannot be read or is invalid, or only one of certificate
    /// and key is set (possible when the struct is built by hand).
    pub fn server_tls(&self) -> Result<Option<ServerTls>, TlsError> {
        match (&self.tls_cert, &self.tls_key) {
            (None, None) => Ok(None),
            (Some(_), None) => Err(TlsError::Incomplete {
                present: "certificate",
            }),
            (None, Some(_)) => Err(TlsError::Incomplete { present: "key" }),
            (Some(cert), Some(key)) => {
                let tls = ServerTls::from_files(cert, key)?;
                match &self.tls_client_ca {
                    Some(ca) => tls.with_client_ca_file(ca).map(Some),
                    None => Ok(Some(tls)),
                }
            }
        }
    }
}

impl ServeArgs {
    /// The policy calls are checked against: `base` (the daemon's role table and default
    /// roles) with `--auth-policy` merged onto it, or `base` alone without the flag.
    ///
    /// # Errors
    /// When the file cannot be read or is not a valid policy.
    pub fn auth_policy(&self, base: AuthPolicy) -> Result<AuthPolicy, PolicyError> {
        match self.auth_policy.as_deref() {
            Some(path) => base.merge_file(path),
            None => Ok(base),
        }
    }

    /// The token file of `--auth-tokens`, loaded.
    ///
    /// # Errors
    /// When it cannot be read or a line is invalid.
    pub fn token_file(&self) -> Result<Option<TokenFile>, TokenError> {
        self.auth_tokens.as_deref().map(TokenFile::load).transpose()
    }
}

/// A non-negative duration in jiff's friendly format (`10s`, `500ms`, `2m`, `1h 30m`) or
/// ISO 8601 (`PT10S`).
fn parse_duration(text: &str) -> Result<Duration, String> {
    let signed: jiff::SignedDuration = text
        .trim()
        .parse()
        .map_err(|e| format!("invalid duration {text:?} (expected e.g. 10s, 500ms, 2m): {e}"))?;
    Duration::try_from(signed).map_err(|_| format!("invalid duration {text:?}: it is negative"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::{CommandFactory as _, Parser as _};

    #[test]
    fn defaults() {
        let args = ServeArgs::try_parse_from(["serve"]).expect("defaults parse");
        assert_eq!(args.listen, DEFAULT_LISTEN.parse().expect("default"));
        assert_eq!(args.metrics_listen, None);
        assert_eq!(args.shutdown_grace, Duration::from_secs(10));
        assert_eq!(args.log_format, LogFormat::Text);
        assert!(args.server_tls().expect("no tls").is_none());
    }

    #[test]
    fn every_flag_parses_and_has_an_env_var() {
        let args = ServeArgs::try_parse_from([
            "serve",
            "--listen",
            "unix:///run/d.sock",
            "--metrics-listen",
            "127.0.0.1:0",
            "--tls-cert",
            "c.pem",
            "--tls-key",
            "k.pem",
            "--tls-client-ca",
            "ca.pem",
            "--shutdown-grace",
            "1500ms",
            "--log-format",
            "json",
        ])
        .expect("parse");
        assert_eq!(args.listen, Endpoint::unix("/run/d.sock"));
        assert_eq!(args.shutdown_grace, Duration::from_millis(1500));
        assert_eq!(args.log_format, LogFormat::Json);
        assert_eq!(args.tls_client_ca, Some(PathBuf::from("ca.pem")));

        for arg in ServeArgs::command().get_arguments() {
            if arg.get_id() == "help" {
                continue;
            }
            let env = arg
                .get_env()
                .unwrap_or_else(|| panic!("{} has no env", arg.get_id()));
            assert!(env.to_string_lossy().starts_with("NEPHRITE_"));
        }
    }

    #[test]
    fn bad_values_are_rejected_with_the_input() {
        let err =
            ServeArgs::try_parse_from(["serve", "--listen", "ftp://x:1"]).expect_err("scheme");
        assert!(err.to_string().contains("ftp://x:1"), "{err}");
        let err = ServeArgs::try_parse_from(["serve", "--shutdown-grace", "10 parsecs"])
            .expect_err("unit");
        assert!(err.to_string().contains("parsecs"), "{err}");
        // a key without a certificate
        assert!(ServeArgs::try_parse_from(["serve", "--tls-key", "k.pem"]).is_err());
    }

    #[test]
    fn durations() {
        assert_eq!(parse_duration("10s"), Ok(Duration::from_secs(10)));
        assert_eq!(parse_duration("1h 30m"), Ok(Duration::from_secs(5400)));
        assert!(parse_duration("10").is_err(), "a unit is required");
        assert_eq!(parse_duration("250ms"), Ok(Duration::from_millis(250)));
        assert_eq!(parse_duration("1.5s"), Ok(Duration::from_millis(1500)));
        assert_eq!(parse_duration("2m"), Ok(Duration::from_secs(120)));
        assert!(parse_duration("").is_err());
        assert!(parse_duration("-1s").is_err());
    }
}
