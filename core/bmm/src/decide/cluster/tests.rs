use std::collections::BTreeMap;

use proptest::prelude::*;

use super::*;
use crate::cloud::CloudInstance;
use crate::crd::{
    NetworkSecurityGroupSpec, NetworkVirtualizationType, RuleAction, RuleDirection, RuleProtocol,
    SiteRef, SubnetRole, SubnetSpec, VpcSpec,
};
use nephrite_krm::condition::{find_condition, is_condition_true};

const NOW: &str = "2026-01-01T00:00:00Z";

fn spec(subnets: &[(&str, &str)], nsg: bool, ip_block: Option<&str>) -> NvidiaBMMClusterSpec {
    NvidiaBMMClusterSpec {
        site_ref: SiteRef {
            name: Some("site-a".into()),
            id: None,
        },
        tenant_id: None,
        vpc: VpcSpec {
            name: "c1-vpc".into(),
            network_virtualization_type: NetworkVirtualizationType::EthernetVirtualizer,
            labels: None,
            network_security_group: nsg.then(|| NetworkSecurityGroupSpec {
                name: "c1-nsg".into(),
                rules: vec![SecurityRule {
                    name: "api".into(),
                    direction: RuleDirection::Ingress,
                    protocol: RuleProtocol::Tcp,
                    action: RuleAction::Permit,
                    port_range: Some("6443".into()),
                    source_cidr: None,
                    destination_cidr: None,
                    priority: None,
                }],
            }),
        },
        subnets: subnets
            .iter()
            .map(|(n, c)| SubnetSpec {
                name: n.to_string(),
                cidr: c.to_string(),
                role: SubnetRole::Worker,
                labels: None,
            })
            .collect(),
        ip_block_id: ip_block.map(str::to_string),
        control_plane_endpoint: Some(ApiEndpoint {
            host: "10.9.9.9".into(),
            port: 6443,
        }),
        authentication: None,
    }
}

/// A tiny BMM: objects appear Pending, become Ready on `settle`, deletes go through Deleting.
#[derive(Default, Debug)]
struct FakeCloud {
    next: u32,
    ip_blocks: Vec<CloudIpBlock>,
    vpcs: Vec<CloudVpc>,
    subnets: Vec<CloudSubnet>,
    nsgs: Vec<CloudNsg>,
    instances: Vec<CloudInstance>,
    creates: Vec<String>,
    deletes: Vec<(&'static str, String)>,
}

impl FakeCloud {
    fn id(&mut self) -> String {
        self.next += 1;
        format!("id-{}", self.next)
    }

    fn observe(&self, spec: &NvidiaBMMClusterSpec) -> ClusterObservation {
        let vpcs: Vec<CloudVpc> = self
            .vpcs
            .iter()
            .filter(|v| v.name == spec.vpc.name)
            .cloned()
            .collect();
        let ours = vpcs
            .iter()
            .find(|v| is_ours(&v.labels, "ns.c1"))
            .map(|v| v.id.clone());
        ClusterObservation {
            ip_blocks: self
                .ip_blocks
                .iter()
                .filter(|b| b.name == ip_block_name("ns", "c1"))
                .cloned()
                .collect(),
            subnets: self
                .subnets
                .iter()
                .filter(|s| Some(&s.vpc_id) == ours.as_ref())
                .cloned()
                .collect(),
            nsgs: self.nsgs.clone(),
            instances_in_vpc: self
                .instances
                .iter()
                .filter(|i| Some(&i.vpc_id) == ours.as_ref())
                .count(),
            vpcs,
        }
    }

    fn apply(&mut self, action: &ClusterAction) {
        match action {
            ClusterAction::CreateIpBlock(c) => {
                let id = self.id();
                self.creates.push(format!("ipblock:{}", c.name));
                self.ip_blocks.push(CloudIpBlock {
                    id,
                    name: c.name.clone(),
                    status: "Pending".into(),
                    cidr: c.cidr.to_string(),
                });
            }
            ClusterAction::CreateVpc(c) => {
                self.creates.push(format!("vpc:{}", c.name));
                self.vpcs.push(CloudVpc {
                    id: c.id.clone(),
                    name: c.name.clone(),
                    status: "Pending".into(),
                    labels: c.labels.clone(),
                    nsg_id: None,
                });
            }
            ClusterAction::CreateSubnet(c) => {
                let id = self.id();
                self.creates.push(format!("subnet:{}", c.name));
                self.subnets.push(CloudSubnet {
                    id,
                    name: c.name.clone(),
                    vpc_id: c.vpc_id.clone(),
                    status: "Pending".into(),
                    ipv4_prefix: None,
                    prefix_length: Some(c.prefix_length),
                });
            }
            ClusterAction::CreateNsg(c) => {
                let id = self.id();
                self.creates.push(format!("nsg:{}", c.name));
                self.nsgs.push(CloudNsg {
                    id,
                    name: c.name.clone(),
                    status: "Pending".into(),
                    labels: c.labels.clone(),
                });
            }
            ClusterAction::AttachNsg { vpc_id, nsg_id } => {
                self.vpcs
                    .iter_mut()
                    .filter(|v| &v.id == vpc_id)
                    .for_each(|v| v.nsg_id = Some(nsg_id.clone()));
            }
            ClusterAction::DetachNsg { vpc_id } => {
                self.vpcs
                    .iter_mut()
                    .filter(|v| &v.id == vpc_id)
                    .for_each(|v| v.nsg_id = None);
            }
            ClusterAction::DeleteNsg { id } => {
                assert!(
                    self.vpcs.iter().all(|v| v.nsg_id.as_ref() != Some(id)),
                    "NSG deleted while attached"
                );
                self.deletes.push(("nsg", id.clone()));
                self.nsgs
                    .iter_mut()
                    .filter(|n| &n.id == id)
                    .for_each(|n| n.status = "Deleting".into());
            }
            ClusterAction::DeleteSubnet { id } => {
                self.deletes.push(("subnet", id.clone()));
                self.subnets.retain(|s| &s.id != id);
            }
            ClusterAction::DeleteVpc { id } => {
                assert!(
                    self.subnets.iter().all(|s| &s.vpc_id != id),
                    "VPC deleted with subnets"
                );
                self.deletes.push(("vpc", id.clone()));
                self.vpcs
                    .iter_mut()
                    .filter(|v| &v.id == id)
                    .for_each(|v| v.status = "Deleting".into());
            }
            ClusterAction::DeleteIpBlock { id } => {
                self.deletes.push(("ipblock", id.clone()));
                self.ip_blocks
                    .iter_mut()
                    .filter(|b| &b.id == id)
                    .for_each(|b| b.status = "Deleting".into());
            }
            ClusterAction::AddFinalizer | ClusterAction::RemoveFinalizer => {}
        }
    }

    /// Time passes: Pending → Ready, Deleting → gone.
    fn settle(&mut self) {
        self.ip_blocks.retain(|o| o.status != "Deleting");
        self.vpcs.retain(|o| o.status != "Deleting");
        self.nsgs.retain(|o| o.status != "Deleting");
        self.ip_blocks
            .iter_mut()
            .for_each(|o| o.status = "Ready".into());
        self.vpcs.iter_mut().for_each(|o| o.status = "Ready".into());
        self.nsgs.iter_mut().for_each(|o| o.status = "Ready".into());
        self.subnets
            .iter_mut()
            .for_each(|o| o.status = "Ready".into());
    }
}

struct Run {
    finalizer: bool,
    status: NvidiaBMMClusterStatus,
}

/// Reconciles like a controller: decide, apply, decide again; `settle_every` passes between
/// time steps. Returns the last decision.
fn reconcile(
    cloud: &mut FakeCloud,
    spec: &NvidiaBMMClusterSpec,
    run: &mut Run,
    deleting: bool,
    passes: usize,
    settle_every: usize,
) -> ClusterDecision {
    let mut last = None;
    for pass in 0..passes {
        let fresh = format!("vpc-{pass}");
        let ctx = ClusterContext {
            namespace: "ns",
            name: "c1",
            spec,
            status: &run.status,
            has_finalizer: run.finalizer,
            deleting,
            paused: false,
            site_id: "site-1",
            tenant_id: "tenant-1",
            fresh_vpc_id: &fresh,
            endpoint: EndpointSource::SpecOnly,
            now: NOW,
        };
        let d = decide_cluster(&ctx, &cloud.observe(spec));
        for a in &d.actions {
            match a {
                ClusterAction::AddFinalizer => run.finalizer = true,
                ClusterAction::RemoveFinalizer => run.finalizer = false,
                other => cloud.apply(other),
            }
        }
        run.status = d.status.clone();
        if settle_every > 0 && pass % settle_every == settle_every - 1 {
            cloud.settle();
        }
        last = Some(d);
    }
    last.expect("at least one pass")
}

#[test]
fn provisions_in_order_and_becomes_ready() {
    let spec = spec(
        &[("cp", "10.0.0.0/24"), ("workers", "10.0.1.0/24")],
        true,
        None,
    );
    let mut cloud = FakeCloud::default();
    let mut run = Run {
        finalizer: false,
        status: Default::default(),
    };
    let first = reconcile(&mut cloud, &spec, &mut run, false, 1, 0);
    assert_eq!(
        first.actions,
        vec![ClusterAction::AddFinalizer],
        "the finalizer comes before any create"
    );
    let d = reconcile(&mut cloud, &spec, &mut run, false, 6, 1);
    assert!(d.actions.is_empty(), "{:?}", d.actions);
    assert_eq!(d.wait, Wait::Steady);
    assert!(d.status.ready);
    assert_eq!(
        d.status.initialization,
        Some(Initialization {
            provisioned: Some(true)
        })
    );
    for c in [
        conditions::VPC_READY,
        conditions::SUBNETS_READY,
        conditions::NSG_READY,
        conditions::READY,
    ] {
        assert!(
            is_condition_true(&d.status.conditions, c),
            "{c}: {:?}",
            d.status.conditions
        );
    }
    let network = d.status.network_status.expect("network status");
    assert_eq!(network.subnet_ids.len(), 2);
    assert!(network.nsg_id.is_some() && network.ip_block_id.is_some());
    assert_eq!(
        cloud.ip_blocks[0].cidr, "10.0.0.0/23",
        "the smallest covering prefix"
    );
    assert_eq!(
        d.status.failure_domains,
        vec![FailureDomain {
            name: "site-1".into(),
            control_plane: true,
            attributes: BTreeMap::new()
        }]
    );
    assert_eq!(
        cloud.vpcs[0].nsg_id, network.nsg_id,
        "the NSG is attached through the VPC"
    );
}

#[test]
fn nsg_rules_use_the_api_enums_and_default_cidrs() {
    let spec = spec(&[("cp", "10.0.0.0/24")], true, None);
    let rule = nsg_rule(&spec.vpc.network_security_group.as_ref().expect("nsg").rules[0]);
    assert_eq!(
        (rule.direction, rule.protocol, rule.action),
        ("INGRESS", "TCP", "PERMIT")
    );
    assert_eq!(rule.source_prefix, "0.0.0.0/0");
    assert_eq!(rule.destination_prefix, "0.0.0.0/0");
    assert_eq!(rule.destination_port_range.as_deref(), Some("6443"));
}

#[test]
fn without_an_endpoint_the_network_is_ready_but_not_provisioned() {
    let mut spec = spec(&[("cp", "10.0.0.0/24")], false, None);
    spec.control_plane_endpoint = None;
    let mut cloud = FakeCloud::default();
    let mut run = Run {
        finalizer: true,
        status: Default::default(),
    };
    let d = reconcile(&mut cloud, &spec, &mut run, false, 5, 1);
    assert!(!d.status.ready);
    assert_eq!(
        d.status.initialization,
        Some(Initialization {
            provisioned: Some(false)
        })
    );
    let ready = find_condition(&d.status.conditions, conditions::READY).expect("Ready");
    assert_eq!(
        ready.reason.as_deref(),
        Some(reason::WAITING_FOR_CONTROL_PLANE_ENDPOINT)
    );
    assert!(is_condition_true(
        &d.status.conditions,
        conditions::VPC_READY
    ));
}

#[test]
fn a_vpc_of_the_same_name_that_is_not_ours_is_a_conflict_and_nothing_is_created() {
    let spec = spec(&[("cp", "10.0.0.0/24")], false, Some("user-block"));
    let mut cloud = FakeCloud::default();
    cloud.vpcs.push(CloudVpc {
        id: "theirs".into(),
        name: "c1-vpc".into(),
        status: "Ready".into(),
        labels: BTreeMap::new(),
        nsg_id: None,
    });
    let mut run = Run {
        finalizer: true,
        status: Default::default(),
    };
    let d = reconcile(&mut cloud, &spec, &mut run, false, 3, 1);
    assert!(d.actions.is_empty());
    assert_eq!(d.wait, Wait::Blocked);
    assert!(cloud.creates.is_empty(), "{:?}", cloud.creates);
    let vpc = find_condition(&d.status.conditions, conditions::VPC_READY).expect("VPCReady");
    assert_eq!(vpc.reason.as_deref(), Some(reason::NAME_CONFLICT));
}

#[test]
fn a_user_supplied_ip_block_is_used_and_never_deleted() {
    let spec = spec(&[("cp", "10.0.0.0/24")], false, Some("user-block"));
    let mut cloud = FakeCloud::default();
    cloud.ip_blocks.push(CloudIpBlock {
        id: "user-block".into(),
        name: ip_block_name("ns", "c1"),
        status: "Ready".into(),
        cidr: "10.0.0.0/16".into(),
    });
    let mut run = Run {
        finalizer: true,
        status: Default::default(),
    };
    reconcile(&mut cloud, &spec, &mut run, false, 4, 1);
    assert!(!cloud.creates.iter().any(|c| c.starts_with("ipblock")));
    assert_eq!(
        run.status
            .network_status
            .as_ref()
            .and_then(|n| n.ip_block_id.as_deref()),
        Some("user-block")
    );
    reconcile(&mut cloud, &spec, &mut run, true, 10, 1);
    assert!(
        !run.finalizer,
        "the finalizer is removed once everything is gone"
    );
    assert!(
        cloud.deletes.iter().all(|(kind, _)| *kind != "ipblock"),
        "{:?}",
        cloud.deletes
    );
    assert_eq!(cloud.ip_blocks.len(), 1);
}

#[test]
fn deletion_waits_for_instances_in_the_vpc() {
    let spec = spec(&[("cp", "10.0.0.0/24")], false, None);
    let mut cloud = FakeCloud::default();
    let mut run = Run {
        finalizer: true,
        status: Default::default(),
    };
    reconcile(&mut cloud, &spec, &mut run, false, 4, 1);
    let vpc_id = cloud.vpcs[0].id.clone();
    cloud.instances.push(CloudInstance {
        id: "i1".into(),
        name: "m1".into(),
        vpc_id,
        status: "Ready".into(),
        labels: BTreeMap::new(),
        machine_id: None,
        addresses: vec![],
    });
    let d = reconcile(&mut cloud, &spec, &mut run, true, 3, 1);
    assert!(d.actions.is_empty());
    assert!(cloud.deletes.is_empty());
    let ready = find_condition(&d.status.conditions, conditions::READY).expect("Ready");
    assert_eq!(ready.reason.as_deref(), Some(reason::WAITING_FOR_INSTANCES));
    cloud.instances.clear();
    reconcile(&mut cloud, &spec, &mut run, true, 10, 1);
    assert!(!run.finalizer);
    assert!(cloud.vpcs.is_empty() && cloud.ip_blocks.is_empty());
}

#[test]
fn paused_does_nothing_and_says_so() {
    let spec = spec(&[("cp", "10.0.0.0/24")], false, None);
    let status = NvidiaBMMClusterStatus::default();
    let ctx = ClusterContext {
        namespace: "ns",
        name: "c1",
        spec: &spec,
        status: &status,
        has_finalizer: false,
        deleting: false,
        paused: true,
        site_id: "s",
        tenant_id: "t",
        fresh_vpc_id: "v",
        endpoint: EndpointSource::SpecOnly,
        now: NOW,
    };
    let d = decide_cluster(&ctx, &ClusterObservation::default());
    assert!(d.actions.is_empty());
    assert!(is_condition_true(&d.status.conditions, conditions::PAUSED));
}

#[test]
fn standalone_mode_takes_the_first_control_plane_address() {
    let mut spec = spec(&[("cp", "10.0.0.0/24")], false, None);
    spec.control_plane_endpoint = None;
    let status = NvidiaBMMClusterStatus::default();
    let ctx = ClusterContext {
        namespace: "ns",
        name: "c1",
        spec: &spec,
        status: &status,
        has_finalizer: true,
        deleting: false,
        paused: false,
        site_id: "s",
        tenant_id: "t",
        fresh_vpc_id: "v",
        endpoint: EndpointSource::FirstControlPlane(Some("10.0.0.5")),
        now: NOW,
    };
    let d = decide_cluster(&ctx, &ClusterObservation::default());
    assert_eq!(
        d.control_plane_endpoint,
        Some(ApiEndpoint {
            host: "10.0.0.5".into(),
            port: 6443
        })
    );
}

#[test]
fn a_subnet_prefix_different_from_cidr_is_reported() {
    let spec = spec(&[("cp", "10.0.0.0/24")], false, None);
    let mut cloud = FakeCloud::default();
    let mut run = Run {
        finalizer: true,
        status: Default::default(),
    };
    reconcile(&mut cloud, &spec, &mut run, false, 4, 1);
    cloud.subnets[0].ipv4_prefix = Some("10.0.3.0".into());
    let d = reconcile(&mut cloud, &spec, &mut run, false, 1, 0);
    let mismatch = find_condition(&d.status.conditions, reason::SUBNET_PREFIX_MISMATCH)
        .expect("mismatch condition");
    assert!(
        mismatch
            .message
            .as_deref()
            .is_some_and(|m| m.contains("10.0.3.0/24")),
        "{mismatch:?}"
    );
    assert_eq!(
        d.status
            .network_status
            .expect("ns")
            .subnet_prefixes
            .get("cp")
            .map(String::as_str),
        Some("10.0.3.0/24")
    );
}

fn subnet_sets() -> impl Strategy<Value = Vec<(String, String)>> {
    prop::collection::btree_set(0u8..40, 1..5).prop_map(|thirds| {
        thirds
            .into_iter()
            .map(|t| (format!("net-{t}"), format!("10.1.{t}.0/24")))
            .collect()
    })
}

proptest! {
    /// However often the decision runs between time steps, nothing is created twice, the
    /// network converges, and deletion goes NSG → subnets → VPC → IP block leaving nothing.
    #[test]
    fn nothing_created_twice_and_deletion_is_ordered_and_complete(
        subnets in subnet_sets(),
        nsg in any::<bool>(),
        passes_between_settles in 1usize..4,
    ) {
        let pairs: Vec<(&str, &str)> = subnets.iter().map(|(n, c)| (n.as_str(), c.as_str())).collect();
        let spec = spec(&pairs, nsg, None);
        let mut cloud = FakeCloud::default();
        let mut run = Run { finalizer: false, status: Default::default() };
        let d = reconcile(&mut cloud, &spec, &mut run, false, 8 * passes_between_settles, passes_between_settles);
        prop_assert!(d.status.ready, "{:?}", d.status.conditions);
        let mut seen = std::collections::BTreeSet::new();
        for c in &cloud.creates {
            prop_assert!(seen.insert(c.clone()), "{c} created twice: {:?}", cloud.creates);
        }
        prop_assert_eq!(cloud.creates.len(), 2 + subnets.len() + usize::from(nsg));

        reconcile(&mut cloud, &spec, &mut run, true, 10 * passes_between_settles, passes_between_settles);
        prop_assert!(!run.finalizer, "finalizer still there: {:?}", cloud);
        prop_assert!(cloud.vpcs.is_empty() && cloud.subnets.is_empty() && cloud.nsgs.is_empty() && cloud.ip_blocks.is_empty());
        let rank = |k: &str| ["nsg", "subnet", "vpc", "ipblock"].iter().position(|x| *x == k).unwrap_or(9);
        let order: Vec<usize> = cloud.deletes.iter().map(|(k, _)| rank(k)).collect();
        prop_assert!(order.windows(2).all(|w| w[0] <= w[1]), "{:?}", cloud.deletes);
        let mut once = std::collections::BTreeSet::new();
        for (_, id) in &cloud.deletes {
            prop_assert!(once.insert(id.clone()), "{id} deleted twice");
        }
    }

    /// Any observation: no create for something already observed as ours, no name created twice
    /// in one decision, and the IP block create covers every subnet.
    #[test]
    fn a_single_decision_never_duplicates(
        subnets in subnet_sets(),
        have_vpc in any::<bool>(),
        have_block in any::<bool>(),
        existing in prop::collection::vec(0usize..5, 0..5),
    ) {
        let pairs: Vec<(&str, &str)> = subnets.iter().map(|(n, c)| (n.as_str(), c.as_str())).collect();
        let spec = spec(&pairs, true, None);
        let mut seen = ClusterObservation::default();
        let mut labels = BTreeMap::new();
        labels.insert(OWNER_LABEL.to_string(), "ns.c1".to_string());
        if have_vpc {
            seen.vpcs.push(CloudVpc { id: "v".into(), name: "c1-vpc".into(), status: "Ready".into(), labels: labels.clone(), nsg_id: None });
        }
        if have_block {
            seen.ip_blocks.push(CloudIpBlock { id: "b".into(), name: ip_block_name("ns", "c1"), status: "Ready".into(), cidr: "10.0.0.0/8".into() });
        }
        for i in existing.iter().filter(|i| **i < subnets.len()) {
            seen.subnets.push(CloudSubnet { id: format!("s{i}"), name: subnets[*i].0.clone(), vpc_id: "v".into(), status: "Ready".into(), ipv4_prefix: None, prefix_length: None });
        }
        let status = NvidiaBMMClusterStatus::default();
        let ctx = ClusterContext {
            namespace: "ns", name: "c1", spec: &spec, status: &status, has_finalizer: true, deleting: false,
            paused: false, site_id: "s", tenant_id: "t", fresh_vpc_id: "fresh", endpoint: EndpointSource::SpecOnly, now: NOW,
        };
        let d = decide_cluster(&ctx, &seen);
        let mut names = std::collections::BTreeSet::new();
        for a in &d.actions {
            let key = match a {
                ClusterAction::CreateVpc(c) => { prop_assert!(!have_vpc); format!("vpc:{}", c.name) }
                ClusterAction::CreateIpBlock(c) => {
                    prop_assert!(!have_block);
                    for (_, cidr) in &subnets {
                        prop_assert!(c.cidr.contains(&cidr.parse::<Ipv4Cidr>().expect("cidr")));
                    }
                    format!("ipblock:{}", c.name)
                }
                ClusterAction::CreateSubnet(c) => {
                    prop_assert!(have_vpc && have_block);
                    prop_assert!(!seen.subnets.iter().any(|s| s.name == c.name));
                    format!("subnet:{}", c.name)
                }
                other => format!("{other:?}"),
            };
            prop_assert!(names.insert(key.clone()), "{key} twice");
        }
    }
}
