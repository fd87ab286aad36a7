//! TLS on the `octavia` driver: an Ingress with `spec.tls` becomes a `TERMINATED_HTTPS` listener
//! whose certificate is a container in a real Barbican 23
//! (`OpenStack::barbican_url`), with the real Octavia 19 and Neutron 29 and the in-memory
//! Kubernetes API server; the built binary run with `--barbican-url`.
//!
//! - the listener (port 443) names one container as `default_tls_container_ref` and in
//!   `sni_container_refs`; the container holds the Secret's certificate (leaf as
//!   `certificate`, the rest of the chain as `intermediates`) and key (`private_key`), read
//!   back from Barbican; the listener routes like the translation's HTTPS listener;
//! - a Secret change rotates: a new container, the listener pointed at it, the old container
//!   and its secrets deleted;
//! - deleting the Ingress leaves no TLS listener and no container or secret of the cluster.
//!
//! Octavia runs `noop_cert_manager` (it takes the references without reading them): its
//! `barbican_cert_manager` reads Barbican only through Keystone, which the test services run
//! without, so what Barbican holds is checked here by the test.

mod support;

use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, ensure};
use kube::api::DeleteParams;
use nephrite_kuryr_l7::openstack::auth::Credentials;
use nephrite_kuryr_l7::openstack::barbican::{Barbican as BarbicanClient, Container, name_prefix};
use nephrite_kuryr_l7::openstack::observe::read_tree;
use nephrite_kuryr_l7::openstack::{Endpoint, Session};
use nephrite_l7::octavia::{
    HTTPS_LISTENER, ListenerProtocol, ListenerTls, ProvisioningStatus, Tree,
};
use nephrite_l7::{Outcome, Request};
use nephrite_test_services::OpenStack;
use support::openstack::{World, eventually, log_text};
use support::tls_conformance::ca_signed;

const TEST: &str = "tls_listeners_keep_their_certificates_in_barbican";

#[test]
fn tls_listeners_keep_their_certificates_in_barbican() -> anyhow::Result<()> {
    let cloud = match OpenStack::shared() {
        Ok(cloud) => cloud,
        Err(e) => {
            e.skip(TEST);
            return Ok(());
        }
    };
    let barbican_url = match cloud.barbican_url() {
        Ok(url) => url,
        Err(e) => {
            e.skip(TEST);
            return Ok(());
        }
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    runtime.block_on(scenario(cloud, &barbican_url))
}

const BACKEND: &str = "apiVersion: v1
kind: Service
metadata: {name: web, namespace: default}
spec:
  ports: [{name: http, port: 80}]
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: web-1
  namespace: default
  labels: {kubernetes.io/service-name: web}
addressType: IPv4
ports: [{name: http, port: 8080}]
endpoints:
- addresses: [\"10.0.1.10\"]
";

const INGRESS: &str = "apiVersion: networking.k8s.io/v1
kind: Ingress
metadata: {name: shop, namespace: default}
spec:
  tls: [{hosts: [shop.example.com], secretName: shop-tls}]
  rules:
  - host: shop.example.com
    http:
      paths:
      - {path: /, pathType: Prefix, backend: {service: {name: web, port: {number: 80}}}}
";

/// The Secret `shop-tls` holding `chain` and `key` (base64 `data`, as kube-apiserver keeps it).
fn secret(chain: &str, key: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Secret\nmetadata: {{name: shop-tls, namespace: default}}\n\
         type: kubernetes.io/tls\ndata: {{tls.crt: {}, tls.key: {}}}\n",
        base64(chain.as_bytes()),
        base64(key.as_bytes())
    )
}

fn base64(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::new();
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            *chunk.get(1).unwrap_or(&0),
            *chunk.get(2).unwrap_or(&0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            out.push(if i <= chunk.len() {
                char::from(ALPHABET[((n >> (18 - 6 * i)) & 63) as usize])
            } else {
                '='
            });
        }
    }
    out
}

/// The TLS listener of the load balancer, read through Octavia's API.
async fn tls_listener(world: &World, lb: &str) -> anyhow::Result<Option<(Tree, ListenerTls)>> {
    let tree = read_tree(&world.octavia, lb).await?;
    let tls = tree
        .listeners
        .iter()
        .find(|l| l.name == HTTPS_LISTENER)
        .map(|l| {
            ensure!(
                l.protocol == ListenerProtocol::TerminatedHttps && l.port == 443,
                "{l:?}"
            );
            l.tls
                .clone()
                .context("a TERMINATED_HTTPS listener without certificates")
        })
        .transpose()?;
    Ok(tls.map(|tls| (tree, tls)))
}

/// The container's secrets' payloads by role, checked against the chain and key it must hold.
async fn check_holds(
    barbican: &BarbicanClient,
    container: &Container,
    chain: &str,
    key: &str,
) -> anyhow::Result<()> {
    let mut payloads = std::collections::BTreeMap::new();
    for secret in &container.secret_refs {
        payloads.insert(
            secret.name.clone(),
            barbican.payload(&secret.secret_ref).await?,
        );
    }
    let (leaf, rest) = nephrite_kuryr_l7::openstack::barbican::split_chain(chain);
    ensure!(!rest.is_empty(), "the test's chain has an intermediate");
    let want = [
        ("certificate", leaf.trim()),
        ("intermediates", rest.trim()),
        ("private_key", key.trim()),
    ];
    ensure!(
        payloads.len() == want.len()
            && want
                .iter()
                .all(|(role, pem)| payloads.get(*role).map(|p| p.trim()) == Some(*pem)),
        "container {} holds {payloads:#?}, not the Secret's certificate and key",
        container.container_ref
    );
    Ok(())
}

async fn scenario(cloud: &OpenStack, barbican_url: &str) -> anyhow::Result<()> {
    let world = World::setup(cloud).await?;
    let session = Arc::new(Session::new(
        Credentials::NoAuth {
            project_id: world.project.clone(),
        },
        Duration::from_secs(60),
    )?);
    let client = BarbicanClient::new(session, Endpoint::Url(barbican_url.to_owned()));
    let ours = name_prefix(&world.cluster);

    world.apply(BACKEND).await?;
    let (chain1, key1, ca1) = ca_signed(&["shop.example.com"]);
    let chain1 = format!("{chain1}{ca1}");
    world.apply(&secret(&chain1, &key1)).await?;
    world.apply(INGRESS).await?;
    let (_controller, log) =
        world.controller_with("c1", "c1", &["--barbican-url", barbican_url])?;
    let state = eventually("the Node annotation", async || world.router_state().await)
        .await
        .with_context(|| log_text(&log))?;
    let lb = state.router_lb.id.clone();

    // The listener and the container holding the Secret.
    let (tree, tls) = eventually("a TERMINATED_HTTPS listener", async || {
        tls_listener(&world, &lb).await
    })
    .await
    .with_context(|| log_text(&log))?;
    ensure!(
        tls.sni_containers == [tls.default_container.clone()],
        "one certificate, default and SNI: {tls:?}"
    );
    let first = client
        .container(&tls.default_container)
        .await?
        .context("the listener's container exists in Barbican")?;
    ensure!(
        first.name.as_deref().is_some_and(|n| n.starts_with(&ours)),
        "{first:?}"
    );
    check_holds(&client, &first, &chain1, &key1).await?;
    // Octavia's worker takes the listener to ACTIVE (it never reads the certificate).
    let began = std::time::Instant::now();
    loop {
        let status = tls_listener(&world, &lb).await?.and_then(|(tree, _)| {
            tree.listeners
                .iter()
                .find(|l| l.name == HTTPS_LISTENER)
                .map(|l| l.status)
        });
        if status == Some(ProvisioningStatus::Active) {
            break;
        }
        if began.elapsed() > Duration::from_secs(90) {
            let tail = |path: std::path::PathBuf| {
                let text = std::fs::read_to_string(&path).unwrap_or_default();
                let lines: Vec<&str> = text.lines().collect();
                format!(
                    "--- {}:\n{}",
                    path.display(),
                    lines[lines.len().saturating_sub(40)..].join("\n")
                )
            };
            anyhow::bail!(
                "the TLS listener is still {status:?} after 90 s\n{}\n{}\n{}",
                tail(cloud.dirs()[0].join("worker.log")),
                tail(cloud.dirs()[0].join("api-1.log")),
                log_text(&log)
            );
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    // The listener's policies come after it, one call each: wait until it routes like the
    // translation's HTTPS listener.
    let translation = world.translation().await?;
    let requests = [
        ("shop.example.com", "/"),
        ("shop.example.com", "/a/b"),
        ("other.test", "/"),
    ];
    for (host, path) in requests {
        let want = outcome(&translation.config.https, host, path);
        ensure!(
            (host == "other.test") != (want == "pool default/web:80"),
            "the translation sends {host}{path} to web over TLS, nothing else: {want}"
        );
    }
    let mut last = String::new();
    let routed = eventually("the TLS listener routes like the translation", async || {
        let Some((tree, _)) = tls_listener(&world, &lb).await? else {
            return Ok(None);
        };
        let https = tree
            .listener_model(HTTPS_LISTENER, translation.config.https.no_match_status)
            .context("the TLS listener's model")??;
        last = format!(
            "{:#?}\n",
            tree.listeners.iter().find(|l| l.name == HTTPS_LISTENER)
        );
        let mut wrong = false;
        for (host, path) in requests {
            let want = outcome(&translation.config.https, host, path);
            let got = outcome(&https, host, path);
            if want != got {
                wrong = true;
                last += &format!("https {host}{path}: translation {want}, Octavia {got}; ");
            }
        }
        Ok((!wrong).then_some(()))
    })
    .await;
    routed.with_context(|| format!("{last}\n{}", log_text(&log)))?;
    drop(tree);

    // Rotation: a new certificate, a new container, the old one gone.
    let (chain2, key2, ca2) = ca_signed(&["shop.example.com"]);
    let chain2 = format!("{chain2}{ca2}");
    world.apply(&secret(&chain2, &key2)).await?;
    let rotated = eventually("the listener on a new container", async || {
        Ok(tls_listener(&world, &lb)
            .await?
            .map(|(_, tls)| tls)
            .filter(|tls| tls.default_container != first.container_ref))
    })
    .await
    .with_context(|| log_text(&log))?;
    ensure!(
        rotated.sni_containers == [rotated.default_container.clone()],
        "{rotated:?}"
    );
    let second = client
        .container(&rotated.default_container)
        .await?
        .context("the new container exists")?;
    check_holds(&client, &second, &chain2, &key2).await?;
    eventually("the old container and its secrets deleted", async || {
        let gone = client.container(&first.container_ref).await?.is_none();
        let secrets = client.secrets(&ours).await?;
        let left: Vec<_> = first
            .secret_refs
            .iter()
            .filter(|s| secrets.iter().any(|t| t.secret_ref == s.secret_ref))
            .collect();
        Ok((gone && left.is_empty()).then_some(()))
    })
    .await
    .with_context(|| log_text(&log))?;

    // Deletion: no TLS listener, nothing of the cluster in Barbican.
    world
        .api("Ingress")
        .delete("shop", &DeleteParams::default())
        .await?;
    eventually("no TLS listener and no container or secret", async || {
        let listener = tls_listener(&world, &lb).await?;
        let containers = client.containers(&ours).await?;
        let secrets = client.secrets(&ours).await?;
        Ok((listener.is_none() && containers.is_empty() && secrets.is_empty()).then_some(()))
    })
    .await
    .with_context(|| log_text(&log))?;
    // Everything in the project was ours: nothing else in Barbican either.
    ensure!(client.containers("").await?.is_empty());
    Ok(())
}

/// Where `listener` sends a request for `host` and `path`.
fn outcome(listener: &nephrite_l7::Listener, host: &str, path: &str) -> String {
    let headers: Vec<(String, String)> = Vec::new();
    let request = Request {
        host,
        path,
        target: path,
        headers: &headers,
        client_cert: None,
    };
    match listener.evaluate(&request) {
        Outcome::Pool(pool) => format!("pool {pool}"),
        other => format!("{other:?}"),
    }
}
