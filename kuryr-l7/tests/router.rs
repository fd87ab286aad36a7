//! The router end to end on loopback: real backends, real HTTP.

mod support;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::Request;
use http_body_util::Empty;
use hyper_util::rt::TokioIo;
use nephrite_kuryr_l7::router::RouterConfig;
use nephrite_kuryr_l7::router::balance::Ejection;
use nephrite_kuryr_l7::source::snapshot_dir;
use nephrite_l7::Options;
use prometheus_client::registry::Registry;
use support::*;
use tokio::net::TcpStream;

fn ingress(name: &str, body: &str) -> String {
    format!(
        "apiVersion: networking.k8s.io/v1\nkind: Ingress\nmetadata: {{name: {name}, namespace: shop}}\nspec:\n{body}---\n"
    )
}

fn write(dir: &std::path::Path, file: &str, text: &str) {
    std::fs::write(dir.join(file), text).unwrap();
}

#[tokio::test]
async fn routes_by_host_and_path_with_404_and_default_backend() {
    let (web, api) = (echo("web").await, echo("api").await);
    let dir = tempfile::tempdir().unwrap();
    write(
        dir.path(),
        "services.yaml",
        &format!(
            "{}{}",
            service_yaml("shop", "web", &[web]),
            service_yaml("shop", "api", &[api])
        ),
    );
    write(
        dir.path(),
        "ingress.yaml",
        &ingress(
            "shop",
            "  rules:\n  - host: shop.example.com\n    http:\n      paths:\n      - {path: /api, pathType: Prefix, backend: {service: {name: api, port: {number: 80}}}}\n      - {path: /, pathType: Prefix, backend: {service: {name: web, port: {name: http}}}}\n",
        ),
    );
    let (_router, http, _) = router(dir.path(), RouterConfig::default()).await;

    let reply = get(http, "Shop.Example.com:8080", "/api/items?id=1").await;
    assert_eq!(reply.status, 200);
    assert!(
        reply.body.starts_with("api path=/api/items?id=1 "),
        "{}",
        reply.body
    );
    assert!(
        get(http, "shop.example.com", "/apinae")
            .await
            .body
            .starts_with("web ")
    );
    assert_eq!(get(http, "other.example.com", "/").await.status, 404);

    write(
        dir.path(),
        "default.yaml",
        &ingress(
            "fallback",
            "  defaultBackend: {service: {name: web, port: {number: 80}}}\n",
        ),
    );
    let snapshot = snapshot_dir(dir.path(), &Options::default()).unwrap();
    _router.update(snapshot.table.clone());
    assert!(
        get(http, "other.example.com", "/")
            .await
            .body
            .starts_with("web ")
    );
}

#[tokio::test]
async fn forwards_the_original_target_with_x_forwarded_headers_and_passes_status_and_body() {
    let web = echo("web").await;
    let dir = tempfile::tempdir().unwrap();
    write(
        dir.path(),
        "all.yaml",
        &format!(
            "{}{}",
            service_yaml("shop", "web", &[web]),
            ingress(
                "shop",
                "  rules:\n  - http:\n      paths:\n      - {path: /b, pathType: Prefix, backend: {service: {name: web, port: {number: 80}}}}\n      - {path: /status, pathType: Prefix, backend: {service: {name: web, port: {number: 80}}}}\n"
            )
        ),
    );
    let (_router, http, _) = router(dir.path(), RouterConfig::default()).await;
    let reply = send(
        http,
        Request::get("/a/../b/%2F?q=%2F")
            .header("host", "h.example:81")
            .header("x-forwarded-for", "10.1.1.1")
            .body(Empty::<Bytes>::new())
            .unwrap(),
    )
    .await;
    assert_eq!(reply.status, 200);
    assert_eq!(
        reply.body,
        "web path=/a/../b/%2F?q=%2F xff=10.1.1.1, 127.0.0.1 proto=http xfh=h.example:81 host=h.example:81"
    );
    let reply = get(http, "h", "/status/418").await;
    assert_eq!(reply.status, 418);
    assert_eq!(reply.headers["x-backend"], "web");
    assert!(reply.body.starts_with("web path=/status/418"));
}

#[tokio::test]
async fn weighted_round_robin_follows_route_weights() {
    let (a1, a2, b) = (echo("a1").await, echo("a2").await, echo("b").await);
    let dir = tempfile::tempdir().unwrap();
    let route = "apiVersion: route.openshift.io/v1\nkind: Route\nmetadata: {name: r, namespace: shop}\nspec:\n  host: r.example.com\n  to: {kind: Service, name: a, weight: 3}\n  alternateBackends: [{kind: Service, name: b, weight: 1}]\n";
    write(
        dir.path(),
        "all.yaml",
        &format!(
            "{}{}{route}",
            service_yaml("shop", "a", &[a1, a2]),
            service_yaml("shop", "b", &[b])
        ),
    );
    let (_router, http, _) = router(dir.path(), RouterConfig::default()).await;
    let mut counts: HashMap<String, u32> = HashMap::new();
    for _ in 0..80 {
        let reply = get(http, "r.example.com", "/").await;
        *counts
            .entry(reply.headers["x-backend"].to_str().unwrap().to_owned())
            .or_default() += 1;
    }
    assert_eq!(counts["a1"], 30);
    assert_eq!(counts["a2"], 30);
    assert_eq!(counts["b"], 20);
}

#[tokio::test]
async fn missing_service_and_zero_weights_answer_503() {
    let dir = tempfile::tempdir().unwrap();
    let route = "apiVersion: route.openshift.io/v1\nkind: Route\nmetadata: {name: r, namespace: shop}\nspec:\n  host: zero.example.com\n  to: {kind: Service, name: web, weight: 0}\n---\n";
    write(
        dir.path(),
        "all.yaml",
        &format!(
            "{}{route}{}",
            service_yaml("shop", "web", &[echo("web").await]),
            ingress(
                "ghost",
                "  rules:\n  - host: ghost.example.com\n    http:\n      paths:\n      - {path: /, pathType: Prefix, backend: {service: {name: ghost, port: {number: 80}}}}\n"
            )
        ),
    );
    let (_router, http, _) = router(dir.path(), RouterConfig::default()).await;
    assert_eq!(get(http, "ghost.example.com", "/").await.status, 503);
    assert_eq!(get(http, "zero.example.com", "/").await.status, 503);
}

#[tokio::test]
async fn keep_alive_to_members_and_http10_members_that_close() {
    let old = http10("old").await;
    let dir = tempfile::tempdir().unwrap();
    write(
        dir.path(),
        "all.yaml",
        &format!(
            "{}{}",
            service_yaml("shop", "old", &[old]),
            ingress(
                "i",
                "  rules:\n  - http:\n      paths:\n      - {path: /, pathType: Prefix, backend: {service: {name: old, port: {number: 80}}}}\n"
            )
        ),
    );
    let (_router, http, _) = router(dir.path(), RouterConfig::default()).await;
    // One client connection, many requests; the member closes after each.
    let stream = TcpStream::connect(http).await.unwrap();
    let (mut sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .unwrap();
    tokio::spawn(connection);
    for _ in 0..5 {
        let request = Request::get("/")
            .header("host", "x")
            .body(Empty::<Bytes>::new())
            .unwrap();
        let reply = reply(sender.send_request(request).await.unwrap()).await;
        assert_eq!(reply.status, 200);
        assert_eq!(reply.body, "old http/1.0");
    }
}

/// One GET over a fresh h2c (prior knowledge) connection to `router`.
async fn h2c_get(router: std::net::SocketAddr, uri: &str) -> Reply {
    let stream = TcpStream::connect(router).await.unwrap();
    let (mut sender, connection) =
        hyper::client::conn::http2::handshake(executor(), TokioIo::new(stream))
            .await
            .unwrap();
    tokio::spawn(connection);
    let request = Request::get(uri).body(Empty::<Bytes>::new()).unwrap();
    reply(sender.send_request(request).await.unwrap()).await
}

#[tokio::test]
async fn h2c_with_prior_knowledge() {
    let web = echo("web").await;
    let dir = tempfile::tempdir().unwrap();
    write(
        dir.path(),
        "all.yaml",
        &format!(
            "{}{}",
            service_yaml("shop", "web", &[web]),
            ingress(
                "i",
                "  rules:\n  - host: h2.example.com\n    http:\n      paths:\n      - {path: /, pathType: Prefix, backend: {service: {name: web, port: {number: 80}}}}\n"
            )
        ),
    );
    let (_router, http, _) = router(dir.path(), RouterConfig::default()).await;
    let reply = h2c_get(http, "http://h2.example.com/x").await;
    assert_eq!(reply.status, 200);
    assert_eq!(
        reply.body,
        "web path=/x xff=127.0.0.1 proto=http xfh=h2.example.com host=h2.example.com"
    );
}

#[tokio::test]
async fn passive_ejection_takes_a_dead_member_out() {
    let (live, dead) = (echo("live").await, dead_address());
    let dir = everything_to(&[live, dead]);
    let config = RouterConfig {
        ejection: Ejection {
            eject_after: 2,
            eject_for: Duration::from_secs(60),
        },
        ..RouterConfig::default()
    };
    let (_router, http, _) = router(dir.path(), config).await;
    let mut failures = 0;
    for _ in 0..4 {
        match get(http, "x", "/").await.status {
            200 => {}
            502 => failures += 1,
            other => panic!("unexpected {other}"),
        }
    }
    assert_eq!(failures, 2, "two failures eject the dead member");
    for _ in 0..10 {
        assert_eq!(get(http, "x", "/").await.status, 200);
    }
}

#[tokio::test]
async fn in_flight_requests_finish_on_the_table_they_started_with() {
    let (old, new) = (echo("old").await, echo("new").await);
    let dir = tempfile::tempdir().unwrap();
    let to = |service: &str| {
        ingress(
            "i",
            &format!(
                "  rules:\n  - http:\n      paths:\n      - {{path: /, pathType: Prefix, backend: {{service: {{name: {service}, port: {{number: 80}}}}}}}}\n"
            ),
        )
    };
    write(
        dir.path(),
        "s.yaml",
        &format!(
            "{}{}",
            service_yaml("shop", "old", &[old]),
            service_yaml("shop", "new", &[new])
        ),
    );
    write(dir.path(), "i.yaml", &to("old"));
    let (router, http, _) = router(dir.path(), RouterConfig::default()).await;
    let slow = tokio::spawn(get(http, "x", "/slow"));
    tokio::time::sleep(Duration::from_millis(100)).await;
    write(dir.path(), "i.yaml", &to("new"));
    router.update(
        snapshot_dir(dir.path(), &Options::default())
            .unwrap()
            .table
            .clone(),
    );
    assert!(get(http, "x", "/").await.body.starts_with("new "));
    let slow = slow.await.unwrap();
    assert_eq!(slow.status, 200);
    assert!(slow.body.starts_with("old path=/slow"));
}

#[tokio::test]
async fn router_follows_a_watch_channel_of_tables() {
    let web = echo("web").await;
    let dir = tempfile::tempdir().unwrap();
    let (router, http, _) = router(dir.path(), RouterConfig::default()).await;
    assert_eq!(get(http, "x", "/").await.status, 404);
    let (sender, receiver) = tokio::sync::watch::channel(router.table());
    tokio::spawn(
        router
            .clone()
            .follow(receiver, |t: &Arc<nephrite_l7::RouteTable>| t.clone()),
    );
    write_everything_to(dir.path(), &[web]);
    sender
        .send(
            snapshot_dir(dir.path(), &Options::default())
                .unwrap()
                .table
                .clone(),
        )
        .unwrap();
    let mut status = 0;
    for _ in 0..50 {
        status = get(http, "x", "/").await.status;
        if status == 200 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(status, 200);
}

#[tokio::test]
async fn reject_and_redirect_policies_from_routes() {
    let web = echo("web").await;
    let dir = tempfile::tempdir().unwrap();
    let route = "apiVersion: route.openshift.io/v1\nkind: Route\nmetadata: {name: r, namespace: shop}\nspec:\n  host: secure.example.com\n  to: {kind: Service, name: web}\n  tls: {termination: edge, insecureEdgeTerminationPolicy: Redirect}\n";
    write(
        dir.path(),
        "all.yaml",
        &format!("{}{route}", service_yaml("shop", "web", &[web])),
    );
    let (_router, http, _) = router(dir.path(), RouterConfig::default()).await;
    let reply = get(http, "secure.example.com", "/pay?x=1").await;
    assert_eq!(reply.status, 302);
    assert_eq!(
        reply.headers["location"],
        "https://secure.example.com/pay?x=1"
    );
}

#[tokio::test]
async fn routing_conformance_cases() {
    let dir = tempfile::tempdir().unwrap();
    conformance::write_objects(dir.path()).await;
    let (_router, http, _) = router(dir.path(), RouterConfig::default()).await;
    conformance::check(http).await;
}

/// The value of `series` (name and labels as written) in the exposition of `registry`.
fn metric(registry: &Registry, series: &str) -> Option<f64> {
    let mut text = String::new();
    prometheus_client::encoding::text::encode(&mut text, registry).unwrap();
    text.lines()
        .find_map(|line| line.strip_prefix(series)?.strip_prefix(' ')?.parse().ok())
}

#[tokio::test]
async fn metrics_count_answers_by_pool_and_class_ejections_connections_and_tables() {
    let (live, dead, api) = (echo("live").await, dead_address(), echo("api").await);
    let dir = tempfile::tempdir().unwrap();
    let to = |service: &str| {
        ingress(
            "i",
            &format!(
                "  rules:\n  - host: shop.example.com\n    http:\n      paths:\n      - {{path: /, pathType: Prefix, backend: {{service: {{name: {service}, port: {{number: 80}}}}}}}}\n"
            ),
        )
    };
    write(
        dir.path(),
        "s.yaml",
        &format!(
            "{}{}",
            service_yaml("shop", "web", &[live, dead]),
            service_yaml("shop", "api", &[api])
        ),
    );
    write(dir.path(), "i.yaml", &to("web"));
    let config = RouterConfig {
        ejection: Ejection {
            eject_after: 2,
            eject_for: Duration::from_secs(60),
        },
        ..RouterConfig::default()
    };
    let (router, http, _) = router(dir.path(), config).await;
    let mut registry = Registry::default();
    router.register_metrics(&mut registry);
    let table = router.table();
    let pools: Vec<&String> = table.pools.keys().collect();
    let [web] = pools[..] else {
        panic!("one pool: {pools:?}");
    };
    let responses = |pool: &str, code: &str| {
        metric(
            &registry,
            &format!("kuryr_l7_router_responses_total{{pool=\"{pool}\",code=\"{code}\"}}"),
        )
    };
    assert_eq!(metric(&registry, "kuryr_l7_router_pools"), Some(1.0));
    assert_eq!(responses(web, "2xx"), None, "no series before an answer");

    let mut statuses = Vec::new();
    for _ in 0..4 {
        statuses.push(get(http, "shop.example.com", "/").await.status);
    }
    statuses.sort();
    assert_eq!(
        statuses,
        [200, 200, 502, 502],
        "the dead member fails twice"
    );
    assert_eq!(
        get(http, "shop.example.com", "/status/418").await.status,
        418
    );
    assert_eq!(get(http, "other.example.com", "/").await.status, 404);
    // One more over h2c, which hyper serves.
    assert_eq!(h2c_get(http, "http://shop.example.com/x").await.status, 200);

    assert_eq!(responses(web, "2xx"), Some(3.0));
    assert_eq!(responses(web, "4xx"), Some(1.0), "a member's 418");
    assert_eq!(responses(web, "5xx"), Some(2.0), "502 for the dead member");
    assert_eq!(responses("", "4xx"), Some(1.0), "404: no route, no pool");
    assert_eq!(
        metric(
            &registry,
            &format!("kuryr_l7_router_ejections_total{{pool=\"{web}\"}}")
        ),
        Some(1.0)
    );
    assert_eq!(
        metric(
            &registry,
            "kuryr_l7_router_connections_total{listener=\"http\"}"
        ),
        Some(7.0)
    );
    let open = || {
        metric(
            &registry,
            "kuryr_l7_router_open_connections{listener=\"http\"}",
        )
    };
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while open() != Some(0.0) {
        assert!(
            tokio::time::Instant::now() < deadline,
            "closed connections stay open: {:?}",
            open()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }

    write(dir.path(), "i.yaml", &to("api"));
    router.update(snapshot_dir(dir.path(), &Options::default()).unwrap().table);
    assert!(
        get(http, "shop.example.com", "/")
            .await
            .body
            .starts_with("api ")
    );
    assert_eq!(
        metric(&registry, "kuryr_l7_router_table_updates_total"),
        Some(1.0)
    );
    assert_eq!(metric(&registry, "kuryr_l7_router_pools"), Some(1.0));
    assert_eq!(
        responses(web, "2xx"),
        None,
        "a pool that left the table leaves the exposition"
    );
    let table = router.table();
    let api_pool = table.pools.keys().next().unwrap();
    assert_eq!(responses(api_pool, "2xx"), Some(1.0));
    assert_eq!(responses("", "4xx"), Some(1.0), "kept across versions");
}

/// Writes `all.yaml` into `dir`: Service `web` with `members` and an Ingress sending
/// everything to it.
fn write_everything_to(dir: &std::path::Path, members: &[std::net::SocketAddr]) {
    write(
        dir,
        "all.yaml",
        &format!(
            "{}{}",
            service_yaml("shop", "web", members),
            ingress(
                "i",
                "  rules:\n  - http:\n      paths:\n      - {path: /, pathType: Prefix, backend: {service: {name: web, port: {number: 80}}}}\n"
            )
        ),
    );
}

/// A directory holding [`write_everything_to`]'s file.
fn everything_to(members: &[std::net::SocketAddr]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    write_everything_to(dir.path(), members);
    dir
}

#[tokio::test]
async fn drain_stops_accepting_and_waits_for_requests_in_flight() {
    let (member, mut held, release) = held_member().await;
    let dir = everything_to(&[member]);
    let (router, http, _) = router(dir.path(), RouterConfig::default()).await;
    // An idle keep-alive connection: not waited for.
    let idle = TcpStream::connect(http).await.unwrap();
    let h1 = tokio::spawn(get(http, "x", "/one"));
    // An h2c connection the client keeps open after its request: the drain's GOAWAY ends it.
    let stream = TcpStream::connect(http).await.unwrap();
    let (mut sender, connection) =
        hyper::client::conn::http2::handshake(executor(), TokioIo::new(stream))
            .await
            .unwrap();
    let h2_connection = tokio::spawn(connection);
    let request = Request::get("http://x/two")
        .body(Empty::<Bytes>::new())
        .unwrap();
    let h2 = tokio::spawn(async move {
        let answer = reply(sender.send_request(request).await.unwrap()).await;
        (answer, sender)
    });
    held.recv().await.unwrap();
    held.recv().await.unwrap();

    let draining = router.clone();
    let drain = tokio::spawn(async move { draining.drain(Duration::from_secs(60)).await });
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while TcpStream::connect(http).await.is_ok() {
        assert!(tokio::time::Instant::now() < deadline, "still accepting");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert!(!drain.is_finished(), "two requests are in flight");

    release.add_permits(2);
    let (h1, (h2, _still_open)) = (h1.await.unwrap(), h2.await.unwrap());
    assert_eq!((h1.status, h1.body.as_str()), (200, "released"));
    assert_eq!(
        h1.headers["connection"], "close",
        "the connection ends with the answer"
    );
    assert_eq!((h2.status, h2.body.as_str()), (200, "released"));
    let left = tokio::time::timeout(Duration::from_secs(10), drain)
        .await
        .expect("the drain ends when the requests do")
        .unwrap();
    assert_eq!(left, 0, "a clean drain");
    tokio::time::timeout(Duration::from_secs(10), h2_connection)
        .await
        .expect("the router ended the idle h2c connection")
        .unwrap()
        .unwrap();
    drop(idle);
}

#[tokio::test]
async fn drain_gives_up_after_the_grace_period() {
    let (member, mut held, release) = held_member().await;
    let dir = everything_to(&[member]);
    let (router, http, _) = router(dir.path(), RouterConfig::default()).await;
    let request = tokio::spawn(get(http, "x", "/"));
    held.recv().await.unwrap();
    assert_eq!(
        router.drain(Duration::from_millis(200)).await,
        1,
        "one request cut"
    );
    release.add_permits(1);
    assert_eq!(request.await.unwrap().status, 200);
}
