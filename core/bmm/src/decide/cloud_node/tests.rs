use std::collections::BTreeMap;

use proptest::prelude::*;

use super::*;

fn instance(name: &str, status: &str, addresses: &[&str]) -> CloudInstance {
    CloudInstance {
        id: format!("{name}-id"),
        name: name.into(),
        vpc_id: "vpc".into(),
        status: status.into(),
        labels: BTreeMap::new(),
        machine_id: Some("m-1".into()),
        addresses: addresses.iter().map(|a| a.to_string()).collect(),
    }
}

fn tainted(name: &str) -> NodeView {
    NodeView {
        name: name.into(),
        taints: vec![Taint {
            key: UNINITIALIZED_TAINT.into(),
            value: Some("true".into()),
            effect: "NoSchedule".into(),
        }],
        ..NodeView::default()
    }
}

const SITE: SiteView<'static> = SiteView {
    id: "site-1",
    name: "sjc",
    zone: None,
};

fn found<'a>(i: &'a CloudInstance, power: Power) -> NodeLookup<'a> {
    NodeLookup::Found {
        instance: i,
        site: SITE,
        instance_type: Some("gb200"),
        power,
    }
}

fn after(node: &NodeView, d: &CloudNodeDecision) -> NodeView {
    let mut n = node.clone();
    d.changes.apply_to(&mut n);
    n
}

#[test]
fn a_tainted_node_of_a_ready_instance_is_initialized_in_one_decision() {
    let node = tainted("w-0");
    let i = instance("w-0", "Ready", &["10.0.0.5", "203.0.113.7"]);
    let d = decide_cloud_node(&node, &found(&i, Power::On));
    let n = after(&node, &d);
    assert_eq!(n.provider_id.as_deref(), Some("nvidia-bmm://site-1/w-0-id"));
    assert_eq!(n.labels[REGION_LABEL], "sjc");
    assert_eq!(n.labels[ZONE_LABEL], "sjc");
    assert_eq!(n.labels[INSTANCE_TYPE_LABEL], "gb200");
    assert_eq!(
        n.addresses,
        vec![
            NodeAddress::new("InternalIP", "10.0.0.5"),
            NodeAddress::new("ExternalIP", "203.0.113.7"),
            NodeAddress::new("Hostname", "w-0"),
        ]
    );
    assert!(n.taints.is_empty());
    assert_eq!(d.outcome, NodeOutcome::Steady);
    assert!(!d.delete);
}

#[test]
fn a_configured_zone_is_used_and_the_site_name_is_the_region() {
    let node = tainted("w-0");
    let i = instance("w-0", "Ready", &["10.0.0.5"]);
    let lookup = NodeLookup::Found {
        instance: &i,
        site: SiteView {
            zone: Some("sjc-a"),
            ..SITE
        },
        instance_type: Some("gb200"),
        power: Power::On,
    };
    let n = after(&node, &decide_cloud_node(&node, &lookup));
    assert_eq!(n.labels[REGION_LABEL], "sjc");
    assert_eq!(n.labels[ZONE_LABEL], "sjc-a");
}

#[test]
fn without_addresses_the_taint_stays_and_an_event_says_why() {
    let node = tainted("w-0");
    let i = instance("w-0", "Provisioning", &[]);
    let d = decide_cloud_node(&node, &found(&i, Power::On));
    let n = after(&node, &d);
    assert!(n.uninitialized());
    assert_eq!(d.outcome, NodeOutcome::Pending);
    let event = d.event.expect("event");
    assert_eq!(event.reason, event_reason::WAITING_FOR_INSTANCE);
    assert!(event.message.contains("addresses"), "{}", event.message);
}

#[test]
fn powered_off_or_rebooting_taints_shutdown_and_running_untaints() {
    let node = after(
        &tainted("w-0"),
        &decide_cloud_node(
            &tainted("w-0"),
            &found(&instance("w-0", "Ready", &["10.0.0.5"]), Power::On),
        ),
    );
    for (status, power) in [("Ready", Power::Off), ("Rebooting", Power::Unknown)] {
        let i = instance("w-0", status, &["10.0.0.5"]);
        let down = after(&node, &decide_cloud_node(&node, &found(&i, power)));
        assert_eq!(
            down.taints,
            vec![Taint {
                key: SHUTDOWN_TAINT.into(),
                value: None,
                effect: SHUTDOWN_EFFECT.into()
            }],
            "{status} {power:?}"
        );
        let i = instance("w-0", "Ready", &["10.0.0.5"]);
        let up = after(&down, &decide_cloud_node(&down, &found(&i, Power::On)));
        assert!(up.taints.is_empty());
    }
}

#[test]
fn targets_follow_the_provider_id() {
    let mut node = tainted("w-0");
    assert_eq!(node_target(&node), NodeTarget::Search);
    node.provider_id = Some("nvidia-bmm://s/i".into());
    assert_eq!(
        node_target(&node),
        NodeTarget::ById(ProviderId::new("s", "i"))
    );
    node.provider_id = Some("aws:///us-east-1a/i-1".into());
    assert_eq!(node_target(&node), NodeTarget::NotOurs);
    node.provider_id = Some("nvidia-bmm://only-site".into());
    assert!(matches!(node_target(&node), NodeTarget::Malformed(_)));
    node.taints.clear();
    node.provider_id = None;
    assert_eq!(node_target(&node), NodeTarget::NotOurs);
}

#[test]
fn instances_match_by_name_then_by_one_address() {
    let a = instance("a", "Ready", &["10.0.0.5"]);
    let b = instance("b", "Ready", &["10.0.0.6"]);
    let c = instance("c", "Ready", &["10.0.0.6"]);
    let mut node = tainted("a");
    let instances = [a.clone(), b.clone()];
    assert_eq!(match_instance(&node, &instances), Some(&a));
    node.name = "host-17".into();
    node.addresses = vec![NodeAddress::new("InternalIP", "10.0.0.6")];
    assert_eq!(match_instance(&node, &instances), Some(&b));
    // Two instances hold the address: no guess.
    assert_eq!(match_instance(&node, &[a, b, c]), None);
}

#[test]
fn only_the_authoritative_404_deletes() {
    let node = tainted("w-0");
    assert!(decide_cloud_node(&node, &NodeLookup::NotFound).delete);
    for lookup in [
        NodeLookup::NoMatch,
        NodeLookup::Unavailable("503"),
        NodeLookup::OtherSite { named: "x" },
    ] {
        let d = decide_cloud_node(&node, &lookup);
        assert!(!d.delete && d.changes.is_empty(), "{lookup:?}");
    }
}

fn any_taints() -> impl Strategy<Value = Vec<Taint>> {
    proptest::collection::vec(
        (
            prop_oneof![
                Just(UNINITIALIZED_TAINT.to_string()),
                Just(SHUTDOWN_TAINT.to_string()),
                "[a-z./]{1,12}",
            ],
            prop_oneof![
                Just("NoSchedule".to_string()),
                Just("NoExecute".to_string())
            ],
        )
            .prop_map(|(key, effect)| Taint {
                key,
                value: None,
                effect,
            }),
        0..4,
    )
}

fn any_node() -> impl Strategy<Value = NodeView> {
    (
        "[a-z]{1,6}",
        proptest::option::of(prop_oneof![
            Just("nvidia-bmm://site-1/i-1".to_string()),
            Just("nvidia-bmm://site-2/i-1".to_string()),
            "[a-z:/0-9-]{0,20}",
        ]),
        proptest::collection::btree_map(
            prop_oneof![
                Just(REGION_LABEL.to_string()),
                Just(ZONE_LABEL.to_string()),
                Just(INSTANCE_TYPE_LABEL.to_string()),
                "[a-z]{1,5}",
            ],
            "[a-z]{0,5}",
            0..4,
        ),
        proptest::collection::vec(
            (
                prop_oneof![Just("InternalIP"), Just("Hostname")],
                "10\\.0\\.0\\.[0-9]",
            )
                .prop_map(|(t, a)| NodeAddress::new(t, a)),
            0..3,
        ),
        any_taints(),
    )
        .prop_map(|(name, provider_id, labels, addresses, taints)| NodeView {
            name,
            provider_id,
            labels,
            addresses,
            taints,
        })
}

fn any_instance() -> impl Strategy<Value = CloudInstance> {
    (
        prop_oneof![
            Just("Ready"),
            Just("Rebooting"),
            Just("Provisioning"),
            Just("Error")
        ],
        proptest::collection::vec(
            prop_oneof!["10\\.0\\.0\\.[0-9]", "198\\.51\\.100\\.[0-9]", "[a-z]{1,4}"],
            0..3,
        ),
    )
        .prop_map(|(status, addresses)| CloudInstance {
            id: "i-1".into(),
            name: "w".into(),
            vpc_id: "v".into(),
            status: status.into(),
            labels: BTreeMap::new(),
            machine_id: None,
            addresses,
        })
}

fn any_power() -> impl Strategy<Value = Power> {
    prop_oneof![Just(Power::On), Just(Power::Off), Just(Power::Unknown)]
}

proptest! {
    /// A Node is deleted only on an authoritative 404, whatever the Node looks like.
    #[test]
    fn a_node_is_deleted_only_on_an_authoritative_404(
        node in any_node(),
        instance in any_instance(),
        power in any_power(),
        which in 0usize..5,
    ) {
        let lookup = match which {
            0 => found(&instance, power),
            1 => NodeLookup::NotFound,
            2 => NodeLookup::NoMatch,
            3 => NodeLookup::Unavailable("timeout"),
            _ => NodeLookup::OtherSite { named: "site-2" },
        };
        let d = decide_cloud_node(&node, &lookup);
        prop_assert_eq!(d.delete, lookup == NodeLookup::NotFound);
    }

    /// Deciding again on the Node as the changes left it changes nothing.
    #[test]
    fn initialization_is_idempotent(
        node in any_node(),
        instance in any_instance(),
        power in any_power(),
        instance_type in proptest::option::of("[a-z0-9.]{1,8}"),
        zone in proptest::option::of("[a-z-]{1,6}"),
    ) {
        let lookup = NodeLookup::Found {
            instance: &instance,
            site: SiteView { id: "site-1", name: "sjc", zone: zone.as_deref() },
            instance_type: instance_type.as_deref(),
            power,
        };
        let first = decide_cloud_node(&node, &lookup);
        let settled = after(&node, &first);
        let second = decide_cloud_node(&settled, &lookup);
        prop_assert!(second.changes.is_empty(), "{:?}", second.changes);
        prop_assert_eq!(second.outcome, first.outcome);
    }

    /// The uninitialized taint goes only in a change that leaves every field set.
    #[test]
    fn the_taint_goes_only_when_every_field_is_set(
        node in any_node(),
        instance in any_instance(),
        power in any_power(),
        instance_type in proptest::option::of("[a-z0-9.]{1,8}"),
    ) {
        let lookup = NodeLookup::Found {
            instance: &instance,
            site: SITE,
            instance_type: instance_type.as_deref(),
            power,
        };
        let n = after(&node, &decide_cloud_node(&node, &lookup));
        if node.uninitialized() && !n.uninitialized() {
            prop_assert!(n.provider_id.as_deref().is_some_and(|p| p.parse::<ProviderId>().is_ok()));
            prop_assert!(n.addresses.iter().any(|a| a.type_ == "InternalIP" || a.type_ == "ExternalIP"));
            for label in [REGION_LABEL, ZONE_LABEL, INSTANCE_TYPE_LABEL] {
                prop_assert!(n.labels.get(label).is_some_and(|v| !v.is_empty()), "{}", label);
            }
        }
    }
}
