//! Logging set-up shared by every daemon.

use tracing_subscriber::EnvFilter;
use tracing_subscriber::util::SubscriberInitExt as _;

/// Log line format, chosen with `--log-format`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum LogFormat {
    /// Human-readable lines.
    #[default]
    Text,
    /// One JSON object per line, for log collectors.
    Json,
}

/// Why logging could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum TelemetryError {
    /// The filter directive is not valid `RUST_LOG` syntax.
    #[error("invalid log filter {filter:?}: {source}")]
    Filter {
        /// The directive given.
        filter: String,
        /// The parser's error.
        source: tracing_subscriber::filter::ParseError,
    },
}

/// The filter used when none is given.
pub const DEFAULT_LOG_FILTER: &str = "info";

/// Install the global tracing subscriber: `format` lines to stderr, filtered
/// by `filter` (`RUST_LOG` syntax; [`DEFAULT_LOG_FILTER`] when `None`).
/// Text lines are coloured only when stderr is a terminal.
///
/// This function does not read the environment: a daemon's `main` passes
/// `std::env::var("RUST_LOG").ok().as_deref()`. Calling it again (as tests
/// do) leaves the first subscriber in place and returns `Ok(false)`.
///
/// # Errors
/// When `filter` does not parse.
pub fn init_tracing(format: LogFormat, filter: Option<&str>) -> Result<bool, TelemetryError> {
    let directive = filter
        .map(str::trim)
        .filter(|f| !f.is_empty())
        .unwrap_or(DEFAULT_LOG_FILTER);
    let env_filter =
        EnvFilter::builder()
            .parse(directive)
            .map_err(|source| TelemetryError::Filter {
                filter: directive.to_owned(),
                source,
            })?;
    // Colours only for a person at a terminal: journald, kubectl logs and files get plain text.
    let builder = tracing_subscriber::fmt()
        .with_env_filter(env_filter)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_writer(std::io::stderr);
    let installed = match format {
        LogFormat::Text => builder.finish().try_init().is_ok(),
        LogFormat::Json => builder
            .json()
            .flatten_event(true)
            .with_current_span(true)
            .finish()
            .try_init()
            .is_ok(),
    };
    Ok(installed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_filter_is_reported_and_reinit_is_harmless() {
        let err = init_tracing(LogFormat::Text, Some("foo=notalevel")).expect_err("bad");
        assert!(err.to_string().contains("foo=notalevel"), "{err}");
        let _ = init_tracing(LogFormat::Json, None).expect("ok");
        assert!(!init_tracing(LogFormat::Text, Some("debug")).expect("ok"));
    }
}
