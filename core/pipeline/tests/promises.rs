//! Property tests for the seed's promises over random sequences of port
//! adds, renders, removals and ACL changes.

use std::collections::BTreeSet;

use nephrite_pipeline::{
    AclAction, AclRule, Ipam, Mac, Model, ModuleKind, NetworkSpec, Owner, PortRequest, RenderFacts,
    RenderPlan, diff, egress_id, port_id, violations,
};
use proptest::prelude::*;

#[derive(Debug, Clone)]
enum Op {
    Add { container: u8, network: u8 },
    Render { container: u8 },
    Remove { container: u8 },
    Acl { network: u8, deny: bool },
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        (0u8..12, 0u8..2).prop_map(|(container, network)| Op::Add { container, network }),
        (0u8..12).prop_map(|container| Op::Render { container }),
        (0u8..12).prop_map(|container| Op::Remove { container }),
        (0u8..2, any::<bool>()).prop_map(|(network, deny)| Op::Acl { network, deny }),
    ]
}

const NETS: [&str; 2] = ["blue", "red"];

fn base() -> (Model, Ipam) {
    let specs: Vec<NetworkSpec> = NETS
        .iter()
        .enumerate()
        .map(|(i, n)| {
            let spec = NetworkSpec::l2(n, format!("10.{i}.0.0/24").parse().expect("cidr"));
            // red is dual-stack: its ports carry an IPv6 address too
            if i == 1 {
                spec.with_v6("fd00:1::/64".parse().expect("cidr6"))
            } else {
                spec
            }
        })
        .collect();
    let mut model = Model::new();
    model.apply_networks(&specs).expect("networks");
    let mut ipam = Ipam::new();
    ipam.sync_networks(&specs).expect("pools");
    (model, ipam)
}

fn owner(c: u8) -> Owner {
    Owner {
        container_id: format!("c{c}"),
        ifname: "eth0".into(),
    }
}

fn apply(model: &mut Model, ipam: &mut Ipam, op: &Op) -> Option<RenderPlan> {
    let plan = match *op {
        Op::Add { container, network } => {
            let net = NETS[network as usize];
            if model.port_of(&format!("c{container}"), "eth0").is_some() {
                return None;
            }
            let (address, address6) = ipam.allocate_dual(net, &owner(container)).expect("address");
            model
                .add_port(PortRequest {
                    container_id: format!("c{container}"),
                    ifname: "eth0".into(),
                    netns: String::new(),
                    network: net.into(),
                    address,
                    address6,
                    pod: None,
                    mac: None,
                })
                .expect("add")
        }
        Op::Render { container } => {
            let id = port_id(&format!("c{container}"), "eth0");
            model.port(&id)?;
            // a re-render may report a new MAC and per-module facts
            let again = model.port(&id).is_some_and(|p| p.is_live());
            let facts = RenderFacts {
                mac: Mac([2, 0, 0, 0, u8::from(again), container]),
                ifindex: u32::from(container),
                modules: [(
                    egress_id(&id),
                    [("object".to_string(), format!("veth {id}"))].into(),
                )]
                .into(),
            };
            model.record_facts(&id, facts).expect("facts")
        }
        Op::Remove { container } => {
            let id = port_id(&format!("c{container}"), "eth0");
            let p = model.port(&id).cloned()?;
            let plan = model.remove_port(&id).expect("remove");
            ipam.release(&p.network, &owner(container));
            plan
        }
        Op::Acl { network, deny } => {
            let rules = if deny {
                vec![AclRule {
                    action: AclAction::Deny,
                    src: None,
                    dst: None,
                    protocol: None,
                    port: Some(22),
                }]
            } else {
                Vec::new()
            };
            model.set_acl(NETS[network as usize], rules).expect("acl")
        }
    };
    Some(plan)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// No hairpin, acyclic, consistent gates, every pipeline holds every
    /// other live port's egress, FIBs hold exactly the live ports — after
    /// every step of any sequence.
    #[test]
    fn invariants_hold_after_every_step(ops in prop::collection::vec(op(), 1..40)) {
        let (mut model, mut ipam) = base();
        for op in &ops {
            apply(&mut model, &mut ipam, op);
            prop_assert_eq!(violations(&model), vec![], "after {:?}", op);
        }
        // and independently of `violations`: the hairpin rule and the egress rule
        let r = model.rendered();
        for (port, p) in &r.pipelines {
            prop_assert!(!p.modules.contains(&egress_id(port)));
            let egress: BTreeSet<_> = p.modules.iter()
                .filter(|m| matches!(r.modules[*m].kind, ModuleKind::EgressPort { .. }))
                .cloned().collect();
            let expected: BTreeSet<_> = model.ports().values()
                .filter(|q| q.is_live() && q.network == p.network && &q.id != port)
                .map(|q| egress_id(&q.id)).collect();
            prop_assert_eq!(egress, expected);
        }
        // IPAM never hands out an address twice, nor the gateway
        for pool in ipam.pools().values() {
            prop_assert!(!pool.held.contains_key(&pool.gateway));
        }
    }

    /// Every plan (computed incrementally for port changes) equals the
    /// difference of the two full derivations before and after the step.
    #[test]
    fn incremental_plans_equal_the_full_difference(ops in prop::collection::vec(op(), 1..40)) {
        let (mut model, mut ipam) = base();
        for op in &ops {
            let before = model.clone();
            let Some(plan) = apply(&mut model, &mut ipam, op) else { continue };
            prop_assert_eq!(plan, diff(&before, &model), "plan of {:?}", op);
        }
    }

    /// Removing any port and inserting it back as it was (slot, facts)
    /// returns the model and its derivation to where they were, and the
    /// two plans mirror each other.
    #[test]
    fn remove_then_insert_is_identity(ops in prop::collection::vec(op(), 1..30), pick in any::<prop::sample::Index>()) {
        let (mut model, mut ipam) = base();
        for op in &ops {
            apply(&mut model, &mut ipam, op);
        }
        let ids: Vec<String> = model.ports().keys().cloned().collect();
        prop_assume!(!ids.is_empty());
        let port = model.ports()[pick.get(&ids)].clone();
        let address6 = model.address6(&port.id);
        prop_assert_eq!(address6.is_some(), port.network == "red", "dual-stack ports only");
        let before = model.clone();
        let before_rendered = model.rendered();
        let removed = model.remove_port(&port.id).expect("remove");
        prop_assert_eq!(model.address6(&port.id), None);
        let inserted = model.insert_port6(port.clone(), address6).expect("insert");
        prop_assert_eq!(inserted.addresses6.get(&port.id).copied(), address6);
        prop_assert_eq!(&model, &before);
        prop_assert_eq!(model.rendered(), before_rendered);
        prop_assert_eq!(removed.fib_removed, inserted.fib_added);
        prop_assert!(model.insert_port(port).is_err(), "a port is inserted once");
    }

    /// Adding, rendering and removing a port returns the model (and the
    /// derived modules) to where it was, and the plans mirror each other.
    #[test]
    fn add_then_remove_is_identity(
        ops in prop::collection::vec(op(), 0..25),
        network in 0u8..2,
        render in any::<bool>(),
    ) {
        let (mut model, mut ipam) = base();
        for op in &ops {
            apply(&mut model, &mut ipam, op);
        }
        let before = model.clone();
        let before_rendered = model.rendered();
        let (addr, address6) = ipam.allocate_dual(NETS[network as usize], &owner(200)).expect("address");
        let mut added = model.add_port(PortRequest {
            container_id: "new".into(),
            ifname: "eth0".into(),
            netns: String::new(),
            network: NETS[network as usize].into(),
            address: addr,
            address6,
            pod: None,
            mac: None,
        }).expect("add");
        let id = port_id("new", "eth0");
        if render {
            let facts = RenderFacts { mac: Mac([2, 1, 1, 1, 1, 1]), ifindex: 9, modules: Default::default() };
            let more = model.record_facts(&id, facts).expect("facts");
            added.fib_added.extend(more.fib_added);
            added.modules_created.extend(more.modules_created);
        }
        let removed = model.remove_port(&id).expect("remove");
        prop_assert_eq!(&model, &before);
        prop_assert_eq!(model.rendered(), before_rendered);
        let mut a: Vec<_> = added.fib_added.clone();
        let mut b: Vec<_> = removed.fib_removed.clone();
        a.sort();
        b.sort();
        prop_assert_eq!(a, b);
        let mut created: Vec<_> = added.modules_created.iter().map(|m| m.id.clone()).collect();
        let mut deleted: Vec<_> = removed.modules_deleted.iter().map(|m| m.id.clone()).collect();
        created.sort();
        deleted.sort();
        prop_assert_eq!(created, deleted);
    }

    /// IPAM: distinct owners always get distinct addresses, never the gateway.
    #[test]
    fn ipam_addresses_are_distinct(owners in prop::collection::vec(0u8..40, 1..60), releases in prop::collection::vec(0u8..40, 0..20)) {
        let mut ipam = Ipam::new();
        ipam.sync_networks(&[NetworkSpec::l2("n", "10.0.0.0/26".parse().expect("cidr"))]).expect("sync");
        for r in &releases {
            let _ = ipam.allocate("n", &owner(*r));
        }
        for r in releases.iter().step_by(2) {
            ipam.release("n", &owner(*r));
        }
        for o in &owners {
            let _ = ipam.allocate("n", &owner(*o));
        }
        let pool = ipam.pool("n").expect("pool");
        let holders: BTreeSet<_> = pool.held.values().cloned().collect();
        prop_assert_eq!(holders.len(), pool.held.len(), "one address per owner");
        prop_assert!(!pool.held.contains_key(&pool.gateway));
        prop_assert!(pool.held.keys().all(|a| pool.subnet.contains(*a) && *a != pool.subnet.network() && *a != pool.subnet.broadcast()));
    }
}
