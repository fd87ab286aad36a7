use prometheus_client::metrics::gauge::Gauge;

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
    registry
}

#[test]
fn openmetrics_as_prometheus_client_writes_it() {
    let text = encode(&registry()).unwrap();
    assert!(
        text.contains("# TYPE grpc_server_handled counter\n"),
        "{text}"
    );
    assert!(
        text.contains("grpc_server_handled_total{grpc_service=\"nephrite.daemon.v1.Daemon\",grpc_method=\"GetInfo\",grpc_code=\"OK\"} 2\n"),
        "{text}"
    );
    assert!(
        text.contains("# TYPE grpc_server_handling_seconds histogram\n"),
        "{text}"
    );
    assert!(text.ends_with("# EOF\n"), "{text}");
}

#[test]
fn plain_help_registers() {
    let mut registry = registry();
    let ports = Gauge::<i64>::default();
    ports.set(7);
    register_checked(&mut registry, "ports", "Ports with a pipeline", ports).unwrap();
    let text = encode(&registry).unwrap();
    assert!(
        text.contains("# HELP ports Ports with a pipeline.\n# TYPE ports gauge\nports 7\n"),
        "{text}"
    );
}

#[test]
fn help_that_would_break_the_exposition_is_refused_naming_the_metric() {
    for (help, found) in [
        ("under C:\\temp", '\\'),
        ("say \"hi\"", '"'),
        ("two\nlines", '\n'),
    ] {
        let mut registry = Registry::default();
        let err = register_checked(&mut registry, "requests", help, Gauge::<i64>::default())
            .expect_err(help);
        assert_eq!(
            err,
            InvalidHelp {
                metric: "requests".into(),
                found
            }
        );
        assert!(err.to_string().contains("\"requests\""), "{err}");
        assert!(
            !encode(&registry).unwrap().contains("requests"),
            "nothing registered"
        );
    }
}
