//! A small OpenStack for the walk-through (`examples/openstack/README.md`): the real Octavia 19
//! and Neutron 29 APIs on loopback (`nephrite_test_services::OpenStack`: MariaDB, RabbitMQ, the
//! Python environments under `target/`), with what an operator's cloud already has for kuryr-l7:
//! a service network and subnet, an external network and subnet, a router between them.
//!
//! `openstack_cloud DIR` writes `DIR/kuryr.conf` (noauth, the endpoints, the project and the
//! subnets) and `DIR/env.sh` (`OCTAVIA`, `NEUTRON`, `PROJECT` for curl), says `ready`, and
//! serves until SIGINT/SIGTERM.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use nephrite_kuryr_l7::openstack::auth::Credentials;
use nephrite_kuryr_l7::openstack::neutron::Neutron;
use nephrite_kuryr_l7::openstack::{Endpoint, Session};
use nephrite_test_services::{OpenStack, new_project_id};

#[tokio::main(flavor = "current_thread")]
async fn main() -> anyhow::Result<()> {
    let dir = PathBuf::from(
        std::env::args()
            .nth(1)
            .context("usage: openstack_cloud DIR")?,
    );
    std::fs::create_dir_all(&dir)?;
    eprintln!("starting Octavia and Neutron (15-45 s)…");
    let cloud = tokio::task::spawn_blocking(OpenStack::start)
        .await?
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    let project = new_project_id();
    let session = Arc::new(Session::new(
        Credentials::NoAuth {
            project_id: project.clone(),
        },
        Duration::from_secs(60),
    )?);
    let neutron = Neutron::new(session, Endpoint::Url(cloud.neutron_url()));
    let network = neutron.create_network("services", None).await?;
    let subnet = neutron
        .create_subnet("services", &network.id, "10.0.0.0/24")
        .await?;
    let external = neutron
        .create_network("public", Some(&format!("ext-{}", &project[..12])))
        .await?;
    let external_subnet = neutron
        .create_subnet("public", &external.id, "172.24.4.0/24")
        .await?;
    let router = neutron.create_router("edge", &external.id).await?;
    neutron.add_router_interface(&router.id, &subnet.id).await?;
    std::fs::write(
        dir.join("kuryr.conf"),
        format!(
            "[kubernetes]\nl7_router_driver = neutron_l7_policy\n\n\
             [neutron]\nauth_type = noauth\nendpoint_override = {neutron}\n\n\
             [octavia]\nendpoint_override = {octavia}\n\n\
             [neutron_defaults]\nproject = {project}\nservice_subnet = {service}\n\
             external_svc_subnet = {external}\n\n\
             [ingress]\nl7_router_uuid =              # empty: create the Router LB\n",
            neutron = cloud.neutron_url(),
            octavia = cloud.octavia_url(),
            service = subnet.id,
            external = external_subnet.id,
        ),
    )?;
    std::fs::write(
        dir.join("env.sh"),
        format!(
            "export OCTAVIA={} NEUTRON={} PROJECT={project}\n",
            cloud.octavia_url(),
            cloud.neutron_url()
        ),
    )?;
    eprintln!(
        "ready: {} and {}",
        dir.join("kuryr.conf").display(),
        dir.join("env.sh").display()
    );
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term.recv() => {}
    }
    drop(cloud);
    Ok(())
}
