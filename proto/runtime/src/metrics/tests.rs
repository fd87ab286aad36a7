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

#[tokio::test]
async fn a_metrics_server_alone_serves_its_registry_until_stopped() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    let served = Counter::<u64>::default();
    let mut registry = Registry::default();
    registry.register("widgets_served", "Widgets served", served.clone());
    served.inc_by(3);
    let server = MetricsServer::bind(&"127.0.0.1:0".parse().unwrap(), registry)
        .await
        .unwrap();
    let Endpoint::Tcp { port, .. } = server.local_endpoint().clone() else {
        panic!("{:?}", server.local_endpoint());
    };
    assert_ne!(port, 0, "the port the OS picked");
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let task = tokio::spawn(server.serve(async move {
        let _ = stopped.await;
    }));

    let get = |path: &'static str| async move {
        let mut stream = tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .unwrap();
        let request = format!("GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
        stream.write_all(request.as_bytes()).await.unwrap();
        let mut reply = String::new();
        stream.read_to_string(&mut reply).await.unwrap();
        reply
    };
    let reply = get("/metrics").await;
    assert!(reply.starts_with("HTTP/1.1 200 "), "{reply}");
    assert!(
        reply.contains(&format!("content-type: {OPENMETRICS_CONTENT_TYPE}")),
        "{reply}"
    );
    assert!(reply.contains("\nwidgets_served_total 3\n"), "{reply}");
    served.inc();
    assert!(get("/metrics").await.contains("widgets_served_total 4\n"));
    assert!(get("/other").await.starts_with("HTTP/1.1 404 "));

    stop.send(()).unwrap();
    tokio::time::timeout(std::time::Duration::from_secs(5), task)
        .await
        .expect("stops when told")
        .unwrap()
        .unwrap();
    assert!(
        tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .is_err(),
        "no longer listening"
    );
}
