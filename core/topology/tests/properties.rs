//! Property tests for the invariants of the planner, the policy and the deployed topology.

use std::collections::BTreeSet;

use nephrite_topology::api::{Cluster, NFClass, NFTopology};
use nephrite_topology::{Change, DeployedTopologyBuilder, RolloutPolicy, plan};
use proptest::prelude::*;
use serde_json::json;

const TYPES: [&str; 3] = ["upf", "smf", "amf"];

/// A random topology: instances with a type, a zone selector and some networks.
fn topology() -> impl Strategy<Value = (NFTopology, Vec<Cluster>)> {
    let instance = (0..3usize, 0..4usize, prop::collection::vec(0..6usize, 0..4));
    let cluster = prop::collection::vec(0..4usize, 0..3);
    (
        prop::collection::vec(instance, 1..10),
        prop::collection::vec(cluster, 1..8),
    )
        .prop_map(|(instances, clusters)| {
            let nf_instances: Vec<_> = instances
                .iter()
                .enumerate()
                .map(|(i, (t, zone, networks))| {
                    json!({
                        "name": format!("nf{i}"),
                        "clusterSelector": {"matchLabels": {format!("z{zone}"): "yes"}},
                        "nfTemplate": {
                            "nfType": TYPES[*t], "className": TYPES[*t],
                            "nfInterfaces": networks.iter().map(|n| json!({"name": format!("if{n}"), "networkInstanceName": format!("net{n}")})).collect::<Vec<_>>()
                        }
                    })
                })
                .collect();
            let topology = serde_json::from_value(json!({
                "metadata": {"name": "t"}, "spec": {"nfInstances": nf_instances}
            }))
            .unwrap();
            let clusters = clusters
                .iter()
                .enumerate()
                .map(|(c, zones)| {
                    Cluster::new(format!("c{c}"), zones.iter().map(|z| (format!("z{z}"), "yes")))
                })
                .collect();
            (topology, clusters)
        })
}

fn classes() -> Vec<NFClass> {
    TYPES
        .iter()
        .map(|t| {
            serde_json::from_value(json!({
                "metadata": {"name": t},
                "spec": {"packageRef": {"repository": "catalog", "packageName": t}}
            }))
            .unwrap()
        })
        .collect()
}

fn policy() -> impl Strategy<Value = RolloutPolicy> {
    prop_oneof![
        Just(RolloutPolicy::default()),
        Just(RolloutPolicy::none()),
        Just(RolloutPolicy::parse(&["smf:upf", "amf:smf"]).unwrap()),
        Just(RolloutPolicy::parse(&["upf:amf"]).unwrap()),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    #[test]
    fn connectivity_is_symmetric_and_duplicate_free(
        (topology, clusters) in topology(),
        order in prop::collection::vec(any::<prop::sample::Index>(), 0..40),
    ) {
        let plan = plan::plan(&topology, &classes(), &clusters, &RolloutPolicy::default()).unwrap();
        let mut builder = DeployedTopologyBuilder::new(&plan);
        let n = plan.variants().len();
        // Publish and remove in a random order.
        for (step, index) in order.iter().enumerate() {
            if n == 0 { break; }
            let v = index.index(n);
            if step % 3 == 2 { builder.remove_variant(v); } else { builder.publish_variant(v); }
        }
        let spec = builder.spec();
        let ids: BTreeSet<&str> = spec.nf_instances.iter().map(|i| i.id.as_str()).collect();
        prop_assert_eq!(ids.len(), spec.nf_instances.len());
        for instance in &spec.nf_instances {
            let names: Vec<&str> = instance.connectivities.iter().map(|c| c.neighbor_name.as_str()).collect();
            let unique: BTreeSet<&str> = names.iter().copied().collect();
            prop_assert_eq!(unique.len(), names.len(), "duplicates in {}", instance.id);
            prop_assert!(!unique.contains(instance.id.as_str()), "{} is its own neighbour", instance.id);
            for name in names {
                prop_assert!(ids.contains(name), "{} lists unpublished {}", instance.id, name);
                let other = builder.instance(name).unwrap();
                prop_assert!(other.connectivities.iter().any(|c| c.neighbor_name == instance.id),
                    "{} -> {} is not symmetric", instance.id, name);
            }
            // Exactly the published neighbours of the plan.
            let v = plan.variant_by_id(&instance.id).unwrap();
            let expected: BTreeSet<&str> = plan.neighbours(v).filter(|&n| builder.is_published(n))
                .map(|n| plan.variants()[n].id.as_str()).collect();
            prop_assert_eq!(unique, expected);
        }
    }

    #[test]
    fn every_gate_names_a_connected_instance_of_the_waited_for_type(
        (topology, clusters) in topology(),
        policy in policy(),
    ) {
        let plan = plan::plan(&topology, &classes(), &clusters, &policy).unwrap();
        let mut total = 0;
        for v in 0..plan.variants().len() {
            let gates = plan.gates(v);
            let mut seen = BTreeSet::new();
            for gate in &gates {
                let waited = &plan.variants()[gate.waits_for];
                prop_assert!(plan.neighbours(v).any(|n| n == gate.waits_for));
                prop_assert!(policy.is_gated_by(plan.nf_type(v), plan.nf_type(gate.waits_for)));
                prop_assert_eq!(&gate.condition_type,
                    &format!("wait-for-{}-{}", plan.nf_type(gate.waits_for).upper(), waited.id));
                prop_assert!(seen.insert(gate.condition_type.clone()), "duplicate gate");
            }
            // And every connected instance of a waited-for type has its gate.
            let expected = plan.neighbours(v)
                .filter(|&n| policy.is_gated_by(plan.nf_type(v), plan.nf_type(n))).count();
            prop_assert_eq!(gates.len(), expected);
            total += gates.len();
        }
        prop_assert_eq!(total, plan.counts().gates);
    }

    #[test]
    fn planning_is_deterministic_whatever_the_cluster_order(
        (topology, clusters) in topology(),
        policy in policy(),
        seed in any::<u64>(),
    ) {
        let first = plan::plan(&topology, &classes(), &clusters, &policy).unwrap();
        let mut shuffled = clusters.clone();
        let len = shuffled.len();
        if len > 1 { shuffled.rotate_left((seed as usize) % len); }
        let second = plan::plan(&topology, &classes(), &shuffled, &policy).unwrap();
        prop_assert_eq!(first.variants(), second.variants());
        let a = serde_json::to_value(nephrite_topology::status::plan_report(&first)).unwrap();
        let b = serde_json::to_value(nephrite_topology::status::plan_report(&second)).unwrap();
        prop_assert_eq!(a, b);
        let ids: BTreeSet<&str> = first.variants().iter().map(|v| v.id.as_str()).collect();
        prop_assert_eq!(ids.len(), first.variants().len(), "ids are unique");
    }

    #[test]
    fn the_same_published_event_twice_changes_nothing(
        (topology, clusters) in topology(),
        picks in prop::collection::vec(any::<prop::sample::Index>(), 1..20),
    ) {
        let plan = plan::plan(&topology, &classes(), &clusters, &RolloutPolicy::default()).unwrap();
        let n = plan.variants().len();
        prop_assume!(n > 0);
        let mut builder = DeployedTopologyBuilder::new(&plan);
        for pick in picks {
            let id = plan.variants()[pick.index(n)].id.clone();
            let was = builder.is_published(pick.index(n));
            let first = builder.publish(&id);
            prop_assert_eq!(first, if was { Change::Unchanged } else { Change::Changed });
            let before = builder.spec();
            prop_assert_eq!(builder.publish(&id), Change::Unchanged);
            prop_assert_eq!(builder.spec(), before);
        }
    }

    #[test]
    fn deployed_ids_are_unique_even_when_names_collide(
        instances in prop::collection::btree_set("[ab](-[ab]){0,2}", 1..6),
        clusters in prop::collection::btree_set("[ab](-[ab]){0,2}", 1..6),
    ) {
        let nf_instances: Vec<_> = instances.iter().map(|name| json!({
            "name": name, "nfTemplate": {"nfType": "upf", "className": "upf"}
        })).collect();
        let topology: NFTopology = serde_json::from_value(json!({
            "metadata": {"name": "t"}, "spec": {"nfInstances": nf_instances}
        })).unwrap();
        let clusters: Vec<Cluster> = clusters.iter().map(|c| Cluster::new(c.clone(), [("any", "x")])).collect();
        let plan = plan::plan(&topology, &classes(), &clusters, &RolloutPolicy::default()).unwrap();
        prop_assert_eq!(plan.variants().len(), instances.len() * clusters.len());
        let ids: BTreeSet<&str> = plan.variants().iter().map(|v| v.id.as_str()).collect();
        prop_assert_eq!(ids.len(), plan.variants().len(), "ids collide: {:?}", ids);
        for (v, variant) in plan.variants().iter().enumerate() {
            let instance = &plan.instances()[variant.instance].name;
            let base = format!("{}-{}", instance, variant.cluster);
            prop_assert!(variant.id.starts_with(&base), "{} does not start with {}", variant.id, base);
            prop_assert_eq!(plan.variant_by_id(&variant.id), Some(v));
            prop_assert_eq!(plan.variant_for(instance, &variant.cluster), Some(v));
        }
    }

    #[test]
    fn a_policy_with_a_cycle_is_refused(
        chain in prop::collection::vec(0..5usize, 2..6),
    ) {
        // Close the chain into a loop: t0 waits t1 waits ... waits t0.
        let names: Vec<String> = chain.iter().enumerate().map(|(i, t)| format!("t{t}x{i}")).collect();
        let mut rules: Vec<String> = names.windows(2).map(|w| format!("{}:{}", w[0], w[1])).collect();
        rules.push(format!("{}:{}", names[names.len() - 1], names[0]));
        let err = RolloutPolicy::parse(&rules).unwrap_err();
        prop_assert!(err.to_string().contains("cycle"), "{}", err);
        // Without the closing rule it is fine.
        rules.pop();
        prop_assert!(RolloutPolicy::parse(&rules).is_ok());
    }
}
