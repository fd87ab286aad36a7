use std::collections::BTreeMap;

use nephrite_krm::condition::{find_condition, is_condition_true};
use proptest::prelude::*;

use super::*;
use crate::crd::{AdditionalInterface, InstanceTypeRef, MachineNetwork};

const NOW: &str = "2026-01-01T00:00:00Z";

fn spec() -> NvidiaBMMMachineSpec {
    NvidiaBMMMachineSpec {
        provider_id: None,
        instance_type: InstanceTypeRef {
            id: Some("type-1".into()),
            machine_id: None,
            allow_unhealthy_machine: None,
        },
        operating_system: None,
        network: MachineNetwork {
            subnet_name: "cp".into(),
            additional_interfaces: vec![AdditionalInterface {
                subnet_name: "storage".into(),
                is_physical: false,
                virtual_function_id: Some(2),
            }],
        },
        ssh_key_groups: vec![],
        labels: None,
    }
}

fn subnets() -> BTreeMap<String, String> {
    [
        ("cp".to_string(), "sub-cp".to_string()),
        ("storage".to_string(), "sub-st".to_string()),
    ]
    .into_iter()
    .collect()
}

struct Machine {
    spec: NvidiaBMMMachineSpec,
    status: NvidiaBMMMachineStatus,
    finalizer: bool,
    deleting: bool,
}

fn decide(
    m: &Machine,
    subnet_ids: &BTreeMap<String, String>,
    bootstrap: Bootstrap<'_>,
    instances: &[CloudInstance],
) -> MachineDecision {
    let ctx = MachineContext {
        namespace: "ns",
        name: "m1",
        spec: &m.spec,
        status: &m.status,
        has_finalizer: m.finalizer,
        deleting: m.deleting,
        paused: false,
        cluster: Some(ClusterView {
            ready: true,
            site_id: "site-1",
            tenant_id: "t",
            vpc_id: Some("vpc-1"),
            subnet_ids,
        }),
        bootstrap,
        failure_domain: None,
        now: NOW,
    };
    decide_machine(&ctx, instances)
}

fn instance(status: &str, ours: bool) -> CloudInstance {
    let mut labels = BTreeMap::new();
    if ours {
        labels.insert(OWNER_LABEL.to_string(), "ns.m1".to_string());
    }
    CloudInstance {
        id: "inst-1".into(),
        name: "m1".into(),
        vpc_id: "vpc-1".into(),
        status: status.into(),
        labels,
        machine_id: Some("mach-7".into()),
        addresses: vec!["10.0.0.5".into()],
    }
}

#[test]
fn waits_for_bootstrap_data_then_finalizer_then_creates_with_all_interfaces() {
    let ids = subnets();
    let mut m = Machine {
        spec: spec(),
        status: Default::default(),
        finalizer: false,
        deleting: false,
    };
    let d = decide(&m, &ids, Bootstrap::Missing, &[]);
    assert!(d.actions.is_empty());
    assert_eq!(d.wait, Wait::Dependency);
    assert_eq!(
        find_condition(&d.status.conditions, conditions::READY).and_then(|c| c.reason.as_deref()),
        Some(reason::WAITING_FOR_BOOTSTRAP)
    );
    let d = decide(&m, &ids, Bootstrap::Ready("#cloud-config"), &[]);
    assert_eq!(d.actions, vec![MachineAction::AddFinalizer]);
    m.finalizer = true;
    let d = decide(&m, &ids, Bootstrap::Ready("#cloud-config"), &[]);
    let [MachineAction::CreateInstance(create)] = d.actions.as_slice() else {
        panic!("{:?}", d.actions)
    };
    assert_eq!(create.name, "m1");
    assert_eq!(create.instance_type_id.as_deref(), Some("type-1"));
    assert_eq!(create.user_data.as_deref(), Some("#cloud-config"));
    assert_eq!(create.interfaces.len(), 2);
    assert_eq!(create.interfaces[0].subnet_id, "sub-cp");
    assert_eq!(
        create.interfaces[1],
        InterfaceCreate {
            subnet_id: "sub-st".into(),
            is_physical: false,
            virtual_function_id: Some(2)
        }
    );
    assert_eq!(
        create.labels.get(OWNER_LABEL).map(String::as_str),
        Some("ns.m1")
    );
}

#[test]
fn a_targeted_machine_is_sent_instead_of_the_type() {
    let ids = subnets();
    let mut m = Machine {
        spec: spec(),
        status: Default::default(),
        finalizer: true,
        deleting: false,
    };
    m.spec.instance_type.machine_id = Some("mach-3".into());
    let d = decide(&m, &ids, Bootstrap::NotRequired, &[]);
    let [MachineAction::CreateInstance(create)] = d.actions.as_slice() else {
        panic!("{:?}", d.actions)
    };
    assert_eq!(
        (
            create.instance_type_id.as_deref(),
            create.machine_id.as_deref()
        ),
        (None, Some("mach-3"))
    );
}

#[test]
fn an_existing_instance_of_ours_is_adopted_not_created_again() {
    let ids = subnets();
    // A crash between the create call and the status write: status knows nothing.
    let m = Machine {
        spec: spec(),
        status: Default::default(),
        finalizer: true,
        deleting: false,
    };
    let d = decide(
        &m,
        &ids,
        Bootstrap::Ready("x"),
        &[instance("Provisioning", true)],
    );
    assert!(d.actions.is_empty(), "{:?}", d.actions);
    assert_eq!(d.status.instance_id.as_deref(), Some("inst-1"));
    assert_eq!(d.provider_id.as_deref(), Some("nvidia-bmm://site-1/inst-1"));
    assert_eq!(d.wait, Wait::Poll);
}

#[test]
fn ready_instance_gives_addresses_provider_id_and_provisioned() {
    let ids = subnets();
    let m = Machine {
        spec: spec(),
        status: Default::default(),
        finalizer: true,
        deleting: false,
    };
    let d = decide(&m, &ids, Bootstrap::Ready("x"), &[instance("Ready", true)]);
    assert!(d.status.ready);
    assert_eq!(
        d.status.initialization,
        Some(Initialization {
            provisioned: Some(true)
        })
    );
    assert_eq!(
        d.status.addresses,
        vec![
            MachineAddress {
                type_: MachineAddressType::InternalIP,
                address: "10.0.0.5".into()
            },
            MachineAddress {
                type_: MachineAddressType::Hostname,
                address: "m1".into()
            },
        ]
    );
    assert_eq!(d.status.failure_domain.as_deref(), Some("site-1"));
    assert_eq!(d.status.machine_id.as_deref(), Some("mach-7"));
    for c in [
        conditions::INSTANCE_PROVISIONED,
        conditions::NETWORK_CONFIGURED,
        conditions::READY,
    ] {
        assert!(is_condition_true(&d.status.conditions, c), "{c}");
    }
    assert_eq!(d.wait, Wait::Steady);
}

#[test]
fn a_vanished_instance_drops_ready_keeps_provisioned_and_is_not_replaced() {
    let ids = subnets();
    let mut m = Machine {
        spec: spec(),
        status: Default::default(),
        finalizer: true,
        deleting: false,
    };
    m.status = decide(&m, &ids, Bootstrap::Ready("x"), &[instance("Ready", true)]).status;
    let d = decide(&m, &ids, Bootstrap::Ready("x"), &[]);
    assert!(d.actions.is_empty(), "no replacement: {:?}", d.actions);
    assert!(!d.status.ready);
    assert_eq!(
        d.status.initialization,
        Some(Initialization {
            provisioned: Some(true)
        })
    );
    assert_eq!(
        find_condition(&d.status.conditions, conditions::READY).and_then(|c| c.reason.as_deref()),
        Some(reason::INSTANCE_NOT_FOUND)
    );
    let e = decide(&m, &ids, Bootstrap::Ready("x"), &[instance("Error", true)]);
    assert!(!e.status.ready);
    assert_eq!(
        find_condition(&e.status.conditions, conditions::READY).and_then(|c| c.reason.as_deref()),
        Some(reason::INSTANCE_ERROR)
    );
    assert_eq!(
        e.status.initialization,
        Some(Initialization {
            provisioned: Some(true)
        })
    );
}

#[test]
fn someone_elses_instance_of_that_name_is_a_conflict() {
    let ids = subnets();
    let m = Machine {
        spec: spec(),
        status: Default::default(),
        finalizer: true,
        deleting: false,
    };
    let d = decide(&m, &ids, Bootstrap::Ready("x"), &[instance("Ready", false)]);
    assert!(d.actions.is_empty());
    assert_eq!(d.wait, Wait::Blocked);
    assert_eq!(
        find_condition(&d.status.conditions, conditions::READY).and_then(|c| c.reason.as_deref()),
        Some(reason::NAME_CONFLICT)
    );
}

#[test]
fn unknown_subnet_blocks_with_a_message() {
    let m = Machine {
        spec: spec(),
        status: Default::default(),
        finalizer: true,
        deleting: false,
    };
    let only_cp: BTreeMap<String, String> = [("cp".to_string(), "sub-cp".to_string())]
        .into_iter()
        .collect();
    let d = decide(&m, &only_cp, Bootstrap::Ready("x"), &[]);
    assert!(d.actions.is_empty());
    assert_eq!(d.wait, Wait::Blocked);
    let ready = find_condition(&d.status.conditions, conditions::READY).expect("Ready");
    assert_eq!(ready.reason.as_deref(), Some(reason::SUBNET_NOT_FOUND));
    assert!(
        ready
            .message
            .as_deref()
            .is_some_and(|m| m.contains("storage"))
    );
}

#[test]
fn deletion_deletes_then_waits_until_gone_then_removes_the_finalizer() {
    let ids = subnets();
    let m = Machine {
        spec: spec(),
        status: Default::default(),
        finalizer: true,
        deleting: true,
    };
    let d = decide(&m, &ids, Bootstrap::Missing, &[instance("Ready", true)]);
    assert_eq!(
        d.actions,
        vec![MachineAction::DeleteInstance {
            id: "inst-1".into()
        }]
    );
    let d = decide(
        &m,
        &ids,
        Bootstrap::Missing,
        &[instance("Terminating", true)],
    );
    assert!(
        d.actions.is_empty(),
        "the finalizer stays while the instance terminates"
    );
    assert_eq!(d.wait, Wait::Poll);
    let d = decide(&m, &ids, Bootstrap::Missing, &[]);
    assert_eq!(d.actions, vec![MachineAction::RemoveFinalizer]);
    // An instance in Error is still deleted.
    let d = decide(&m, &ids, Bootstrap::Missing, &[instance("Error", true)]);
    assert_eq!(
        d.actions,
        vec![MachineAction::DeleteInstance {
            id: "inst-1".into()
        }]
    );
}

#[test]
fn waits_for_the_cluster_and_refuses_a_foreign_failure_domain() {
    let ids = subnets();
    let spec = spec();
    let status = NvidiaBMMMachineStatus::default();
    let mut ctx = MachineContext {
        namespace: "ns",
        name: "m1",
        spec: &spec,
        status: &status,
        has_finalizer: true,
        deleting: false,
        paused: false,
        cluster: Some(ClusterView {
            ready: false,
            site_id: "site-1",
            tenant_id: "t",
            vpc_id: Some("vpc-1"),
            subnet_ids: &ids,
        }),
        bootstrap: Bootstrap::Ready("x"),
        failure_domain: None,
        now: NOW,
    };
    let d = decide_machine(&ctx, &[]);
    assert!(d.actions.is_empty());
    assert_eq!(d.wait, Wait::Dependency);
    ctx.cluster = Some(ClusterView {
        ready: true,
        site_id: "site-1",
        tenant_id: "t",
        vpc_id: Some("vpc-1"),
        subnet_ids: &ids,
    });
    ctx.failure_domain = Some("site-2");
    let d = decide_machine(&ctx, &[]);
    assert!(d.actions.is_empty());
    assert_eq!(d.wait, Wait::Blocked);
}

proptest! {
    /// Whatever happened before (status written or lost, instance in any state), a machine with
    /// an instance of ours never gets a second create.
    #[test]
    fn never_creates_when_an_instance_of_ours_exists(
        state in prop::sample::select(vec!["Pending", "Provisioning", "Configuring", "Ready", "Updating", "Rebooting", "Terminating", "Error"]),
        status_lost in any::<bool>(),
        finalizer in any::<bool>(),
    ) {
        let ids = subnets();
        let mut m = Machine { spec: spec(), status: Default::default(), finalizer, deleting: false };
        if !status_lost {
            m.status.instance_id = Some("inst-1".into());
        }
        let d = decide(&m, &ids, Bootstrap::Ready("x"), &[instance(state, true)]);
        prop_assert!(!d.actions.iter().any(|a| matches!(a, MachineAction::CreateInstance(_))), "{:?}", d.actions);
        prop_assert_eq!(d.status.instance_id.as_deref(), Some("inst-1"));
    }
}
