//! The executor: observes BMM through the client, runs the pure decisions of `nephrite-bmm`,
//! performs their actions, feeds what they created back into the observation and decides
//! again until nothing is left to do. Used by standalone mode (and meant for the controllers).

use std::collections::BTreeMap;

use nephrite_bmm::cloud::{
    CloudInstance, CloudIpBlock, CloudNsg, CloudSubnet, CloudVpc, Lifecycle,
};
use nephrite_bmm::conditions;
use nephrite_bmm::crd::{
    ApiEndpoint, NvidiaBMMClusterSpec, NvidiaBMMClusterStatus, NvidiaBMMMachineSpec,
    NvidiaBMMMachineStatus,
};
use nephrite_bmm::decide::{
    Bootstrap, ClusterAction, ClusterContext, ClusterObservation, ClusterView, EndpointSource,
    MachineAction, MachineContext, Wait, decide_cluster, decide_machine, ip_block_name,
};
use nephrite_krm::condition::is_condition_true;

use crate::client::types::*;
use crate::client::{ApiError, BmmClient};

/// A reconcile that could not go on.
#[derive(Debug, thiserror::Error)]
pub enum ReconcileError {
    /// An API call failed.
    #[error("{object}: {source}")]
    Api {
        /// `cluster ns/name` or `machine ns/name`.
        object: String,
        /// The failure.
        #[source]
        source: ApiError,
    },
    /// The site in `siteRef` does not exist.
    #[error("{object}: site {site} not found")]
    SiteNotFound {
        /// The object.
        object: String,
        /// The site reference.
        site: String,
    },
}

/// One cluster as the executor keeps it.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ClusterRecord {
    /// Namespace.
    pub namespace: String,
    /// Name.
    pub name: String,
    /// Spec.
    pub spec: NvidiaBMMClusterSpec,
    /// Status.
    #[serde(default)]
    pub status: NvidiaBMMClusterStatus,
    /// Whether the finalizer is set.
    #[serde(default)]
    pub finalizer: bool,
    /// The control-plane endpoint, once known.
    #[serde(default)]
    pub control_plane_endpoint: Option<ApiEndpoint>,
    /// The cluster's `metadata.labels` (standalone mode: what `apply --register-sites` gives
    /// the preparer as the site's metadata).
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub labels: std::collections::BTreeMap<String, String>,
}

/// One machine as the executor keeps it.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MachineRecord {
    /// Namespace.
    pub namespace: String,
    /// Name.
    pub name: String,
    /// The cluster's name.
    pub cluster: String,
    /// Whether it is a control-plane machine.
    #[serde(default)]
    pub control_plane: bool,
    /// Spec.
    pub spec: NvidiaBMMMachineSpec,
    /// Status.
    #[serde(default)]
    pub status: NvidiaBMMMachineStatus,
    /// Whether the finalizer is set.
    #[serde(default)]
    pub finalizer: bool,
    /// Bootstrap user data, when given.
    #[serde(default)]
    pub bootstrap: Option<String>,
    /// Whether bootstrap data is required before the instance is created (Cluster API mode).
    #[serde(default)]
    pub bootstrap_required: bool,
    /// The failure domain asked for (`Machine.spec.failureDomain`): must be the cluster's site.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure_domain: Option<String>,
    /// How long its instance took to provision, once it was seen Ready (from the API's status
    /// history; not kept in the state file).
    #[serde(skip)]
    pub provisioned_in: Option<std::time::Duration>,
}

fn labels(l: &Option<BTreeMap<String, String>>) -> BTreeMap<String, String> {
    l.clone().unwrap_or_default()
}

fn vpc_view(v: &Vpc) -> CloudVpc {
    CloudVpc {
        id: v.id.clone(),
        name: v.name.clone(),
        status: v.status.clone().unwrap_or_default(),
        labels: labels(&v.labels),
        nsg_id: v.network_security_group_id.clone(),
    }
}

fn subnet_view(s: &Subnet) -> CloudSubnet {
    CloudSubnet {
        id: s.id.clone(),
        name: s.name.clone(),
        vpc_id: s.vpc_id.clone().unwrap_or_default(),
        status: s.status.clone().unwrap_or_default(),
        ipv4_prefix: s.ipv4_prefix.clone(),
        prefix_length: s.prefix_length,
    }
}

fn nsg_view(n: &Nsg) -> CloudNsg {
    CloudNsg {
        id: n.id.clone(),
        name: n.name.clone(),
        status: n.status.clone().unwrap_or_default(),
        labels: labels(&n.labels),
    }
}

fn block_view(b: &IpBlock) -> CloudIpBlock {
    CloudIpBlock {
        id: b.id.clone(),
        name: b.name.clone(),
        status: b.status.clone().unwrap_or_default(),
        cidr: format!(
            "{}/{}",
            b.prefix.clone().unwrap_or_default(),
            b.prefix_length.unwrap_or(0)
        ),
    }
}

/// The decision's view of an instance.
pub fn instance_view(i: &Instance) -> CloudInstance {
    CloudInstance {
        id: i.id.clone(),
        name: i.name.clone(),
        vpc_id: i.vpc_id.clone().unwrap_or_default(),
        status: i.status.clone().unwrap_or_default(),
        labels: labels(&i.labels),
        machine_id: i.machine_id.clone(),
        addresses: i
            .interfaces
            .iter()
            .flat_map(|f| f.ip_addresses.iter().cloned())
            .collect(),
    }
}

/// Whether the cluster's network is Ready (what machines wait for).
pub fn network_ready(status: &NvidiaBMMClusterStatus) -> bool {
    [
        conditions::VPC_READY,
        conditions::SUBNETS_READY,
        conditions::NSG_READY,
    ]
    .iter()
    .all(|c| is_condition_true(&status.conditions, c))
}

fn now() -> String {
    jiff::Timestamp::now().to_string()
}

/// Reconciles one cluster to a fixed point; returns what to do next.
pub async fn reconcile_cluster(
    client: &BmmClient,
    record: &mut ClusterRecord,
    deleting: bool,
    first_control_plane: Option<&str>,
) -> Result<Wait, ReconcileError> {
    let object = format!("cluster {}/{}", record.namespace, record.name);
    let api = |source| ReconcileError::Api {
        object: object.clone(),
        source,
    };
    if deleting && !record.finalizer {
        return Ok(Wait::Steady);
    }
    let site_id = match (
        &record.spec.site_ref.id,
        &record.spec.site_ref.name,
        &record.status.site_id,
    ) {
        (_, _, Some(id)) => id.clone(),
        (Some(id), _, None) => client
            .site(id)
            .await
            .map_err(api)?
            .map(|s| s.id)
            .ok_or_else(|| ReconcileError::SiteNotFound {
                object: object.clone(),
                site: id.clone(),
            })?,
        (None, Some(name), None) => client
            .site_named(name)
            .await
            .map_err(api)?
            .map(|s| s.id)
            .ok_or_else(|| ReconcileError::SiteNotFound {
                object: object.clone(),
                site: name.clone(),
            })?,
        (None, None, None) => {
            return Err(ReconcileError::SiteNotFound {
                object,
                site: "<none>".into(),
            });
        }
    };
    let tenant_id = match (&record.spec.tenant_id, &record.status.tenant_id) {
        (Some(t), _) | (None, Some(t)) => t.clone(),
        (None, None) => client.current_tenant().await.map_err(api)?.id,
    };
    let mut seen = ClusterObservation {
        ip_blocks: client
            .ip_blocks_named(&site_id, &ip_block_name(&record.namespace, &record.name))
            .await
            .map_err(api)?
            .iter()
            .map(block_view)
            .collect(),
        vpcs: client
            .vpcs_named(&site_id, &record.spec.vpc.name)
            .await
            .map_err(api)?
            .iter()
            .map(vpc_view)
            .collect(),
        ..Default::default()
    };
    if let Some(nsg) = &record.spec.vpc.network_security_group {
        seen.nsgs = client
            .nsgs_named(&site_id, &nsg.name)
            .await
            .map_err(api)?
            .iter()
            .map(nsg_view)
            .collect();
    }
    let owner = nephrite_bmm::owner_value(&record.namespace, &record.name);
    if let Some(vpc) = seen
        .vpcs
        .iter()
        .find(|v| nephrite_bmm::cloud::is_ours(&v.labels, &owner))
        .cloned()
    {
        seen.subnets = client
            .subnets_of(&vpc.id)
            .await
            .map_err(api)?
            .iter()
            .map(subnet_view)
            .collect();
        // Instances matter only to a deletion, which waits until the VPC has none.
        if deleting {
            seen.instances_in_vpc = client.instances_in_vpc(&vpc.id).await.map_err(api)?.len();
        }
    }
    let mut wait = Wait::Steady;
    for _ in 0..16 {
        let fresh = uuid::Uuid::new_v4().to_string();
        let now = now();
        let ctx = ClusterContext {
            namespace: &record.namespace,
            name: &record.name,
            spec: &record.spec,
            status: &record.status,
            has_finalizer: record.finalizer,
            deleting,
            paused: false,
            site_id: &site_id,
            tenant_id: &tenant_id,
            fresh_vpc_id: &fresh,
            endpoint: EndpointSource::FirstControlPlane(first_control_plane),
            now: &now,
        };
        let decision = decide_cluster(&ctx, &seen);
        record.status = decision.status;
        if decision.control_plane_endpoint.is_some() {
            record.control_plane_endpoint = decision.control_plane_endpoint;
        }
        wait = decision.wait;
        if decision.actions.is_empty() {
            break;
        }
        for action in decision.actions {
            perform_cluster(client, record, &mut seen, action)
                .await
                .map_err(api)?;
        }
    }
    Ok(wait)
}

async fn perform_cluster(
    client: &BmmClient,
    record: &mut ClusterRecord,
    seen: &mut ClusterObservation,
    action: ClusterAction,
) -> Result<(), ApiError> {
    match action {
        ClusterAction::AddFinalizer => record.finalizer = true,
        ClusterAction::RemoveFinalizer => record.finalizer = false,
        ClusterAction::CreateIpBlock(c) => {
            let block = client
                .create_ip_block(&IpBlockCreateRequest {
                    name: c.name,
                    site_id: c.site_id,
                    routing_type: "Datacenter Only".into(),
                    prefix: c.cidr.network().to_string(),
                    prefix_length: c.cidr.prefix_len(),
                    protocol_version: "IPv4".into(),
                })
                .await?;
            seen.ip_blocks.push(block_view(&block));
        }
        ClusterAction::CreateVpc(c) => {
            let vpc = client
                .create_vpc(&VpcCreateRequest {
                    id: Some(c.id),
                    name: c.name,
                    site_id: c.site_id,
                    network_virtualization_type: Some(c.virtualization.as_str().to_string()),
                    labels: Some(c.labels),
                })
                .await?;
            seen.vpcs.retain(|v| v.id != vpc.id);
            seen.vpcs.push(vpc_view(&vpc));
        }
        ClusterAction::CreateSubnet(c) => {
            let subnet = client
                .create_subnet(&SubnetCreateRequest {
                    name: c.name,
                    vpc_id: c.vpc_id,
                    ipv4_block_id: c.ip_block_id,
                    prefix_length: c.prefix_length,
                })
                .await?;
            seen.subnets.retain(|s| s.id != subnet.id);
            seen.subnets.push(subnet_view(&subnet));
        }
        ClusterAction::CreateNsg(c) => {
            let rules = c
                .rules
                .into_iter()
                .map(|r| NsgRule {
                    name: Some(r.name),
                    direction: r.direction.into(),
                    source_port_range: None,
                    destination_port_range: r.destination_port_range,
                    protocol: r.protocol.into(),
                    action: r.action.into(),
                    priority: r.priority,
                    source_prefix: r.source_prefix,
                    destination_prefix: r.destination_prefix,
                })
                .collect();
            let nsg = client
                .create_nsg(&NsgCreateRequest {
                    name: c.name,
                    site_id: c.site_id,
                    rules,
                    labels: Some(c.labels),
                })
                .await?;
            seen.nsgs.retain(|n| n.id != nsg.id);
            seen.nsgs.push(nsg_view(&nsg));
        }
        ClusterAction::AttachNsg { vpc_id, nsg_id } => {
            let vpc = client.set_vpc_nsg(&vpc_id, Some(&nsg_id)).await?;
            seen.vpcs.retain(|v| v.id != vpc.id);
            seen.vpcs.push(vpc_view(&vpc));
        }
        ClusterAction::DetachNsg { vpc_id } => {
            let vpc = client.set_vpc_nsg(&vpc_id, None).await?;
            seen.vpcs.retain(|v| v.id != vpc.id);
            seen.vpcs.push(vpc_view(&vpc));
        }
        ClusterAction::DeleteNsg { id } => {
            client.delete_nsg(&id).await?;
            seen.nsgs
                .iter_mut()
                .filter(|n| n.id == id)
                .for_each(|n| n.status = "Deleting".into());
        }
        ClusterAction::DeleteSubnet { id } => {
            client.delete_subnet(&id).await?;
            seen.subnets.retain(|s| s.id != id);
        }
        ClusterAction::DeleteVpc { id } => {
            client.delete_vpc(&id).await?;
            seen.vpcs
                .iter_mut()
                .filter(|v| v.id == id)
                .for_each(|v| v.status = "Deleting".into());
        }
        ClusterAction::DeleteIpBlock { id } => {
            client.delete_ip_block(&id).await?;
            seen.ip_blocks
                .iter_mut()
                .filter(|b| b.id == id)
                .for_each(|b| b.status = "Deleting".into());
        }
    }
    Ok(())
}

/// Reconciles one machine of a cluster to a fixed point.
pub async fn reconcile_machine(
    client: &BmmClient,
    cluster: &ClusterRecord,
    record: &mut MachineRecord,
    deleting: bool,
) -> Result<Wait, ReconcileError> {
    let object = format!("machine {}/{}", record.namespace, record.name);
    let api = |source| ReconcileError::Api {
        object: object.clone(),
        source,
    };
    if deleting && !record.finalizer {
        return Ok(Wait::Steady);
    }
    let Some(site_id) = cluster.status.site_id.clone() else {
        return Ok(Wait::Dependency);
    };
    // The instance is fetched by the id the status records. Without one, a deletion looks it
    // up by name (a crash may have come between its create and the status write); otherwise
    // nothing is looked up: the create adopts an instance of the same name (409 or lookup).
    let mut instances: Vec<CloudInstance> = Vec::new();
    match &record.status.instance_id {
        Some(id) => {
            if let Some(i) = client.instance(id).await.map_err(api)? {
                record.provisioned_in = i.provisioning_time();
                instances.push(instance_view(&i));
            }
        }
        None if deleting => {
            instances = client
                .instances_named(&site_id, &record.name)
                .await
                .map_err(api)?
                .iter()
                .map(instance_view)
                .collect();
        }
        None => {}
    }
    let subnet_ids = cluster
        .status
        .network_status
        .as_ref()
        .map(|n| n.subnet_ids.clone())
        .unwrap_or_default();
    let tenant = cluster.status.tenant_id.clone().unwrap_or_default();
    let mut wait = Wait::Steady;
    for _ in 0..8 {
        let now = now();
        let ctx = MachineContext {
            namespace: &record.namespace,
            name: &record.name,
            spec: &record.spec,
            status: &record.status,
            has_finalizer: record.finalizer,
            deleting,
            paused: false,
            cluster: Some(ClusterView {
                ready: network_ready(&cluster.status),
                site_id: &site_id,
                tenant_id: &tenant,
                vpc_id: cluster.status.vpc_id.as_deref(),
                subnet_ids: &subnet_ids,
            }),
            bootstrap: match (&record.bootstrap, record.bootstrap_required) {
                (Some(data), _) => Bootstrap::Ready(data),
                (None, true) => Bootstrap::Missing,
                (None, false) => Bootstrap::NotRequired,
            },
            failure_domain: record.failure_domain.as_deref(),
            now: &now,
        };
        let decision = decide_machine(&ctx, &instances);
        record.status = decision.status;
        if decision.provider_id.is_some() {
            record.spec.provider_id = decision.provider_id;
        }
        wait = decision.wait;
        if decision.actions.is_empty() {
            break;
        }
        for action in decision.actions {
            match action {
                MachineAction::AddFinalizer => record.finalizer = true,
                MachineAction::RemoveFinalizer => record.finalizer = false,
                MachineAction::CreateInstance(c) => {
                    let c = *c;
                    let created = client
                        .create_instance(&InstanceCreateRequest {
                            name: c.name,
                            tenant_id: c.tenant_id,
                            instance_type_id: c.instance_type_id,
                            machine_id: c.machine_id,
                            vpc_id: c.vpc_id,
                            user_data: c.user_data,
                            operating_system_id: c.operating_system_id,
                            labels: Some(c.labels),
                            interfaces: c
                                .interfaces
                                .into_iter()
                                .map(|i| InterfaceCreateRequest {
                                    subnet_id: i.subnet_id,
                                    is_physical: i.is_physical,
                                    virtual_function_id: i.virtual_function_id,
                                })
                                .collect(),
                            ssh_key_group_ids: c.ssh_key_group_ids,
                            allow_unhealthy_machine: c.allow_unhealthy_machine,
                        })
                        .await
                        .map_err(api)?;
                    instances.retain(|i| i.id != created.id);
                    instances.push(instance_view(&created));
                }
                MachineAction::DeleteInstance { id } => {
                    client.delete_instance(&id).await.map_err(api)?;
                    instances
                        .iter_mut()
                        .filter(|i| i.id == id)
                        .for_each(|i| i.status = "Terminating".into());
                }
            }
        }
    }
    Ok(wait)
}

/// Whether a machine's instance is Ready.
pub fn machine_ready(record: &MachineRecord) -> bool {
    record.status.ready
        && record
            .status
            .instance_state
            .as_deref()
            .is_some_and(|s| Lifecycle::of(s) == Lifecycle::Ready)
}
