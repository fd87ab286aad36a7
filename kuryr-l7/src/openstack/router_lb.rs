//! The Router LB: the Octavia load balancer that *is* the L7 router, its VIP port in Neutron, its
//! HTTP listener on port 80 and its floating IP; found again or created, never twice.
//!
//! - `[ingress] l7_router_uuid` set: that load balancer is adopted (it must exist).
//! - Otherwise the load balancer recorded in the Node annotation is verified against Octavia;
//!   when there is no annotation (or it names a load balancer that is gone) the load balancer
//!   is looked up by name and the cluster's tag, and only when none exists is one created: a VIP
//!   port on `service_subnet` created in Neutron first (found again by its `device_id`, since
//!   Neutron 29 drops `tags` in a port's POST body), then the load balancer on that port (tags
//!   set at creation).
//! - The floating IP: a pre-allocated `floating_ip` is adopted and bound to the VIP port (never
//!   released); otherwise the one bound to the VIP port is kept, or one is allocated on the
//!   network of `external_svc_subnet`, bound at creation so it is found again by `port_id`.

use nephrite_l7::octavia::{Desired, HTTP_LISTENER, Ownership};
use serde_json::Value;

use super::neutron::{FixedIp, FloatingIp, Neutron, NewPort, Taggable};
use super::octavia::{LoadBalancer, NewListener, NewLoadBalancer, Octavia, ProvisioningStatus};
use super::settings::OpenStackSettings;
use super::state::{RouterLb, RouterState};
use super::{ApiError, graph};

/// The Router LB's name (the seed's).
pub const ROUTER_NAME: &str = "kuryr-l7-router";
/// The VIP port's `device_owner`.
pub const DEVICE_OWNER: &str = "kuryr:l7-router";

/// Why the Router LB could not be had.
#[derive(Debug, thiserror::Error)]
pub enum RouterError {
    /// An OpenStack call failed (Neutron's `ExternalGatewayForFloatingIPNotFound` among them,
    /// naming the subnet).
    #[error(transparent)]
    Api(#[from] ApiError),
    /// An option needed to create something is not set.
    #[error("creating the Router LB needs [neutron_defaults] {0} (--{1})")]
    Missing(&'static str, &'static str),
    /// A configured object does not exist.
    #[error("{0}")]
    NotFound(String),
}

impl RouterError {
    /// Whether trying again later may help without the operator changing anything.
    pub fn is_retryable(&self) -> bool {
        match self {
            RouterError::Api(e) => e.is_retryable(),
            RouterError::Missing(..) | RouterError::NotFound(_) => false,
        }
    }
}

/// The VIP port's `device_id`: it names the cluster, so each cluster's port is found again.
pub fn device_id(cluster: &str) -> String {
    format!("{ROUTER_NAME}:{cluster}")
}

/// Finds or creates the Router LB, its listener and floating IP; `recorded` is the Node
/// annotation's state, if any. A load balancer created here is created with `desired` on it
/// in one call ([`graph`]): the first sync is then done already.
pub async fn ensure(
    octavia: &Octavia,
    neutron: &Neutron,
    settings: &OpenStackSettings,
    recorded: Option<&RouterState>,
    desired: &Desired,
) -> Result<RouterState, RouterError> {
    let owner = Ownership::new(settings.cluster.clone());
    let lb = load_balancer(octavia, neutron, settings, &owner, recorded, desired).await?;
    listener(octavia, &lb, &owner).await?;
    let port_id = lb
        .vip_port_id
        .clone()
        .ok_or_else(|| RouterError::NotFound(format!("load balancer {} has no VIP port", lb.id)))?;
    let fip = floating_ip(neutron, settings, &owner, &port_id).await?;
    Ok(RouterState {
        fip: fip.floating_ip_address,
        router_lb: RouterLb {
            ip: lb.vip_address.clone().unwrap_or_default(),
            name: lb.name.clone(),
            port_id,
            project_id: lb.project_id.clone(),
            subnet_id: lb.vip_subnet_id.clone().unwrap_or_default(),
            id: lb.id,
        },
    })
}

/// The load balancer, settled (`ACTIVE`).
async fn load_balancer(
    octavia: &Octavia,
    neutron: &Neutron,
    settings: &OpenStackSettings,
    owner: &Ownership,
    recorded: Option<&RouterState>,
    desired: &Desired,
) -> Result<LoadBalancer, RouterError> {
    let settle = |lb: LoadBalancer| async move {
        if lb.provisioning_status == ProvisioningStatus::Active {
            return Ok(lb);
        }
        let url = format!("loadbalancers/{}", lb.id);
        Ok::<_, RouterError>(
            octavia
                .wait_active(&lb.id, &reqwest::Method::GET, &url)
                .await?,
        )
    };
    if let Some(id) = &settings.l7_router_uuid {
        let lb = octavia.load_balancer(id).await?.ok_or_else(|| {
            RouterError::NotFound(format!(
                "[ingress] l7_router_uuid {id}: no such load balancer in Octavia"
            ))
        })?;
        return settle(lb).await;
    }
    if let Some(state) = recorded {
        match octavia.load_balancer(&state.router_lb.id).await? {
            Some(lb) if lb.provisioning_status != ProvisioningStatus::PendingDelete => {
                tracing::info!(id = %lb.id, "Router LB of the Node annotation verified");
                return settle(lb).await;
            }
            _ => tracing::warn!(
                id = %state.router_lb.id,
                "the Node annotation's Router LB is gone; looking it up by name"
            ),
        }
    }
    let cluster_tag = owner.cluster_tag();
    let found = octavia
        .load_balancers(&[("name", ROUTER_NAME), ("tags", &cluster_tag)])
        .await?
        .into_iter()
        .find(|lb| {
            lb.tags.contains(&cluster_tag)
                && lb.provisioning_status != ProvisioningStatus::PendingDelete
        });
    if let Some(lb) = found {
        tracing::info!(id = %lb.id, "Router LB found by name and tag");
        return settle(lb).await;
    }
    let subnet_id = settings
        .service_subnet
        .clone()
        .ok_or(RouterError::Missing("service_subnet", "service-subnet"))?;
    let port = vip_port(neutron, settings, owner, &subnet_id).await?;
    let address = port
        .fixed_ips
        .iter()
        .find(|ip| ip.subnet_id == subnet_id)
        .and_then(|ip| ip.ip_address.clone());
    let new = NewLoadBalancer {
        name: ROUTER_NAME.to_owned(),
        description: format!("kuryr-l7 L7 router of cluster {}", settings.cluster),
        vip_port_id: Some(port.id.clone()),
        vip_subnet_id: Some(subnet_id),
        vip_address: address,
        provider: None,
        tags: vec![cluster_tag],
    };
    let mut body = serde_json::to_value(&new).unwrap_or_default();
    let objects = match graph::tree_body(desired, owner) {
        Ok(tree) => {
            let objects = tree
                .values()
                .filter_map(Value::as_array)
                .map(Vec::len)
                .sum();
            if let Some(body) = body.as_object_mut() {
                body.extend(tree);
            }
            objects
        }
        Err(e) => {
            // The tree then comes call by call in the first sync.
            tracing::warn!("the Router LB is created empty: {e}");
            0
        }
    };
    let lb = octavia.create_load_balancer_tree(body).await?;
    tracing::info!(
        id = %lb.id,
        port = %port.id,
        listeners_and_pools = objects,
        "Router LB created with its L7 tree in one call"
    );
    Ok(lb)
}

/// The VIP port on `subnet_id`: found by `device_id`, or created (and tagged afterwards).
async fn vip_port(
    neutron: &Neutron,
    settings: &OpenStackSettings,
    owner: &Ownership,
    subnet_id: &str,
) -> Result<super::neutron::Port, RouterError> {
    let device = device_id(&settings.cluster);
    if let Some(port) = neutron
        .ports(&[("device_id", &device), ("device_owner", DEVICE_OWNER)])
        .await?
        .into_iter()
        .next()
    {
        return Ok(port);
    }
    let subnet = neutron.subnet(subnet_id).await?.ok_or_else(|| {
        RouterError::NotFound(format!(
            "[neutron_defaults] service_subnet {subnet_id}: no such subnet in Neutron"
        ))
    })?;
    let port = neutron
        .create_port(&NewPort {
            name: ROUTER_NAME.to_owned(),
            network_id: subnet.network_id,
            fixed_ips: vec![FixedIp {
                subnet_id: subnet_id.to_owned(),
                ip_address: None,
            }],
            device_id: device,
            device_owner: DEVICE_OWNER.to_owned(),
            description: format!("kuryr-l7 router VIP of cluster {}", settings.cluster),
        })
        .await?;
    neutron
        .set_tags(Taggable::Port, &port.id, &[owner.cluster_tag()])
        .await?;
    Ok(port)
}

/// The HTTP listener on port 80 the L7 policies hang on (the plan's [`HTTP_LISTENER`]).
async fn listener(octavia: &Octavia, lb: &LoadBalancer, owner: &Ownership) -> Result<(), ApiError> {
    let existing = octavia.listeners(&[("loadbalancer_id", &lb.id)]).await?;
    if existing
        .iter()
        .any(|l| l.name == HTTP_LISTENER && owner.owns(&l.tags) && l.protocol_port == 80)
    {
        return Ok(());
    }
    octavia
        .create_listener(&NewListener {
            name: HTTP_LISTENER.to_owned(),
            loadbalancer_id: lb.id.clone(),
            protocol: "HTTP".to_owned(),
            protocol_port: 80,
            default_pool_id: None,
            tags: owner.tags("Router"),
        })
        .await?;
    Ok(())
}

/// The floating IP bound to `port_id`.
async fn floating_ip(
    neutron: &Neutron,
    settings: &OpenStackSettings,
    owner: &Ownership,
    port_id: &str,
) -> Result<FloatingIp, RouterError> {
    if let Some(address) = settings.floating_ip {
        let address = address.to_string();
        let fip = neutron
            .floating_ips(&[("floating_ip_address", &address)])
            .await?
            .into_iter()
            .next()
            .ok_or_else(|| {
                RouterError::NotFound(format!(
                    "[neutron_defaults] floating_ip {address}: no such floating IP in Neutron"
                ))
            })?;
        if fip.port_id.as_deref() == Some(port_id) {
            return Ok(fip);
        }
        return Ok(neutron
            .bind_floating_ip(&fip.id, &fip.floating_network_id, Some(port_id))
            .await?);
    }
    if let Some(fip) = neutron
        .floating_ips(&[("port_id", port_id)])
        .await?
        .into_iter()
        .next()
    {
        return Ok(fip);
    }
    let subnet_id = settings
        .external_svc_subnet
        .clone()
        .ok_or(RouterError::Missing(
            "external_svc_subnet",
            "external-svc-subnet",
        ))?;
    let subnet = neutron.subnet(&subnet_id).await?.ok_or_else(|| {
        RouterError::NotFound(format!(
            "[neutron_defaults] external_svc_subnet {subnet_id}: no such subnet in Neutron"
        ))
    })?;
    let fip = neutron
        .create_floating_ip(
            &subnet.network_id,
            Some(port_id),
            None,
            &format!("kuryr-l7 router of cluster {}", settings.cluster),
        )
        .await?;
    // Tags cannot go in the POST body (Neutron 29 refuses them for floating IPs).
    neutron
        .set_tags(Taggable::FloatingIp, &fip.id, &[owner.cluster_tag()])
        .await?;
    Ok(fip)
}
