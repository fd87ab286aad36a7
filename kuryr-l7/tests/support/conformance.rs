//! The routing conformance cases: one set of objects and the answer each request must get,
//! run against the embedded router (`tests/router.rs`) and against HAProxy driven by the
//! `haproxy` driver (`tests/haproxy.rs`).

use std::net::SocketAddr;
use std::path::Path;

use super::{echo, get, service_yaml};

/// One request and what it must get.
#[derive(Debug)]
pub struct Case {
    /// `Host` header.
    pub host: &'static str,
    /// Request target.
    pub target: &'static str,
    /// Status.
    pub status: u16,
    /// The echo backend that answers (`None`: no backend, e.g. 404/503/302).
    pub backend: Option<&'static str>,
    /// `Location` of a redirect.
    pub location: Option<&'static str>,
}

const fn to(host: &'static str, target: &'static str, backend: &'static str) -> Case {
    Case {
        host,
        target,
        status: 200,
        backend: Some(backend),
        location: None,
    }
}

const fn status(host: &'static str, target: &'static str, status: u16) -> Case {
    Case {
        host,
        target,
        status,
        backend: None,
        location: None,
    }
}

/// The cases.
pub const CASES: &[Case] = &[
    to("shop.example.com", "/api", "api"),
    to("shop.example.com", "/api/", "api"),
    to("shop.example.com", "/api/items?id=1", "api"),
    to("shop.example.com", "/apinae", "web"),
    to("shop.example.com", "/api/v1/exact", "exact"),
    to("shop.example.com", "/api/v1/exact/", "api"),
    to("SHOP.Example.com:8080", "/api", "api"),
    to("shop.example.com", "/anyhost", "web"),
    to("eu.wild.example.com", "/x", "wild"),
    to("eu.wild.example.com", "/anyhost", "wild"),
    status("a.b.wild.example.com", "/x", 404),
    status("wild.example.com", "/x", 404),
    to("unknown.example.com", "/anyhost/1", "any"),
    to("a.b.wild.example.com", "/anyhost", "any"),
    status("unknown.example.com", "/other", 404),
    to("cart.example.com", "/cart", "route"),
    to("cart.example.com", "/cart/1?q=2", "route"),
    status("cart.example.com", "/cartoon", 404),
    to("exact.example.com", "/x", "exact"),
    status("exact.example.com", "/x/", 404),
    status("missing.example.com", "/", 503),
    // Matching uses the path with dot-segments removed, `%2F` not decoded and the query
    // ignored; the member gets the original target (checked for every case with a backend).
    to("shop.example.com", "/x/../api/items", "api"),
    to("shop.example.com", "/../api", "api"),
    to("shop.example.com", "/api/../apinae", "web"),
    to("shop.example.com", "/api/./v1/exact", "exact"),
    to("shop.example.com", "/api/v1/exact/.", "api"),
    to("shop.example.com", "/api/v1/x/../exact?q=/../y", "exact"),
    to("shop.example.com", "/api/v1%2Fexact", "api"),
    to("shop.example.com", "/api%2F..%2Fexact", "web"),
    to("shop.example.com", "/api/%2F?q=%2F", "api"),
    to("exact.example.com", "/y/../x", "exact"),
    status("exact.example.com", "/x/.", 404),
    to("cart.example.com", "/a/../cart?x=/../y", "route"),
    status("cart.example.com", "/cart/../x", 404),
    Case {
        host: "secure.example.com",
        target: "/pay?x=1",
        status: 302,
        backend: None,
        location: Some("https://secure.example.com/pay?x=1"),
    },
];

/// Starts the echo backends and writes the objects into `dir`.
pub async fn write_objects(dir: &Path) {
    let mut yaml = String::new();
    for name in ["web", "api", "exact", "wild", "any", "route"] {
        yaml.push_str(&service_yaml("shop", name, &[echo(name).await]));
    }
    yaml.push_str(
        "\
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata: {name: shop, namespace: shop}
spec:
  rules:
  - host: shop.example.com
    http:
      paths:
      - {path: /api, pathType: Prefix, backend: {service: {name: api, port: {number: 80}}}}
      - {path: /api/v1/exact, pathType: Exact, backend: {service: {name: exact, port: {number: 80}}}}
      - {path: /, pathType: Prefix, backend: {service: {name: web, port: {name: http}}}}
  - host: '*.wild.example.com'
    http:
      paths:
      - {path: /, pathType: Prefix, backend: {service: {name: wild, port: {number: 80}}}}
  - http:
      paths:
      - {path: /anyhost, pathType: Prefix, backend: {service: {name: any, port: {number: 80}}}}
  - host: missing.example.com
    http:
      paths:
      - {path: /, pathType: Prefix, backend: {service: {name: ghost, port: {number: 80}}}}
---
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata: {name: exact, namespace: shop}
spec:
  rules:
  - host: exact.example.com
    http:
      paths:
      - {path: /x, pathType: Exact, backend: {service: {name: exact, port: {number: 80}}}}
---
apiVersion: route.openshift.io/v1
kind: Route
metadata: {name: cart, namespace: shop}
spec: {host: cart.example.com, path: /cart, port: {targetPort: http}, to: {kind: Service, name: route}}
---
apiVersion: route.openshift.io/v1
kind: Route
metadata: {name: secure, namespace: shop}
spec:
  host: secure.example.com
  to: {kind: Service, name: web}
  tls: {termination: edge, insecureEdgeTerminationPolicy: Redirect}
",
    );
    std::fs::write(dir.join("conformance.yaml"), yaml).unwrap();
}

/// Sends every case to `http`; panics listing every case answered wrongly.
pub async fn check(http: SocketAddr) {
    let mut wrong = Vec::new();
    for case in CASES {
        let reply = get(http, case.host, case.target).await;
        let backend = reply
            .headers
            .get("x-backend")
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        let location = reply
            .headers
            .get("location")
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        let forwarded = case.backend.is_none_or(|b| {
            reply
                .body
                .starts_with(&format!("{b} path={} ", case.target))
        });
        if reply.status != case.status
            || backend.as_deref() != case.backend
            || !forwarded
            || (case.location.is_some() && location.as_deref() != case.location)
        {
            wrong.push(format!(
                "{} {}: got {} from {backend:?} (location {location:?}, body {:?}), want {case:?}",
                case.host, case.target, reply.status, reply.body
            ));
        }
    }
    assert!(
        wrong.is_empty(),
        "{} cases wrong:\n{}",
        wrong.len(),
        wrong.join("\n")
    );
}
