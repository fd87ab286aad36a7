//! Gateway API through a real HAProxy 2.6 (Debian): the `haproxy` driver renders an HTTPRoute's
//! host, path and header matches, weighted backends and redirect, and HAProxy answers as the
//! route says.

mod support;

use std::path::Path;

use bytes::Bytes;
use http::Request;
use http_body_util::Empty;
use nephrite_kuryr_l7::haproxy::{Haproxy, HaproxySettings};
use nephrite_kuryr_l7::source::{Snapshot, read_file};
use nephrite_l7::Options;
use nephrite_test_services::{Tool, tool};
use support::*;

const ROUTE: &str = "\
apiVersion: gateway.networking.k8s.io/v1
kind: GatewayClass
metadata: {name: kuryr}
spec: {controllerName: kuryr.nephrite.io/l7}
---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: web, namespace: ns}
spec:
  gatewayClassName: kuryr
  listeners: [{name: http, port: 80, protocol: HTTP}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: shop, namespace: ns}
spec:
  parentRefs: [{name: web}]
  hostnames: [shop.example.com]
  rules:
  - matches: [{path: {type: PathPrefix, value: /cart}, headers: [{name: x-canary, value: 'yes'}]}]
    backendRefs: [{name: green, port: 80}]
  - matches: [{path: {type: PathPrefix, value: /cart}}]
    backendRefs: [{name: blue, port: 80, weight: 1}, {name: green, port: 80, weight: 1}]
  - matches: [{path: {type: RegularExpression, value: '/item/[0-9]+'}}]
    backendRefs: [{name: blue, port: 80}]
  - matches: [{path: {type: Exact, value: /old}}]
    filters: [{type: RequestRedirect, requestRedirect: {scheme: https, statusCode: 301}}]
";

#[tokio::test]
async fn an_httproute_through_haproxy_matches_splits_and_redirects_as_it_says() {
    let haproxy = match tool(Tool::Haproxy) {
        Ok(path) => path,
        Err(e) => {
            e.skip("an_httproute_through_haproxy_matches_splits_and_redirects_as_it_says");
            return;
        }
    };
    let blue = echo("blue").await;
    let green = echo("green").await;
    let yaml = format!(
        "{}{}{ROUTE}",
        service_yaml("ns", "blue", &[blue]),
        service_yaml("ns", "green", &[green])
    );
    let mut objects = Vec::new();
    let mut errors = Vec::new();
    read_file(Path::new("gateway.yaml"), &yaml, &mut objects, &mut errors);
    assert!(errors.is_empty(), "{errors:?}");
    let snapshot = Snapshot::build(&objects, errors, &Options::default());
    assert!(
        snapshot.translation.rejections.is_empty() && snapshot.translation.warnings.is_empty(),
        "{:?}",
        snapshot.translation
    );
    let work = tempfile::tempdir().unwrap();
    let settings = HaproxySettings {
        binary: haproxy,
        listen: dead_address(),
        listen_tls: None,
        dir: work.path().to_owned(),
        default_certificate: None,
    };
    let http = settings.listen;
    let driver = Haproxy::start(settings, &snapshot).await.unwrap();
    wait_for_answer(http, "shop.example.com", "/cart/1", |r| r.status == 200).await;

    let canary = send(
        http,
        Request::get("/cart/1")
            .header("host", "shop.example.com")
            .header("x-canary", "yes")
            .body(Empty::<Bytes>::new())
            .unwrap(),
    )
    .await;
    assert!(canary.body.starts_with("green"), "{}", canary.body);
    let mut seen = std::collections::BTreeSet::new();
    for _ in 0..40 {
        let reply = get(http, "shop.example.com", "/cart/1").await;
        assert_eq!(reply.status, 200);
        seen.insert(reply.body.split(' ').next().unwrap_or_default().to_owned());
    }
    assert_eq!(seen.into_iter().collect::<Vec<_>>(), ["blue", "green"]);
    let item = get(http, "shop.example.com", "/item/42").await;
    assert!(item.body.starts_with("blue"), "{}", item.body);
    assert_eq!(get(http, "shop.example.com", "/item/x").await.status, 404);
    let redirect = get(http, "shop.example.com", "/old").await;
    assert_eq!(redirect.status, 301);
    assert_eq!(
        redirect.headers["location"].to_str().unwrap(),
        "https://shop.example.com/old"
    );
    assert_eq!(get(http, "shop.example.com", "/cartoon").await.status, 404);
    assert_eq!(get(http, "other.example.com", "/cart/1").await.status, 404);
    let config = std::fs::read_to_string(work.path().join("haproxy.cfg")).unwrap();
    assert!(config.contains("gateway:ns/shop/1"), "{config}");
    driver.stop().await;
}
