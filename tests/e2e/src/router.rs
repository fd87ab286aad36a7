//! Step 7: each NF instance's management endpoint behind the L7 router. The `kuryr-l7`
//! controller reads Services, EndpointSlices and an Ingress from a directory and serves the
//! compiled rules; the router follows the controller; requests reach each endpoint by host
//! (`<instance>.free5gc.demo`) and by path (`mgmt.free5gc.demo/<instance>/…`).

use std::fmt::Write as _;
use std::net::SocketAddr;
use std::time::Duration;

use crate::http;
use crate::interrupt;
use crate::lab::{Lab, free_addr};
use crate::pods::Pod;
use crate::progress::Progress;

/// The namespace of the demo's Services and Ingress.
pub const NAMESPACE: &str = "free5gc";

/// What the router step gave.
pub struct Routed {
    /// The controller's rules service.
    pub controller: SocketAddr,
    /// The router's plain-HTTP listener.
    pub router: SocketAddr,
    /// Requests answered 200 by the right endpoint.
    pub ok: usize,
    /// Requests sent.
    pub sent: usize,
}

/// The Services, EndpointSlices and the Ingress for `endpoints` (instance, address).
fn objects(endpoints: &[(String, SocketAddr)]) -> String {
    let mut yaml = String::new();
    for (name, addr) in endpoints {
        let _ = write!(
            yaml,
            "apiVersion: v1\nkind: Service\nmetadata: {{name: {name}, namespace: {NAMESPACE}}}\n\
             spec:\n  ports: [{{name: http, port: 80}}]\n---\n\
             apiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\nmetadata:\n  name: {name}-1\n  \
             namespace: {NAMESPACE}\n  labels: {{kubernetes.io/service-name: {name}}}\n\
             addressType: IPv4\nports: [{{name: http, port: {}}}]\nendpoints:\n\
             - addresses: [\"{}\"]\n  conditions: {{ready: true}}\n---\n",
            addr.port(),
            addr.ip()
        );
    }
    yaml.push_str(&ingress(endpoints.iter().map(|(name, _)| name.as_str())));
    yaml
}

/// The Ingress `nf-management` in namespace `free5gc` putting the Service (port 80, named
/// `http`) of each of `names` behind the router by host (`<name>.free5gc.demo/`) and by path
/// (`mgmt.free5gc.demo/<name>`).
pub fn ingress<'a>(names: impl IntoIterator<Item = &'a str>) -> String {
    let mut paths = String::new();
    let mut hosts = String::new();
    for name in names {
        let _ = write!(
            paths,
            "      - path: /{name}\n        pathType: Prefix\n        \
             backend: {{service: {{name: {name}, port: {{name: http}}}}}}\n"
        );
        let _ = write!(
            hosts,
            "  - host: {name}.free5gc.demo\n    http:\n      paths:\n      - path: /\n        \
             pathType: Prefix\n        backend: {{service: {{name: {name}, port: {{number: 80}}}}}}\n"
        );
    }
    format!(
        "apiVersion: networking.k8s.io/v1\nkind: Ingress\nmetadata: {{name: nf-management, \
         namespace: {NAMESPACE}}}\nspec:\n  rules:\n  - host: mgmt.free5gc.demo\n    http:\n      \
         paths:\n{paths}{hosts}"
    )
}

/// An HTTP endpoint on loopback for each of `names`, answering with its name.
pub fn serve_endpoints<'a>(
    names: impl IntoIterator<Item = &'a str>,
) -> anyhow::Result<Vec<(String, SocketAddr)>> {
    names
        .into_iter()
        .map(|name| Ok((name.to_owned(), http::serve_endpoint(name)?)))
        .collect()
}

/// Starts the controller on a directory with the objects for `endpoints` and a router following
/// it; returns (controller, router) once the router answers for the first endpoint.
pub fn start(
    lab: &mut Lab,
    endpoints: &[(String, SocketAddr)],
) -> anyhow::Result<(SocketAddr, SocketAddr)> {
    lab.write("l7/free5gc.yaml", &objects(endpoints))?;
    let source = format!("dir:{}", lab.dir().join("l7").display());
    let controller = free_addr()?;
    lab.spawn(
        "kuryr-l7-controller",
        "kuryr-l7",
        &[
            "controller",
            "--source",
            &source,
            "--listen",
            &controller.to_string(),
        ],
    )?;
    lab.wait_listening("kuryr-l7 controller", controller)?;
    let router = free_addr()?;
    lab.spawn(
        "kuryr-l7-router",
        "kuryr-l7",
        &[
            "router",
            "--listen",
            &router.to_string(),
            "--rules",
            &lab.url(controller),
        ],
    )?;
    wait_serving(lab, router, endpoints)?;
    Ok((controller, router))
}

/// Waits until the router answers 200 for the first of `endpoints`.
pub fn wait_serving(
    lab: &mut Lab,
    router: SocketAddr,
    endpoints: &[(String, SocketAddr)],
) -> anyhow::Result<()> {
    wait_serving_host(
        lab,
        router,
        endpoints.first().map(|(name, _)| name.as_str()),
        Duration::from_secs(30),
    )
}

/// Waits until the router listens and, when `first` is given, answers 200 for
/// `<first>.free5gc.demo/`, at most `timeout` for the answer.
pub fn wait_serving_host(
    lab: &mut Lab,
    router: SocketAddr,
    first: Option<&str>,
    timeout: Duration,
) -> anyhow::Result<()> {
    lab.wait_listening("kuryr-l7 router", router)?;
    let Some(first) = first else {
        return Ok(());
    };
    interrupt::wait_for("the router to serve the Ingress", timeout, || {
        lab.check_daemons()?;
        let (status, _) = http::get(router, &format!("{first}.free5gc.demo"), "/")?;
        Ok((status == 200).then_some(()))
    })
}

/// Calls every endpoint through the router, by host and by path: (answered 200 by the right
/// endpoint, sent), each answer passed to `news`.
pub fn call_all(
    router: SocketAddr,
    endpoints: &[(String, SocketAddr)],
    news: impl FnMut(&str),
) -> anyhow::Result<(usize, usize)> {
    call_each(
        router,
        endpoints.iter().map(|(name, _)| name.as_str()),
        |name, body| body.starts_with(&format!("{name} management")),
        news,
    )
}

/// Calls each of `names` through the router, by host (`<name>.free5gc.demo/healthz`) and by
/// path (`mgmt.free5gc.demo/<name>/status`): (answered 200 with a body `right(name, body)`
/// accepts, sent), each answer passed to `news`.
pub fn call_each<'a>(
    router: SocketAddr,
    names: impl IntoIterator<Item = &'a str>,
    right: impl Fn(&str, &str) -> bool,
    mut news: impl FnMut(&str),
) -> anyhow::Result<(usize, usize)> {
    let mut ok = 0;
    let mut sent = 0;
    for name in names {
        for (host, path) in [
            (format!("{name}.free5gc.demo"), "/healthz".to_owned()),
            ("mgmt.free5gc.demo".to_owned(), format!("/{name}/status")),
        ] {
            sent += 1;
            let (status, body) = http::get(router, &host, &path)?;
            if status == 200 && right(name, &body) {
                ok += 1;
            }
            news(&format!("{host}{path} → {status} {}", body.trim()));
        }
    }
    Ok((ok, sent))
}

/// Starts an endpoint per pod, the controller and the router, then calls every endpoint through
/// the router by host and by path.
pub fn route(lab: &mut Lab, progress: &Progress, pods: &[Pod]) -> anyhow::Result<Routed> {
    let step = progress.step("kuryr-l7: controller and router");
    let endpoints = serve_endpoints(pods.iter().map(|p| p.deployed.as_str()))?;
    let (controller, router) = start(lab, &endpoints)?;
    step.done(&format!(
        "{} Services behind one Ingress; rules on {controller}, HTTP on {router}",
        endpoints.len()
    ));

    let step = progress.step("kuryr-l7: HTTP through the router");
    let (ok, sent) = call_all(router, &endpoints, |news| step.message(news))?;
    step.done(&format!("{ok}/{sent} answered 200 by the right NF"));
    Ok(Routed {
        controller,
        router,
        ok,
        sent,
    })
}
