//! The Octavia and Neutron clients against the real Octavia 19 and Neutron 29 APIs
//! (`nephrite_test_services::OpenStack`, noauth): the Router LB's pieces built the way the
//! driver builds them, Neutron's floating-IP refusal as a typed error, Octavia's 409 while a
//! load balancer is busy waited out, and calls that fail named.
//!
//! One `#[test]` runs the scenarios in turn: under nextest each test is a process, and each
//! would start its own services.

use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, ensure};
use nephrite_kuryr_l7::openstack::auth::Credentials;
use nephrite_kuryr_l7::openstack::neutron::{FixedIp, Neutron, NewPort, Taggable};
use nephrite_kuryr_l7::openstack::octavia::{
    NewL7Policy, NewL7Rule, NewListener, NewLoadBalancer, NewMember, NewPool, Octavia,
    ProvisioningStatus, Settle,
};
use nephrite_kuryr_l7::openstack::{ApiError, Endpoint, Session};
use nephrite_test_services::{OpenStack, new_project_id};
use reqwest::Method;
use serde_json::json;

const TEST: &str = "octavia_and_neutron_clients_against_the_real_apis";

#[test]
fn octavia_and_neutron_clients_against_the_real_apis() -> anyhow::Result<()> {
    let cloud = match OpenStack::shared() {
        Ok(cloud) => cloud,
        Err(e) => {
            e.skip(TEST);
            return Ok(());
        }
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    runtime.block_on(async {
        let clients = Clients::new(cloud)?;
        let router = router_lb_pieces(&clients)
            .await
            .context("the Router LB's pieces")?;
        l7_tree_on_the_router(&clients, &router)
            .await
            .context("an L7 tree on the router")?;
        failures_are_typed(&clients, cloud)
            .await
            .context("failures")?;
        a_tree_in_one_call(&clients, &router)
            .await
            .context("a load balancer tree in one call")?;
        clients
            .octavia
            .delete_load_balancer(&router.lb_id, true)
            .await?;
        ensure!(
            clients
                .octavia
                .load_balancer(&router.lb_id)
                .await?
                .is_none(),
            "a cascade delete leaves no load balancer"
        );
        Ok(())
    })
}

struct Clients {
    project: String,
    octavia: Octavia,
    neutron: Neutron,
}

impl Clients {
    fn new(cloud: &OpenStack) -> anyhow::Result<Clients> {
        let project = new_project_id();
        let session = Arc::new(Session::new(
            Credentials::NoAuth {
                project_id: project.clone(),
            },
            Duration::from_secs(60),
        )?);
        Ok(Clients {
            octavia: Octavia::new(
                session.clone(),
                Endpoint::Url(cloud.octavia_url()),
                Settle {
                    poll: Duration::from_millis(50),
                    timeout: Duration::from_secs(120),
                },
            ),
            neutron: Neutron::new(session, Endpoint::Url(cloud.neutron_url())),
            project,
        })
    }
}

struct RouterLb {
    lb_id: String,
    service_subnet: String,
}

/// The VIP port in Neutron (found again by `device_id`, tagged afterwards), the floating IP
/// refused until a router joins the subnet to the external network, then bound; the load
/// balancer on that port reaching ACTIVE.
async fn router_lb_pieces(c: &Clients) -> anyhow::Result<RouterLb> {
    let network = c.neutron.create_network("services", None).await?;
    ensure!(
        network.project_id == c.project,
        "created in the session's project"
    );
    let subnet = c
        .neutron
        .create_subnet("services", &network.id, "10.0.0.0/24")
        .await?;
    // Each flat network needs its own physical network.
    let physnet = format!("ext-{}", &c.project[..12]);
    let external = c.neutron.create_network("public", Some(&physnet)).await?;
    ensure!(external.external, "router:external");
    let external_subnet = c
        .neutron
        .create_subnet("public", &external.id, "172.24.4.0/24")
        .await?;

    let port = c
        .neutron
        .create_port(&NewPort {
            name: "kuryr-l7-router".to_owned(),
            network_id: network.id.clone(),
            fixed_ips: vec![FixedIp {
                subnet_id: subnet.id.clone(),
                ip_address: None,
            }],
            device_id: "kuryr-l7-router".to_owned(),
            device_owner: "kuryr:l7-router".to_owned(),
            description: "kuryr-l7 router VIP".to_owned(),
        })
        .await?;
    let tags = vec!["cluster:test".to_owned(), "kuryr-l7".to_owned()];
    let mut set = c.neutron.set_tags(Taggable::Port, &port.id, &tags).await?;
    set.sort();
    ensure!(set == tags, "tags set afterwards: {set:?}");
    let found = c
        .neutron
        .ports(&[
            ("device_id", "kuryr-l7-router"),
            ("device_owner", "kuryr:l7-router"),
        ])
        .await?;
    ensure!(
        found.len() == 1 && found[0].id == port.id && found[0].tags.len() == 2,
        "found again by what was set at creation: {found:?}"
    );
    let vip_address = port.fixed_ips[0]
        .ip_address
        .clone()
        .context("Neutron picked an address")?;

    let refused = c
        .neutron
        .create_floating_ip(&external.id, Some(&port.id), None, "kuryr-l7 router")
        .await
        .expect_err("no router joins the subnet to the external network yet");
    match &refused {
        ApiError::ExternalGatewayNotFound(r) => ensure!(
            (&r.subnet_id, &r.network_id, &r.port_id) == (&subnet.id, &external.id, &port.id),
            "{refused}"
        ),
        other => anyhow::bail!("expected ExternalGatewayNotFound, got {other}"),
    }
    ensure!(!refused.is_retryable());
    ensure!(
        refused.to_string().contains(&subnet.id),
        "names the subnet: {refused}"
    );

    let router = c.neutron.create_router("kuryr-l7", &external.id).await?;
    c.neutron
        .add_router_interface(&router.id, &subnet.id)
        .await?;
    let fip = c
        .neutron
        .create_floating_ip(&external.id, Some(&port.id), None, "kuryr-l7 router")
        .await?;
    ensure!(fip.port_id.as_deref() == Some(port.id.as_str()));
    ensure!(fip.fixed_ip_address.as_deref() == Some(vip_address.as_str()));
    let by_port = c.neutron.floating_ips(&[("port_id", &port.id)]).await?;
    ensure!(by_port.len() == 1 && by_port[0].id == fip.id);
    let unbound = c
        .neutron
        .bind_floating_ip(&fip.id, &external.id, None)
        .await?;
    ensure!(unbound.port_id.is_none());
    let rebound = c
        .neutron
        .bind_floating_ip(&fip.id, &external.id, Some(&port.id))
        .await?;
    ensure!(rebound.floating_ip_address == fip.floating_ip_address);
    ensure!(external_subnet.cidr == "172.24.4.0/24");

    let lb = c
        .octavia
        .create_load_balancer(&NewLoadBalancer {
            name: "kuryr-l7-router".to_owned(),
            vip_port_id: Some(port.id.clone()),
            vip_subnet_id: Some(subnet.id.clone()),
            vip_address: Some(vip_address.clone()),
            tags: vec!["kuryr-l7".to_owned()],
            ..NewLoadBalancer::default()
        })
        .await?;
    ensure!(lb.provisioning_status == ProvisioningStatus::Active);
    ensure!(
        lb.vip_port_id.as_deref() == Some(port.id.as_str()),
        "{lb:?}"
    );
    ensure!(
        lb.vip_address.as_deref() == Some(vip_address.as_str()),
        "{lb:?}"
    );
    ensure!(lb.project_id == c.project);
    let named = c
        .octavia
        .load_balancers(&[("name", "kuryr-l7-router")])
        .await?;
    ensure!(named.len() == 1 && named[0].id == lb.id, "{named:?}");
    Ok(RouterLb {
        lb_id: lb.id,
        service_subnet: subnet.id,
    })
}

/// Listener, pool, member, policy and rules, each change waited out; two changes sent at
/// once both succeed (the second's 409 "immutable" is waited out).
async fn l7_tree_on_the_router(c: &Clients, router: &RouterLb) -> anyhow::Result<()> {
    let lb_id = &router.lb_id;
    let o = &c.octavia;
    let pool = o
        .create_pool(&NewPool {
            name: "default/web".to_owned(),
            loadbalancer_id: lb_id.clone(),
            protocol: "HTTP".to_owned(),
            lb_algorithm: "ROUND_ROBIN".to_owned(),
            tags: vec!["kuryr-l7".to_owned()],
        })
        .await?;
    ensure!(pool.provisioning_status == ProvisioningStatus::Active);
    let listener = o
        .create_listener(&NewListener {
            name: "kuryr-l7-router:80".to_owned(),
            loadbalancer_id: lb_id.clone(),
            protocol: "HTTP".to_owned(),
            protocol_port: 80,
            default_pool_id: None,
            tags: vec![],
        })
        .await?;
    let member = |address: &str| NewMember {
        name: format!("web-{address}"),
        address: address.to_owned(),
        protocol_port: 8080,
        weight: None,
        subnet_id: Some(router.service_subnet.clone()),
        tags: vec![],
    };
    // Two changes at once on one load balancer: one of them meets a 409 "immutable".
    let (first, second) = (member("10.0.0.11"), member("10.0.0.12"));
    let (a, b) = tokio::join!(
        o.create_member(lb_id, &pool.id, &first),
        o.create_member(lb_id, &pool.id, &second),
    );
    let (a, b) = (a?, b?);
    ensure!(a.provisioning_status == ProvisioningStatus::Active);
    ensure!(b.provisioning_status == ProvisioningStatus::Active);
    let members = o.members(&pool.id).await?;
    ensure!(members.len() == 2, "{members:?}");
    let heavier = o
        .update_member(lb_id, &pool.id, &a.id, json!({"weight": 5}))
        .await?;
    ensure!(heavier.weight == 5);

    let policy = o
        .create_l7policy(
            lb_id,
            &NewL7Policy {
                name: "default/web-ingress".to_owned(),
                listener_id: listener.id.clone(),
                action: "REDIRECT_TO_POOL".to_owned(),
                redirect_pool_id: Some(pool.id.clone()),
                tags: vec!["kuryr-l7".to_owned()],
                ..NewL7Policy::default()
            },
        )
        .await?;
    ensure!(policy.position == 1);
    let host = o
        .create_l7rule(
            lb_id,
            &policy.id,
            &NewL7Rule {
                rule_type: "HOST_NAME".to_owned(),
                compare_type: "EQUAL_TO".to_owned(),
                value: "www.example.com".to_owned(),
                ..NewL7Rule::default()
            },
        )
        .await?;
    let path = o
        .create_l7rule(
            lb_id,
            &policy.id,
            &NewL7Rule {
                rule_type: "PATH".to_owned(),
                compare_type: "STARTS_WITH".to_owned(),
                value: "/api/".to_owned(),
                ..NewL7Rule::default()
            },
        )
        .await?;
    let edited = o
        .update_l7rule(lb_id, &policy.id, &path.id, json!({"value": "/v2/"}))
        .await?;
    ensure!(edited.value == "/v2/");
    let rules = o.l7rules(&policy.id).await?;
    ensure!(rules.len() == 2 && rules.iter().any(|r| r.id == host.id));
    let second = o
        .create_l7policy(
            lb_id,
            &NewL7Policy {
                name: "default/reject".to_owned(),
                listener_id: listener.id.clone(),
                action: "REJECT".to_owned(),
                position: Some(1),
                ..NewL7Policy::default()
            },
        )
        .await?;
    let policies = o.l7policies(&[("listener_id", &listener.id)]).await?;
    let position = |id: &str| policies.iter().find(|p| p.id == id).map(|p| p.position);
    ensure!(
        position(&second.id) == Some(1) && position(&policy.id) == Some(2),
        "an insert at 1 shifts the rest: {policies:?}"
    );
    o.delete_l7rule(lb_id, &policy.id, &host.id).await?;
    o.delete_l7policy(lb_id, &second.id).await?;
    o.delete_member(lb_id, &pool.id, &b.id).await?;
    o.update_listener(lb_id, &listener.id, json!({"default_pool_id": pool.id}))
        .await?;
    let listeners = o.listeners(&[("loadbalancer_id", lb_id)]).await?;
    ensure!(listeners[0].default_pool_id.as_deref() == Some(pool.id.as_str()));
    let in_use = o
        .execute(lb_id, Method::DELETE, &format!("pools/{}", pool.id), None)
        .await;
    // Octavia deletes a pool that a listener and a policy use (it unsets them); either way the
    // call settles.
    if let Err(e) = in_use {
        ensure!(e.status() == Some(409), "{e}");
    }
    Ok(())
}

/// Octavia's single-call create: listener, default pool and members with the load balancer.
async fn a_tree_in_one_call(c: &Clients, router: &RouterLb) -> anyhow::Result<()> {
    let lb = c
        .octavia
        .create_load_balancer_tree(json!({
            "name": "tree",
            "vip_subnet_id": router.service_subnet,
            "listeners": [{
                "name": "tree:80",
                "protocol": "HTTP",
                "protocol_port": 80,
                "default_pool": {
                    "name": "tree/web",
                    "protocol": "HTTP",
                    "lb_algorithm": "ROUND_ROBIN",
                    "members": [
                        {"address": "10.0.0.21", "protocol_port": 8080},
                        {"address": "10.0.0.22", "protocol_port": 8080},
                    ],
                },
            }],
        }))
        .await?;
    ensure!(lb.provisioning_status == ProvisioningStatus::Active);
    ensure!(lb.listeners.len() == 1 && lb.pools.len() == 1, "{lb:?}");
    let members = c.octavia.members(&lb.pools[0].id).await?;
    ensure!(members.len() == 2, "{members:?}");
    ensure!(
        members
            .iter()
            .all(|m| m.provisioning_status == ProvisioningStatus::Active)
    );
    c.octavia.delete_load_balancer(&lb.id, true).await?;
    Ok(())
}

/// A missing object is a 404 naming method and URL; an unreachable service is retryable.
async fn failures_are_typed(c: &Clients, cloud: &OpenStack) -> anyhow::Result<()> {
    let missing = c
        .octavia
        .create_l7rule(
            "00000000-0000-0000-0000-000000000000",
            "00000000-0000-0000-0000-000000000001",
            &NewL7Rule {
                rule_type: "PATH".to_owned(),
                compare_type: "EQUAL_TO".to_owned(),
                value: "/".to_owned(),
                ..NewL7Rule::default()
            },
        )
        .await
        .expect_err("no such policy");
    ensure!(missing.status() == Some(404), "{missing}");
    ensure!(!missing.is_retryable());
    let shown = missing.to_string();
    ensure!(
        shown.starts_with(&format!(
            "POST {}/v2/lbaas/l7policies/00000000-0000-0000-0000-000000000001/rules: 404",
            cloud.octavia_url()
        )),
        "{shown}"
    );
    ensure!(
        c.neutron
            .network("00000000-0000-0000-0000-000000000000")
            .await?
            .is_none(),
        "a missing network is None"
    );

    let closed = Session::new(
        Credentials::NoAuth {
            project_id: c.project.clone(),
        },
        Duration::from_secs(5),
    )?;
    let nowhere = Neutron::new(
        Arc::new(closed),
        Endpoint::Url("http://127.0.0.1:9".to_owned()),
    );
    let unreachable = nowhere.networks(&[]).await.expect_err("nothing listens");
    ensure!(
        matches!(unreachable, ApiError::Transport { .. }) && unreachable.is_retryable(),
        "{unreachable}"
    );
    ensure!(
        unreachable
            .to_string()
            .starts_with("GET http://127.0.0.1:9/v2.0/networks: "),
        "{unreachable}"
    );
    let catalog_without_keystone = Neutron::new(
        Arc::new(Session::new(
            Credentials::NoAuth {
                project_id: c.project.clone(),
            },
            Duration::from_secs(5),
        )?),
        Endpoint::public("network"),
    );
    let no_endpoint = catalog_without_keystone
        .networks(&[])
        .await
        .expect_err("noauth has no catalog");
    ensure!(
        matches!(no_endpoint, ApiError::NoEndpoint { .. }),
        "{no_endpoint}"
    );
    Ok(())
}
