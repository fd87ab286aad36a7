use super::*;
use crate::addr::Mac;
use crate::forward::{Frame, Payload, forward};
use crate::invariant::violations;
use crate::module::{ModuleKind, copy_id, egress_id, ingress_id};
use crate::network::{AclAction, AclProtocol, MetaFunction, MetaModule, NetworkKind};
use crate::print::{pipeline_dot, pipeline_text};

fn net(name: &str, subnet: &str) -> NetworkSpec {
    NetworkSpec::l2(name, subnet.parse().expect("cidr"))
}

fn req(c: &str, network: &str, addr: &str) -> PortRequest {
    PortRequest {
        container_id: c.into(),
        ifname: "eth0".into(),
        netns: format!("/var/run/netns/{c}"),
        network: network.into(),
        address: addr.parse().expect("cidr"),
        address6: None,
        pod: None,
        mac: None,
    }
}

fn facts(n: u8) -> RenderFacts {
    RenderFacts {
        mac: Mac([2, 0, 0, 0, 0, n]),
        ifindex: u32::from(n) + 100,
        modules: Default::default(),
    }
}

fn two_ports() -> Model {
    let mut m = Model::new();
    m.apply_networks(&[net("blue", "10.1.0.0/24")])
        .expect("nets");
    m.add_port(req("a", "blue", "10.1.0.2/24")).expect("a");
    m.record_facts(&port_id("a", "eth0"), facts(1)).expect("fa");
    m.add_port(req("b", "blue", "10.1.0.3/24")).expect("b");
    m.record_facts(&port_id("b", "eth0"), facts(2)).expect("fb");
    m
}

#[test]
fn two_port_pipelines_match_the_seed_picture() {
    let m = two_ports();
    assert_eq!(violations(&m), vec![]);
    let r = m.rendered();
    let a = port_id("a", "eth0");
    let b = port_id("b", "eth0");
    let pa = &r.pipelines[&a];
    assert_eq!(
        pa.modules,
        vec![
            ingress_id(&a),
            copy_id("acl", &a),
            copy_id("switch", &a),
            egress_id(&b)
        ]
    );
    let sw = &r.modules[&copy_id("switch", &a)];
    match &sw.kind {
        ModuleKind::L2Switch { fib } => {
            assert_eq!(fib.len(), 1);
            assert_eq!(fib.get(&Mac([2, 0, 0, 0, 0, 2])), Some(&1));
        }
        other => panic!("not a switch: {other:?}"),
    }
    assert_eq!(sw.egress.get(&1), Some(&egress_id(&b)));
    // b's egress is fed by a's switch at a's slot (0)
    assert_eq!(
        r.modules[&egress_id(&b)].ingress.get(&0),
        Some(&copy_id("switch", &a))
    );
}

#[test]
fn add_port_plan_then_facts_plan() {
    let mut m = two_ports();
    let plan = m.add_port(req("c", "blue", "10.1.0.4/24")).expect("c");
    let c = port_id("c", "eth0");
    assert_eq!(plan.ports_added.len(), 1);
    assert_eq!(plan.ports_added[0].id, c);
    let created: Vec<_> = plan.modules_created.iter().map(|m| m.id.clone()).collect();
    assert!(created.contains(&ingress_id(&c)));
    assert!(created.contains(&copy_id("switch", &c)));
    assert!(!created.contains(&egress_id(&c)), "not live yet");
    // c's pipeline already reaches a and b
    assert_eq!(plan.fib_added.iter().filter(|f| f.port == c).count(), 2);

    let plan = m.record_facts(&c, facts(3)).expect("facts");
    assert!(plan.modules_created.iter().any(|m| m.id == egress_id(&c)));
    let to_c: Vec<_> = plan
        .fib_added
        .iter()
        .filter(|f| f.egress_port == c)
        .collect();
    assert_eq!(to_c.len(), 2, "a's and b's switches learn c: {plan:?}");
    assert!(plan.fib_removed.is_empty());
    assert_eq!(violations(&m), vec![]);
}

#[test]
fn remove_port_withdraws_its_egress_and_fib_entries() {
    let mut m = two_ports();
    let b = port_id("b", "eth0");
    let plan = m.remove_port(&b).expect("remove");
    assert_eq!(plan.ports_removed.len(), 1);
    assert!(plan.modules_deleted.iter().any(|x| x.id == egress_id(&b)));
    assert!(plan.modules_deleted.iter().any(|x| x.id == ingress_id(&b)));
    assert_eq!(plan.fib_removed.len(), 2);
    assert!(matches!(m.remove_port(&b), Err(Error::UnknownPort(_))));
}

#[test]
fn add_refuses_bad_requests() {
    let mut m = two_ports();
    assert!(matches!(
        m.add_port(req("a", "blue", "10.1.0.9/24")),
        Err(Error::PortExists { .. })
    ));
    assert!(matches!(
        m.add_port(req("x", "red", "10.1.0.9/24")),
        Err(Error::UnknownNetwork(_))
    ));
    for bad in [
        "10.1.0.1/24",
        "10.1.0.2/24",
        "10.2.0.9/24",
        "10.1.0.255/24",
        "10.1.0.9/25",
    ] {
        assert!(
            matches!(
                m.add_port(req("x", "blue", bad)),
                Err(Error::InvalidAddress { .. })
            ),
            "{bad}"
        );
    }
}

#[test]
fn acl_change_reaches_every_port_pipeline_of_the_network_only() {
    let mut m = two_ports();
    m.apply_networks(&[net("blue", "10.1.0.0/24"), net("red", "10.2.0.0/24")])
        .expect("nets");
    m.add_port(req("r", "red", "10.2.0.2/24")).expect("r");
    let rule = AclRule {
        action: AclAction::Deny,
        src: Some("10.1.0.2/32".parse().expect("cidr")),
        dst: None,
        protocol: Some(AclProtocol::Icmp),
        port: None,
    };
    let plan = m.set_acl("blue", vec![rule.clone()]).expect("acl");
    let ports: Vec<_> = plan.acl_changed.iter().map(|a| a.port.clone()).collect();
    assert_eq!(ports, vec![port_id("a", "eth0"), port_id("b", "eth0")]);
    assert!(plan.fib_added.is_empty() && plan.fib_removed.is_empty());

    // and the sim honours it: a → b ICMP is dropped, b → a passes
    let r = m.rendered();
    let icmp = |src: &str, dst: &str, dmac: u8| Frame {
        src_mac: Mac([2, 0, 0, 0, 0, 9]),
        dst_mac: Mac([2, 0, 0, 0, 0, dmac]),
        payload: Payload::Ipv4 {
            src: src.parse().expect("ip"),
            dst: dst.parse().expect("ip"),
            protocol: AclProtocol::Icmp,
            port: None,
        },
    };
    let t = forward(&r, &port_id("a", "eth0"), &icmp("10.1.0.2", "10.1.0.3", 2));
    assert!(t.delivered.is_empty());
    assert_eq!(t.dropped[0].1, "acl deny");
    let t = forward(&r, &port_id("b", "eth0"), &icmp("10.1.0.3", "10.1.0.2", 1));
    assert_eq!(t.delivered, vec![port_id("a", "eth0")]);
}

#[test]
fn meta_pipeline_change_propagates() {
    let mut m = two_ports();
    let meta = MetaPipeline {
        key: "blue".into(),
        modules: vec![
            MetaModule {
                name: "acl".into(),
                function: MetaFunction::Acl,
                egress: [(0, "acl2".to_string())].into(),
            },
            MetaModule {
                name: "acl2".into(),
                function: MetaFunction::Acl,
                egress: [(0, "switch".to_string())].into(),
            },
            MetaModule {
                name: "switch".into(),
                function: MetaFunction::L2Switch,
                egress: Default::default(),
            },
        ],
    };
    let plan = m.set_meta_pipeline(meta).expect("meta");
    assert_eq!(plan.modules_created.len(), 2, "one acl2 per port");
    assert_eq!(violations(&m), vec![]);
    let bad = MetaPipeline {
        key: "blue".into(),
        modules: vec![MetaModule {
            name: "acl".into(),
            function: MetaFunction::Acl,
            egress: [(0, "acl".to_string())].into(),
        }],
    };
    assert!(m.set_meta_pipeline(bad).is_err());
}

#[test]
fn fib_miss_and_isolation_in_the_sim() {
    let mut m = two_ports();
    m.apply_networks(&[net("blue", "10.1.0.0/24"), net("red", "10.1.0.0/24")])
        .expect("nets");
    m.add_port(req("r", "red", "10.1.0.2/24"))
        .expect("same address, other network");
    m.record_facts(&port_id("r", "eth0"), facts(7))
        .expect("facts");
    let r = m.rendered();
    let frame = |dmac: Mac| Frame {
        src_mac: Mac([2, 0, 0, 0, 0, 1]),
        dst_mac: dmac,
        payload: Payload::Arp,
    };
    let a = port_id("a", "eth0");
    // unknown unicast MAC: dropped, counted as a FIB miss
    let t = forward(&r, &a, &frame(Mac([2, 9, 9, 9, 9, 9])));
    assert!(t.delivered.is_empty());
    assert_eq!(t.dropped[0].1, "fib miss");
    // red's MAC is in no FIB of blue
    assert!(
        forward(&r, &a, &frame(Mac([2, 0, 0, 0, 0, 7])))
            .delivered
            .is_empty()
    );
    // broadcast reaches every other blue port, never itself, never red
    assert_eq!(
        forward(&r, &a, &frame(Mac::BROADCAST)).delivered,
        vec![port_id("b", "eth0")]
    );
}

#[test]
fn l3_network_routes_by_address() {
    let mut m = Model::new();
    let mut spec = net("routed", "10.9.0.0/24");
    spec.kind = NetworkKind::L3;
    m.apply_networks(&[spec]).expect("nets");
    for (c, ip, n) in [("a", "10.9.0.2/24", 1), ("b", "10.9.0.3/24", 2)] {
        m.add_port(req(c, "routed", ip)).expect("add");
        m.record_facts(&port_id(c, "eth0"), facts(n))
            .expect("facts");
    }
    assert_eq!(violations(&m), vec![]);
    let r = m.rendered();
    assert!(
        r.modules
            .contains_key(&copy_id("router", &port_id("a", "eth0")))
    );
    let t = forward(
        &r,
        &port_id("a", "eth0"),
        &Frame {
            src_mac: Mac([2, 0, 0, 0, 0, 1]),
            dst_mac: Mac([2, 0, 0, 0, 0, 0x77]),
            payload: Payload::Ipv4 {
                src: "10.9.0.2".parse().expect("ip"),
                dst: "10.9.0.3".parse().expect("ip"),
                protocol: AclProtocol::Tcp,
                port: Some(80),
            },
        },
    );
    assert_eq!(t.delivered, vec![port_id("b", "eth0")]);
}

#[test]
fn networks_in_use_cannot_vanish_or_change_subnet() {
    let mut m = two_ports();
    assert!(matches!(m.apply_networks(&[]), Err(Error::NetworkInUse(_))));
    assert!(m.apply_networks(&[net("blue", "10.7.0.0/24")]).is_err());
    let mut spec = net("blue", "10.1.0.0/24");
    spec.mtu = Some(9000);
    let plan = m.apply_networks(&[spec]).expect("mtu change");
    assert_eq!(plan.networks_changed.len(), 1);
}

#[test]
fn printing() {
    let m = two_ports();
    let r = m.rendered();
    let a = port_id("a", "eth0");
    let text = pipeline_text(&r, &a).expect("text");
    assert!(text.contains("gate 1 -> port_b_eth0_egress"), "{text}");
    assert!(text.contains("fib 02:00:00:00:00:02 -> gate 1"), "{text}");
    let dot = pipeline_dot(&r, &a).expect("dot");
    assert!(dot.starts_with("digraph \"port_a_eth0\""), "{dot}");
    assert!(
        dot.contains("\"switch.port_a_eth0\" -> \"port_b_eth0_egress\""),
        "{dot}"
    );
    assert!(pipeline_text(&r, "nope").is_none());
}

#[test]
fn model_round_trips_through_json() {
    let m = two_ports();
    let json = serde_json::to_string(&m).expect("ser");
    let back: Model = serde_json::from_str(&json).expect("de");
    assert_eq!(back, m);
}

#[test]
fn a_requested_mac_is_kept_by_the_port_and_its_serialization() {
    let mut m = two_ports();
    let wanted = Mac([0x0e, 1, 2, 3, 4, 5]);
    m.add_port(PortRequest {
        mac: Some(wanted),
        ..req("c", "blue", "10.1.0.9/24")
    })
    .expect("add");
    let id = port_id("c", "eth0");
    let port = m.port(&id).expect("port").clone();
    assert_eq!(port.requested_mac, Some(wanted));
    // what the data plane reports is the port's MAC; the request stays beside it
    assert_eq!(port.mac(), None);
    m.record_facts(&id, facts(7)).expect("facts");
    assert_eq!(m.port(&id).expect("port").requested_mac, Some(wanted));
    // a plain request asks for none
    assert_eq!(
        m.port(&port_id("a", "eth0")).expect("a").requested_mac,
        None
    );

    let text = serde_json::to_string(&m).expect("json");
    assert!(
        text.contains("\"requested_mac\":\"0e:01:02:03:04:05\""),
        "{text}"
    );
    let back: Model = serde_json::from_str(&text).expect("back");
    assert_eq!(back, m);
    // a port written before the field existed loads with none
    let mut old = serde_json::to_value(&port).expect("value");
    old.as_object_mut().expect("object").remove("requested_mac");
    let old: Port = serde_json::from_value(old).expect("old port");
    assert_eq!(old.requested_mac, None);
    assert_eq!(
        old,
        Port {
            requested_mac: None,
            ..port
        }
    );
}
