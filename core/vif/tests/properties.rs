//! The invariants the issue states, over generated pods: parsing never panics on any string,
//! the plan for a pod is deterministic, and adding then removing an annotation gives back
//! exactly the VIFs the pod had.

use std::collections::BTreeMap;

use nephrite_vif::annotations::{
    ADDITIONAL_SUBNETS, KURYR_CONFIG, NETWORKS, SPEC_PORTS, parse_id_list, parse_kuryr_config,
    parse_networks, parse_nimbess_config, parse_vf_count,
};
use nephrite_vif::vfs::{self, Node};
use nephrite_vif::{
    AttachmentFlavor, Config, ContainerResources, EnabledDrivers, NetworkAttachment, Pod, Update,
    Vif, VifRecord, VnicType, desired, update,
};
use proptest::prelude::*;

const ALL: &str = "additional_subnets, sriov, specific_ports, npwg_multiple_interfaces";
const OPAQUE: &str = "pod.alpha.kubernetes.io/opaque-int-resource-sriov-vf-";

fn config(flavor: AttachmentFlavor) -> Config {
    Config {
        drivers: EnabledDrivers::parse(ALL).unwrap(),
        attachments: flavor,
        sriov_resources: BTreeMap::from([("intel.com/sriov_a".to_owned(), "physnet1".to_owned())]),
    }
}

fn attachments() -> Vec<NetworkAttachment> {
    ["blue", "red", "green"]
        .iter()
        .map(|name| NetworkAttachment {
            namespace: "shop".into(),
            name: (*name).into(),
            annotations: BTreeMap::from([(
                KURYR_CONFIG.to_owned(),
                format!(r#"{{"subnetId": "sub-{name}"}}"#),
            )]),
            config: Some(format!(
                r#"{{"name": "{name}-net", "type": "nimbess-cni"}}"#
            )),
        })
        .collect()
}

fn pod(annotations: BTreeMap<String, String>, containers: Vec<ContainerResources>) -> Pod {
    Pod {
        namespace: "shop".into(),
        name: "web".into(),
        annotations,
        containers,
    }
}

/// Strings that look like the annotations' syntax often, and anything else sometimes.
fn noisy() -> impl Strategy<Value = String> {
    prop_oneof![
        any::<String>(),
        "[\\[\\]{}\",.:@/ a-z0-9_-]{0,40}",
        r#"\[("[a-z0-9./ -]{0,8}"(, )?){0,4}\]"#,
        r#"\[(\{"name": ?"[a-z]{0,5}"(, ?"interface": ?"[a-z0-9]{0,17}")?\},?){0,3}\]"#,
        r#"\{"version": ?[0-9]{1,2}, ?"vifs": ?\[[^\]]{0,20}\]\}"#,
    ]
}

/// Valid annotations of every driver: lists of ids from a small pool (so repeats happen),
/// NetworkAttachmentDefinitions that exist, distinct interface names.
fn annotation() -> impl Strategy<Value = (String, String)> {
    let ids = prop::collection::vec("[a-d]", 0..4);
    prop_oneof![
        ids.clone().prop_map(|ids| (
            ADDITIONAL_SUBNETS.to_owned(),
            serde_json::to_string(&ids).unwrap()
        )),
        prop::collection::btree_set("p[a-d]", 0..4).prop_map(|ids| {
            let ids: Vec<_> = ids.into_iter().collect();
            (SPEC_PORTS.to_owned(), serde_json::to_string(&ids).unwrap())
        }),
        prop::collection::vec(
            (
                prop::sample::select(vec!["blue", "red", "green", "shop/blue"]),
                any::<bool>()
            ),
            0..4
        )
        .prop_map(|nets| {
            let entries: Vec<String> = nets
                .iter()
                .enumerate()
                .map(|(i, (name, named))| {
                    if *named {
                        format!("{name}@net{i}")
                    } else {
                        (*name).to_owned()
                    }
                })
                .collect();
            (NETWORKS.to_owned(), entries.join(", "))
        }),
    ]
}

fn containers() -> impl Strategy<Value = Vec<ContainerResources>> {
    prop::collection::vec(
        (0u8..3, 0u8..3).prop_map(|(opaque, plugin)| ContainerResources {
            name: "c".into(),
            requests: BTreeMap::from([(format!("{OPAQUE}physnet2"), opaque.to_string())]),
            limits: BTreeMap::from([("intel.com/sriov_a".to_owned(), plugin.to_string())]),
        }),
        0..3,
    )
}

fn flavor() -> impl Strategy<Value = AttachmentFlavor> {
    prop_oneof![
        Just(AttachmentFlavor::Neutron),
        Just(AttachmentFlavor::Nimbess)
    ]
}

/// The VIFs a backend would hand back for `update`.
fn apply(update: &Update) -> Vec<Vif> {
    let mut vifs = update.keep.clone();
    vifs.extend(update.allocate.iter().map(|a| Vif {
        key: a.request.key.clone(),
        ifname: a.ifname.clone(),
        driver: a.request.driver,
        target: a.request.target.clone(),
        vnic_type: a.request.vnic_type.unwrap_or(VnicType::Normal),
        network: String::new(),
        addresses: Vec::new(),
        gateway: None,
        mac: String::new(),
        backend_id: a.request.key.clone(),
        active: true,
    }));
    vifs
}

fn sorted(mut vifs: Vec<Vif>) -> Vec<Vif> {
    vifs.sort_by(|a, b| a.key.cmp(&b.key));
    vifs
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn parsing_never_panics_on_any_string(value in noisy(), key in prop::sample::select(vec![ADDITIONAL_SUBNETS, SPEC_PORTS, NETWORKS]), flavor in flavor()) {
        let _ = parse_id_list(key, &value);
        let _ = parse_networks("shop", &value);
        let _ = parse_kuryr_config("shop/x", &value);
        let _ = parse_nimbess_config("shop/x", &value);
        let _ = parse_vf_count("c", "r", &value);
        let _ = EnabledDrivers::parse(&value);
        let _ = VifRecord::parse(&value);
        let containers = vec![ContainerResources {
            name: value.clone(),
            requests: BTreeMap::from([(format!("{OPAQUE}{value}"), value.clone())]),
            limits: BTreeMap::from([("intel.com/sriov_a".to_owned(), value.clone())]),
        }];
        let p = pod(BTreeMap::from([(key.to_owned(), value.clone())]), containers);
        let mut nads = attachments();
        nads[0].config = Some(value.clone());
        nads[1].annotations.insert(KURYR_CONFIG.to_owned(), value.clone());
        if let Ok(requests) = desired(&p, &config(flavor), &nads) {
            let _ = update(&[], &requests);
        }
    }

    #[test]
    fn the_plan_for_the_same_pod_is_deterministic(
        annotations in prop::collection::btree_map(prop::sample::select(vec![ADDITIONAL_SUBNETS, SPEC_PORTS, NETWORKS]).prop_map(str::to_owned), annotation().prop_map(|(_, v)| v), 0..3),
        containers in containers(),
        flavor in flavor(),
        order in Just(()).prop_perturb(|_, mut rng| rng.random::<u64>()),
    ) {
        let p = pod(annotations.clone(), containers.clone());
        let nads = attachments();
        let mut shuffled = nads.clone();
        shuffled.rotate_left((order % 3) as usize);
        let first = desired(&p, &config(flavor), &nads);
        let second = desired(&pod(annotations, containers), &config(flavor), &shuffled);
        prop_assert_eq!(&first, &second);
        if let Ok(requests) = first {
            prop_assert_eq!(update(&[], &requests), update(&[], &requests));
            let vifs = apply(&update(&[], &requests).unwrap());
            prop_assert!(update(&vifs, &requests).unwrap().is_empty());
        }
    }

    #[test]
    fn adding_then_removing_an_annotation_gives_back_the_original_vifs(
        base in prop::collection::vec(annotation(), 0..3),
        added in annotation(),
        containers in containers(),
        flavor in flavor(),
    ) {
        let mut annotations: BTreeMap<String, String> = base.into_iter().collect();
        annotations.remove(&added.0);
        let cfg = config(flavor);
        let nads = attachments();
        let before = pod(annotations.clone(), containers.clone());
        let original = apply(&update(&[], &desired(&before, &cfg, &nads).unwrap()).unwrap());

        annotations.insert(added.0.clone(), added.1.clone());
        let with = pod(annotations.clone(), containers.clone());
        let adding = update(&original, &desired(&with, &cfg, &nads).unwrap()).unwrap();
        // Adding an annotation only adds: nothing the pod had is released or renamed.
        prop_assert!(adding.release.is_empty());
        prop_assert_eq!(sorted(adding.keep.clone()), sorted(original.clone()));
        let grown = apply(&adding);

        annotations.remove(&added.0);
        let removing = update(&grown, &desired(&pod(annotations, containers), &cfg, &nads).unwrap()).unwrap();
        prop_assert!(removing.allocate.is_empty());
        prop_assert_eq!(sorted(apply(&removing)), sorted(original));
    }

    /// A node shared by pods that come and go: every pod the check admits gets its VFs, and
    /// the VFs held on a physnet never exceed what the node advertises for it; a pod is
    /// refused only when its VFs do not fit.
    #[test]
    fn admitted_vfs_never_exceed_what_the_node_advertises(
        advertised in (0u8..4, 0u8..4),
        arrivals in prop::collection::vec((containers(), any::<bool>()), 1..8),
    ) {
        let cfg = config(AttachmentFlavor::Neutron);
        let node = Node {
            name: "node-1".into(),
            allocatable: BTreeMap::from([
                ("intel.com/sriov_a".to_owned(), advertised.0.to_string()),
                (format!("{OPAQUE}physnet2"), advertised.1.to_string()),
                (format!("{OPAQUE}physnet1"), "1".to_owned()),
            ]),
        };
        let limit = |physnet: &str| match physnet {
            "physnet1" => usize::from(advertised.0) + 1,
            _ => usize::from(advertised.1),
        };
        let mut running: Vec<Vec<Vif>> = Vec::new();
        for (containers, leave_first) in arrivals {
            if leave_first && !running.is_empty() {
                running.remove(0);
            }
            let p = pod(BTreeMap::new(), containers);
            let plan = update(&[], &desired(&p, &cfg, &[]).unwrap()).unwrap();
            let held: Vec<Vif> = running.iter().flatten().cloned().collect();
            let fits = vfs::wanted(&plan.allocate).iter().all(|(physnet, n)| {
                vfs::held(&held).get(physnet).copied().unwrap_or(0) + n <= limit(physnet)
            });
            match vfs::check(Some(&node), &cfg, &held, &plan.allocate) {
                Ok(()) => {
                    prop_assert!(fits);
                    running.push(apply(&plan));
                }
                Err(e) => {
                    prop_assert!(!fits, "{}", e);
                    let is_short = matches!(e, vfs::VfShortage::NotEnough { .. });
                    prop_assert!(is_short);
                }
            }
            let all: Vec<Vif> = running.iter().flatten().cloned().collect();
            for (physnet, n) in vfs::held(&all) {
                prop_assert!(n <= limit(&physnet), "{} VFs on {}", n, physnet);
            }
        }
    }
}
