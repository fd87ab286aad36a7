//! Prometheus metrics: the gRPC request metrics every daemon records and the
//! `/metrics` endpoint that exposes a daemon's whole registry.

use std::sync::Arc;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

use crate::listen::{BoundListener, BoundSocket};

/// Content type of the OpenMetrics text format, served to scrapers that ask for it.
pub const OPENMETRICS_CONTENT_TYPE: &str =
    "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// Content type of the Prometheus text exposition format (0.0.4), served by default.
pub const PROMETHEUS_TEXT_CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// The two text formats `/metrics` can answer in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MetricsFormat {
    /// The Prometheus text exposition format 0.0.4: what every Prometheus-compatible scraper
    /// reads. The default.
    PrometheusText,
    /// OpenMetrics 1.0 text, for scrapers whose `Accept` header names
    /// `application/openmetrics-text` (Prometheus itself does).
    OpenMetrics,
}

impl MetricsFormat {
    /// Picks the format for a request's `Accept` header: OpenMetrics when it is named,
    /// the Prometheus text format otherwise.
    pub fn negotiate(accept: Option<&str>) -> Self {
        let wants_openmetrics = accept.is_some_and(|accept| {
            accept
                .split(',')
                .any(|range| range.trim().starts_with("application/openmetrics-text"))
        });
        if wants_openmetrics {
            MetricsFormat::OpenMetrics
        } else {
            MetricsFormat::PrometheusText
        }
    }

    /// The `Content-Type` of a response in this format.
    pub fn content_type(self) -> &'static str {
        match self {
            MetricsFormat::PrometheusText => PROMETHEUS_TEXT_CONTENT_TYPE,
            MetricsFormat::OpenMetrics => OPENMETRICS_CONTENT_TYPE,
        }
    }
}

/// Labels of the gRPC request metrics, named as in go-grpc-prometheus.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct GrpcLabels {
    pub(crate) grpc_service: String,
    pub(crate) grpc_method: String,
    pub(crate) grpc_code: String,
}

type HistogramConstructor = fn() -> Histogram;

/// Request count and latency by service, method and status code.
#[derive(Debug, Clone)]
pub(crate) struct GrpcMetrics {
    handled: Family<GrpcLabels, Counter>,
    handling_seconds: Family<GrpcLabels, Histogram, HistogramConstructor>,
}

fn latency_histogram() -> Histogram {
    // 1 ms .. ~33 s
    Histogram::new(exponential_buckets(0.001, 2.0, 16))
}

impl GrpcMetrics {
    /// Create the metrics and register them in `registry` as
    /// `grpc_server_handled_total` and `grpc_server_handling_seconds`.
    pub(crate) fn register(registry: &mut Registry) -> Self {
        let metrics = GrpcMetrics {
            handled: Family::default(),
            handling_seconds: Family::new_with_constructor(
                latency_histogram as HistogramConstructor,
            ),
        };
        registry.register(
            "grpc_server_handled",
            "gRPC requests completed, by service, method and status code",
            metrics.handled.clone(),
        );
        registry.register(
            "grpc_server_handling_seconds",
            "gRPC request duration until the last response byte, by service, method and status code",
            metrics.handling_seconds.clone(),
        );
        metrics
    }

    pub(crate) fn record(&self, labels: &GrpcLabels, seconds: f64) {
        self.handled.get_or_create(labels).inc();
        self.handling_seconds.get_or_create(labels).observe(seconds);
    }
}

/// Encode `registry` in `format`, as served on `/metrics`.
///
/// # Errors
/// Only if a metric's own encoder fails.
pub fn encode_metrics(
    registry: &Registry,
    format: MetricsFormat,
) -> Result<String, std::fmt::Error> {
    let mut raw = String::new();
    prometheus_client::encoding::text::encode(&mut raw, registry)?;
    let text = escape_help_text(&raw);
    Ok(match format {
        MetricsFormat::OpenMetrics => text,
        MetricsFormat::PrometheusText => openmetrics_to_prometheus_text(&text),
    })
}

/// prometheus-client writes HELP text verbatim, so a help string with a backslash (`C:\dir`) or a
/// line break makes the whole exposition unparsable. This escapes it as OpenMetrics requires
/// (`\\`, `\"`, `\n`); a line break shows up as HELP lines continued up to the `# TYPE` line
/// prometheus-client always writes right after HELP.
fn escape_help_text(openmetrics: &str) -> String {
    fn push_help(out: &mut String, head: &str, text: &str) {
        out.push_str(head);
        for c in text.chars() {
            match c {
                '\\' => out.push_str("\\\\"),
                '"' => out.push_str("\\\""),
                '\n' => out.push_str("\\n"),
                c => out.push(c),
            }
        }
        out.push('\n');
    }
    let mut out = String::with_capacity(openmetrics.len());
    // (`# HELP name `, the help text so far)
    let mut help: Option<(&str, String)> = None;
    for line in openmetrics.lines() {
        if let Some((_, text)) = help.as_mut()
            && !line.starts_with("# TYPE ")
        {
            text.push('\n');
            text.push_str(line);
            continue;
        }
        if let Some((head, text)) = help.take() {
            push_help(&mut out, head, &text);
        }
        if let Some(rest) = line.strip_prefix("# HELP ") {
            let split = rest
                .find(' ')
                .map_or(line.len(), |at| "# HELP ".len() + at + 1);
            let (head, text) = line.split_at(split);
            help = Some((head, text.to_owned()));
        } else {
            out.push_str(line);
            out.push('\n');
        }
    }
    if let Some((head, text)) = help {
        push_help(&mut out, head, &text);
    }
    out
}

/// Rewrites OpenMetrics text (as prometheus-client writes it) into the Prometheus text format
/// 0.0.4: counter families take their `_total` sample name, `info` and `stateset` families become
/// gauges, `_created` samples, `# UNIT` and `# EOF` lines and exemplars are dropped, and HELP
/// text loses the `\"` escape that 0.0.4 does not have.
fn openmetrics_to_prometheus_text(openmetrics: &str) -> String {
    let mut out = String::with_capacity(openmetrics.len());
    // HELP comes before TYPE, and its family name may change with the type: hold it back.
    let mut pending_help: Option<(&str, String)> = None;
    let mut counters: Vec<&str> = Vec::new();
    for line in openmetrics.lines() {
        if let Some(rest) = line.strip_prefix("# HELP ") {
            let (name, text) = rest.split_once(' ').unwrap_or((rest, ""));
            pending_help = Some((name, text.replace("\\\"", "\"")));
        } else if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (name, kind) = rest.split_once(' ').unwrap_or((rest, "untyped"));
            let (family, kind) = match kind {
                "counter" => {
                    counters.push(name);
                    (format!("{name}_total"), "counter")
                }
                "info" => (format!("{name}_info"), "gauge"),
                "stateset" => (name.to_owned(), "gauge"),
                "gauge" | "histogram" | "summary" => (name.to_owned(), kind),
                _ => (name.to_owned(), "untyped"),
            };
            if let Some((help_name, text)) = pending_help.take()
                && help_name == name
            {
                out.push_str(&format!("# HELP {family} {text}\n"));
            }
            out.push_str(&format!("# TYPE {family} {kind}\n"));
        } else if line.starts_with('#') {
            // `# UNIT`, `# EOF`: OpenMetrics only.
            continue;
        } else {
            let sample = strip_exemplar(line);
            let sample_name = sample.split(['{', ' ']).next().unwrap_or_default();
            let created_of_counter = sample_name
                .strip_suffix("_created")
                .is_some_and(|family| counters.contains(&family));
            if !created_of_counter {
                out.push_str(sample);
                out.push('\n');
            }
        }
    }
    out
}

/// A sample line without its OpenMetrics exemplar (` # {labels} value`), which 0.0.4 lacks.
fn strip_exemplar(line: &str) -> &str {
    let mut in_quotes = false;
    let mut escaped = false;
    for (i, c) in line.char_indices() {
        match c {
            _ if escaped => escaped = false,
            '\\' if in_quotes => escaped = true,
            '"' => in_quotes = !in_quotes,
            '#' if !in_quotes => return line[..i].trim_end(),
            _ => {}
        }
    }
    line
}

/// Serve `GET /metrics` from `registry` on `listener` until `stop` resolves.
pub(crate) async fn serve_metrics(
    listener: BoundListener,
    registry: Arc<Registry>,
    stop: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    use axum::http::{HeaderMap, StatusCode, header};
    use axum::routing::get;

    let app = axum::Router::new().route(
        "/metrics",
        get(move |headers: HeaderMap| {
            let registry = Arc::clone(&registry);
            async move {
                let accept = headers
                    .get(header::ACCEPT)
                    .and_then(|value| value.to_str().ok());
                let format = MetricsFormat::negotiate(accept);
                match encode_metrics(&registry, format) {
                    Ok(text) => (
                        StatusCode::OK,
                        [(header::CONTENT_TYPE, format.content_type())],
                        text,
                    ),
                    Err(_) => (
                        StatusCode::INTERNAL_SERVER_ERROR,
                        [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
                        "cannot encode metrics\n".to_owned(),
                    ),
                }
            }
        }),
    );
    match listener.socket {
        BoundSocket::Tcp(tcp) => axum::serve(tcp, app).with_graceful_shutdown(stop).await,
        BoundSocket::Unix(unix, _guard) => {
            axum::serve(unix, app).with_graceful_shutdown(stop).await
        }
    }
}

#[cfg(test)]
mod tests {
    use prometheus_client::metrics::gauge::Gauge;
    use prometheus_client::metrics::info::Info;

    use super::*;

    fn registry() -> Registry {
        let mut registry = Registry::default();
        let metrics = GrpcMetrics::register(&mut registry);
        let labels = GrpcLabels {
            grpc_service: "nephrite.daemon.v1.Daemon".into(),
            grpc_method: "GetInfo".into(),
            grpc_code: "OK".into(),
        };
        metrics.record(&labels, 0.003);
        metrics.record(&labels, 0.004);
        let ports = Gauge::<i64>::default();
        ports.set(7);
        registry.register("ports", "Ports with a \"pipeline\"", ports);
        registry.register(
            "build",
            "Build facts",
            Info::new(vec![("version", "0.1.0")]),
        );
        registry
    }

    #[test]
    fn negotiation_prefers_prometheus_text_unless_openmetrics_is_asked_for() {
        use MetricsFormat::*;
        assert_eq!(MetricsFormat::negotiate(None), PrometheusText);
        assert_eq!(MetricsFormat::negotiate(Some("*/*")), PrometheusText);
        assert_eq!(
            MetricsFormat::negotiate(Some("text/plain;version=0.0.4")),
            PrometheusText
        );
        let prometheus = "application/openmetrics-text;version=1.0.0;q=0.5,text/plain;version=0.0.4;q=0.4,*/*;q=0.1";
        assert_eq!(MetricsFormat::negotiate(Some(prometheus)), OpenMetrics);
    }

    #[test]
    fn prometheus_text_has_no_openmetrics_only_syntax() {
        let text = encode_metrics(&registry(), MetricsFormat::PrometheusText).unwrap();
        assert!(
            text.contains("# TYPE grpc_server_handled_total counter\n"),
            "{text}"
        );
        assert!(
            text.contains("# HELP grpc_server_handled_total gRPC requests"),
            "{text}"
        );
        assert!(text.contains("grpc_server_handled_total{grpc_service=\"nephrite.daemon.v1.Daemon\",grpc_method=\"GetInfo\",grpc_code=\"OK\"} 2\n"), "{text}");
        assert!(
            text.contains("# TYPE grpc_server_handling_seconds histogram\n"),
            "{text}"
        );
        assert!(
            text.contains("grpc_server_handling_seconds_count{"),
            "{text}"
        );
        assert!(
            text.contains("# HELP ports Ports with a \"pipeline\".\n"),
            "{text}"
        );
        assert!(text.contains("# TYPE ports gauge\nports 7\n"), "{text}");
        assert!(
            text.contains("# TYPE build_info gauge\nbuild_info{version=\"0.1.0\"} 1\n"),
            "{text}"
        );
        assert!(!text.contains("# EOF"), "{text}");
        assert_valid_prometheus_text(&text);
    }

    #[test]
    fn openmetrics_is_passed_through() {
        let text = encode_metrics(&registry(), MetricsFormat::OpenMetrics).unwrap();
        assert!(
            text.contains("# TYPE grpc_server_handled counter\n"),
            "{text}"
        );
        assert!(text.ends_with("# EOF\n"), "{text}");
    }

    /// Checks the Prometheus text format 0.0.4 line by line, as Prometheus' own parser would:
    /// HELP escapes are only `\\` and `\n`, label values are quoted with `\\`, `\"`, `\n`
    /// escapes, and every sample belongs to the family its TYPE line announced.
    fn assert_valid_prometheus_text(text: &str) {
        let mut family = "";
        for line in text.lines() {
            if let Some(rest) = line.strip_prefix("# HELP ") {
                let (_, help) = rest.split_once(' ').unwrap_or((rest, ""));
                let mut chars = help.chars();
                while let Some(c) = chars.next() {
                    if c == '\\' {
                        let next = chars.next();
                        assert!(
                            matches!(next, Some('\\' | 'n')),
                            "bad HELP escape in {line:?}"
                        );
                    }
                }
            } else if let Some(rest) = line.strip_prefix("# TYPE ") {
                family = rest.split(' ').next().unwrap();
            } else {
                assert!(!line.starts_with('#'), "unexpected comment {line:?}");
                assert!(line.starts_with(family), "{line:?} outside family {family}");
                let after_name = &line[line.find(['{', ' ']).expect("a value")..];
                let value = match after_name.strip_prefix('{') {
                    None => after_name,
                    Some(labels) => {
                        let mut rest = labels;
                        loop {
                            let (_, after) = rest.split_once("=\"").expect("label=\"value\"");
                            let mut chars = after.char_indices();
                            let end = loop {
                                match chars.next().expect("closing quote") {
                                    (_, '\\') => {
                                        let escaped = chars.next().map(|(_, c)| c);
                                        assert!(
                                            matches!(escaped, Some('\\' | '"' | 'n')),
                                            "{line:?}"
                                        );
                                    }
                                    (at, '"') => break at,
                                    _ => {}
                                }
                            };
                            rest = &after[end + 1..];
                            match rest.strip_prefix(',') {
                                Some(more) => rest = more,
                                None => break,
                            }
                        }
                        rest.strip_prefix('}').expect("closing brace")
                    }
                };
                let value = value.strip_prefix(' ').expect("space before the value");
                assert!(value.parse::<f64>().is_ok(), "value {value:?} in {line:?}");
            }
        }
    }

    #[test]
    fn help_with_backslashes_quotes_and_line_breaks_stays_parsable() {
        #[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
        struct PathLabel {
            path: String,
        }
        let mut registry = registry();
        let requests = Family::<PathLabel, Counter>::default();
        for path in [
            "/a # b",
            "x}y",
            "say \"hi\"",
            "back\\slash",
            "two\nlines",
            "{#}",
        ] {
            requests
                .get_or_create(&PathLabel { path: path.into() })
                .inc();
        }
        registry.register(
            "requests",
            "Requests under C:\\temp, \"quoted\"\nsecond line",
            requests,
        );
        let text = encode_metrics(&registry, MetricsFormat::PrometheusText).unwrap();
        assert_valid_prometheus_text(&text);
        assert!(
            text.contains(
                "# HELP requests_total Requests under C:\\\\temp, \"quoted\"\\nsecond line.\n# TYPE requests_total counter\n"
            ),
            "{text}"
        );
        assert!(
            text.contains("requests_total{path=\"/a # b\"} 1\n"),
            "{text}"
        );
        assert!(text.contains("requests_total{path=\"x}y\"} 1\n"), "{text}");
        assert!(
            text.contains("requests_total{path=\"say \\\"hi\\\"\"} 1\n"),
            "{text}"
        );
        assert!(
            text.contains("requests_total{path=\"back\\\\slash\"} 1\n"),
            "{text}"
        );
        assert!(
            text.contains("requests_total{path=\"two\\nlines\"} 1\n"),
            "{text}"
        );

        let openmetrics = encode_metrics(&registry, MetricsFormat::OpenMetrics).unwrap();
        assert!(
            openmetrics.contains(
                "# HELP requests Requests under C:\\\\temp, \\\"quoted\\\"\\nsecond line.\n# TYPE requests counter\n"
            ),
            "{openmetrics}"
        );
        assert!(openmetrics.ends_with("# EOF\n"), "{openmetrics}");
    }

    #[test]
    fn exemplars_and_counter_created_samples_are_dropped() {
        let openmetrics = "# HELP requests Requests.\n# TYPE requests counter\nrequests_total{path=\"/a # b\"} 3 # {trace_id=\"x\"} 1.0\nrequests_created 1.7e9\n# EOF\n";
        assert_eq!(
            openmetrics_to_prometheus_text(openmetrics),
            "# HELP requests_total Requests.\n# TYPE requests_total counter\nrequests_total{path=\"/a # b\"} 3\n"
        );
    }
}
