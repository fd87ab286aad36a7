//! A small free5GC-like topology shared by the unit tests.

use serde_json::json;

use crate::api::{Cluster, NFClass, NFTopology};
use crate::plan::{Plan, plan};
use crate::policy::RolloutPolicy;

/// Two UPFs on edge clusters (upf-a on edge-1 and edge-2, upf-b on edge-3), one SMF and one AMF
/// on the regional cluster. SMF–UPF share N4, AMF–SMF share N11, the UPFs share N6.
pub(crate) fn topology() -> NFTopology {
    serde_json::from_value(json!({
        "metadata": {"name": "core"},
        "spec": {"nfInstances": [
            {"name": "upf-a", "clusterSelector": {"matchLabels": {"role": "edge", "zone": "a"}},
             "nfTemplate": {"nfType": "upf", "className": "upf-class",
                            "capacity": {"maxUplinkThroughput": "1G", "maxDownlinkThroughput": "5G"},
                            "nfInterfaces": [{"name": "n3", "networkInstanceName": "n3-a"},
                                             {"name": "n4", "networkInstanceName": "n4"},
                                             {"name": "n6", "networkInstanceName": "n6"}]}},
            {"name": "upf-b", "clusterSelector": {"matchLabels": {"role": "edge", "zone": "b"}},
             "nfTemplate": {"nfType": "upf", "className": "upf-class",
                            "nfInterfaces": [{"name": "n4", "networkInstanceName": "n4"},
                                             {"name": "n6", "networkInstanceName": "n6"}]}},
            {"name": "smf", "clusterSelector": {"matchLabels": {"role": "regional"}},
             "nfTemplate": {"nfType": "smf", "className": "smf-class",
                            "nfInterfaces": [{"name": "n4", "networkInstanceName": "n4"},
                                             {"name": "n11", "networkInstanceName": "n11"}]}},
            {"name": "amf", "clusterSelector": {"matchLabels": {"role": "regional"}},
             "nfTemplate": {"nfType": "amf", "className": "amf-class",
                            "nfInterfaces": [{"name": "n11", "networkInstanceName": "n11"}]}}
        ]}
    }))
    .expect("fixture topology")
}

pub(crate) fn classes() -> Vec<NFClass> {
    ["upf", "smf", "amf"]
        .into_iter()
        .map(|t| {
            serde_json::from_value(json!({
                "metadata": {"name": format!("{t}-class")},
                "spec": {"vendor": "free5gc", "version": "v3.2.1",
                         "flavor": if t == "upf" { Some("small") } else { None },
                         "packageRef": {"repository": "catalog", "packageName": format!("free5gc-{t}"),
                                        "revision": if t == "amf" { "v2" } else { "3" }}}
            }))
            .expect("fixture class")
        })
        .collect()
}

pub(crate) fn clusters() -> Vec<Cluster> {
    vec![
        Cluster::new("regional", [("role", "regional")]),
        Cluster::new("edge-2", [("role", "edge"), ("zone", "a")]),
        Cluster::new("edge-1", [("role", "edge"), ("zone", "a")]),
        Cluster::new("edge-3", [("role", "edge"), ("zone", "b")]),
    ]
}

pub(crate) fn planned() -> Plan {
    plan(
        &topology(),
        &classes(),
        &clusters(),
        &RolloutPolicy::default(),
    )
    .expect("fixture plan")
}
