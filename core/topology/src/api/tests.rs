use super::*;
use serde_json::json;

#[test]
fn seed_and_api_spellings_read_the_same_and_write_the_api_names() {
    let seed: NFTopology = serde_json::from_value(json!({
        "apiVersion": "topology.nephio.org/v1alpha1", "kind": "NFTopology",
        "metadata": {"name": "t"},
        "spec": {"nfInstances": [{
            "name": "upf1",
            "clusterSelector": {"matchLabels": {"role": "edge"}},
            "nfTemplate": {
                "nfType": "UPF",
                "classRef": {"name": "upf-class", "kind": "NFClass"},
                "capacity": {"maxUplinkThroughput": "1G", "maxSessions": 1000, "maxNFConnections": 5},
                "nfAttachments": [{"name": "n3", "networkInstanceRef": {"name": "n3-net"}}]
            }
        }]}
    }))
    .unwrap();
    let api: NFTopology = serde_json::from_value(json!({
        "metadata": {"name": "t"},
        "spec": {"nfInstances": [{
            "name": "upf1",
            "clusterSelector": {"matchLabels": {"role": "edge"}},
            "nfTemplate": {
                "nfType": "upf",
                "className": "upf-class",
                "capacity": {"maxUplinkThroughput": "1G", "maxSessions": 1000, "maxNFConnections": 5},
                "nfInterfaces": [{"name": "n3", "networkInstanceName": "n3-net"}]
            }
        }]}
    }))
    .unwrap();
    assert_eq!(seed, api);
    let written = serde_json::to_value(&seed).unwrap();
    let template = &written["spec"]["nfInstances"][0]["nfTemplate"];
    assert_eq!(template["className"], "upf-class");
    assert_eq!(template["nfType"], "upf");
    assert_eq!(template["nfInterfaces"][0]["networkInstanceName"], "n3-net");
    assert_eq!(template["capacity"]["maxNFConnections"], 5);
    assert!(template.get("classRef").is_none());
    assert!(template.get("nfAttachments").is_none());
    assert_eq!(written["apiVersion"], API_VERSION);
}

#[test]
fn a_reference_needs_a_name() {
    let err = serde_json::from_value::<NFTemplate>(json!({
        "nfType": "upf", "classRef": {"kind": "NFClass"}
    }))
    .unwrap_err();
    assert!(err.to_string().contains("name"), "{err}");
    let err =
        serde_json::from_value::<NFTemplate>(json!({"nfType": "", "className": "x"})).unwrap_err();
    assert!(err.to_string().contains("nfType"), "{err}");
}

#[test]
fn quantities_accept_numbers() {
    let capacity: CapacitySpec =
        serde_json::from_value(json!({"maxDownlinkThroughput": 5000})).unwrap();
    assert_eq!(
        capacity.max_downlink_throughput,
        Some(Quantity("5000".into()))
    );
    assert!(serde_json::from_value::<CapacitySpec>(json!({"maxUplinkThroughput": [1]})).is_err());
}

#[test]
fn deployed_topology_reads_the_seed_keys_and_writes_camel_case() {
    let seed: NFDeployedTopologySpec = serde_json::from_value(json!({
        "nfinstances": [{"id": "a", "clustername": "c", "nftype": "upf", "nfflavor": "small",
                         "nfvendor": "v", "nfversion": "1", "connectivities": [{"neighborName": "b"}]}]
    }))
    .unwrap();
    let written = serde_json::to_value(&seed).unwrap();
    assert_eq!(
        written,
        json!({"nfInstances": [{"id": "a", "clusterName": "c", "nfType": "upf", "nfFlavor": "small",
                                "nfVendor": "v", "nfVersion": "1",
                                "connectivities": [{"neighborName": "b"}]}]})
    );
}

#[test]
fn class_reads_the_package_reference() {
    let class: NFClass = serde_json::from_value(json!({
        "metadata": {"name": "upf-class"},
        "spec": {"vendor": "free5gc", "version": "v3.2", "flavor": "small",
                 "packageRef": {"namespace": "default", "repository": "catalog",
                                "packageName": "free5gc-upf", "revision": "v1"}}
    }))
    .unwrap();
    assert_eq!(class.name(), "upf-class");
    assert_eq!(class.spec.package_ref.package_name, "free5gc-upf");
    assert_eq!(class.spec.flavor.as_deref(), Some("small"));
}
