use serde_json::{Value, json};

use super::*;

fn crd_json(kind: &str) -> Value {
    let crd = all_crds()
        .into_iter()
        .find(|c| c.spec.names.kind == kind)
        .expect("kind exists");
    serde_json::to_value(crd).expect("serialises")
}

fn spec_schema(kind: &str) -> Value {
    crd_json(kind)["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"].clone()
}

#[test]
fn four_crds_in_the_group_with_the_contract_label() {
    let crds = all_crds();
    let kinds: Vec<&str> = crds.iter().map(|c| c.spec.names.kind.as_str()).collect();
    assert_eq!(
        kinds,
        [
            "NvidiaBMMCluster",
            "NvidiaBMMClusterTemplate",
            "NvidiaBMMMachine",
            "NvidiaBMMMachineTemplate"
        ]
    );
    for crd in &crds {
        assert_eq!(crd.spec.group, GROUP);
        let labels = crd.metadata.labels.as_ref().expect("labels");
        assert_eq!(
            labels.get(CONTRACT_LABEL).map(String::as_str),
            Some("v1beta1")
        );
        assert_eq!(crd.spec.versions.len(), 1);
        assert!(crd.spec.versions[0].served && crd.spec.versions[0].storage);
        assert_eq!(crd.spec.versions[0].name, VERSION);
    }
}

#[test]
fn cluster_schema_enforces_required_fields_enums_and_cidrs() {
    let spec = spec_schema("NvidiaBMMCluster");
    let required: Vec<&str> = spec["required"]
        .as_array()
        .expect("required")
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert_eq!(required, ["siteRef", "subnets", "vpc"]);
    let vpc = &spec["properties"]["vpc"];
    assert_eq!(
        vpc["properties"]["networkVirtualizationType"]["enum"],
        json!(["ETHERNET_VIRTUALIZER", "FNN"])
    );
    let rule = &vpc["properties"]["networkSecurityGroup"]["properties"]["rules"]["items"];
    assert_eq!(
        rule["properties"]["direction"]["enum"],
        json!(["INGRESS", "EGRESS"])
    );
    assert_eq!(
        rule["properties"]["protocol"]["enum"],
        json!(["TCP", "UDP", "ICMP", "ANY"])
    );
    assert_eq!(
        rule["properties"]["action"]["enum"],
        json!(["PERMIT", "DENY"])
    );
    assert_eq!(
        rule["properties"]["sourceCIDR"]["pattern"],
        json!(cluster_cidr_pattern())
    );
    assert_eq!(
        rule["properties"]["priority"]["maximum"].as_f64(),
        Some(60000.0)
    );
    let subnet = &spec["properties"]["subnets"]["items"];
    assert_eq!(
        subnet["properties"]["cidr"]["pattern"],
        json!(cluster_cidr_pattern())
    );
    assert_eq!(
        subnet["properties"]["role"]["enum"],
        json!(["control-plane", "worker"])
    );
    assert!(spec["properties"]["siteRef"]["x-kubernetes-validations"].is_array());
}

fn cluster_cidr_pattern() -> &'static str {
    super::cluster::CIDR_PATTERN
}

#[test]
fn machine_schema_requires_instance_type_and_network() {
    let spec = spec_schema("NvidiaBMMMachine");
    let required: Vec<&str> = spec["required"]
        .as_array()
        .expect("required")
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert_eq!(required, ["instanceType", "network"]);
    assert!(spec["properties"]["instanceType"]["x-kubernetes-validations"].is_array());
    let template = spec_schema("NvidiaBMMMachineTemplate");
    assert_eq!(
        template["properties"]["template"]["properties"]["spec"]["required"],
        json!(["instanceType", "network"])
    );
}

#[test]
fn status_has_conditions_and_the_v1beta2_fields() {
    let status = &crd_json("NvidiaBMMCluster")["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
        ["properties"]["status"];
    let props = &status["properties"];
    for field in [
        "ready",
        "initialization",
        "vpcID",
        "networkStatus",
        "failureDomains",
        "conditions",
    ] {
        assert!(props.get(field).is_some(), "status.{field}");
    }
    assert_eq!(
        props["conditions"]["items"]["properties"]["status"]["enum"],
        json!(["True", "False", "Unknown"])
    );
    let crd = crd_json("NvidiaBMMCluster");
    assert_eq!(
        crd["spec"]["versions"][0]["subresources"]["status"],
        json!({})
    );
}

#[test]
fn a_cluster_document_round_trips_and_bad_enums_are_refused_naming_the_value() {
    let yaml = r#"
apiVersion: infrastructure.cluster.x-k8s.io/v1beta1
kind: NvidiaBMMCluster
metadata: {name: c1, namespace: default}
spec:
  siteRef: {name: site-a}
  vpc:
    name: c1-vpc
    networkVirtualizationType: FNN
    networkSecurityGroup:
      name: c1-nsg
      rules:
        - {name: api, direction: INGRESS, protocol: TCP, action: PERMIT, portRange: "6443"}
  subnets:
    - {name: cp, cidr: 10.0.0.0/24, role: control-plane}
"#;
    let cluster: NvidiaBMMCluster = serde_norway::from_str(yaml).expect("parses");
    assert_eq!(
        cluster.spec.vpc.network_virtualization_type,
        NetworkVirtualizationType::Fnn
    );
    let again: NvidiaBMMCluster =
        serde_norway::from_str(&serde_norway::to_string(&cluster).expect("writes"))
            .expect("reparses");
    assert_eq!(again.spec, cluster.spec);
    assert_eq!(again.metadata, cluster.metadata);
    let bad = yaml.replace("action: PERMIT", "action: allow");
    let err = serde_norway::from_str::<NvidiaBMMCluster>(&bad)
        .expect_err("allow is not an action")
        .to_string();
    assert!(err.contains("allow"), "{err}");
}
