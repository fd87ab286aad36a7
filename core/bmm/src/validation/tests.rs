use super::*;
use crate::crd::{NvidiaBMMCluster, NvidiaBMMMachine};

fn cluster(yaml_spec: &str) -> NvidiaBMMClusterSpec {
    let doc = format!(
        "apiVersion: infrastructure.cluster.x-k8s.io/v1beta1\nkind: NvidiaBMMCluster\nmetadata: {{name: c}}\nspec:\n{yaml_spec}"
    );
    serde_norway::from_str::<NvidiaBMMCluster>(&doc)
        .expect("parses")
        .spec
}

#[test]
fn a_good_cluster_has_no_problem() {
    let spec = cluster(
        "  siteRef: {id: s}\n  vpc: {name: vpc1}\n  subnets: [{name: cp, cidr: 10.0.0.0/24, role: control-plane}]\n",
    );
    assert_eq!(validate_cluster(&spec), vec![]);
}

#[test]
fn each_problem_names_its_field() {
    let spec = cluster(concat!(
        "  siteRef: {}\n",
        "  vpc:\n    name: v\n    networkSecurityGroup:\n      name: nsg\n      rules:\n",
        "        - {name: r, direction: INGRESS, protocol: ICMP, action: PERMIT, portRange: '22'}\n",
        "        - {name: r2, direction: EGRESS, protocol: TCP, action: DENY, portRange: '9-1', sourceCIDR: 10.0.0.1/8}\n",
        "  subnets:\n    - {name: aa, cidr: 10.0.0.0/33, role: worker}\n    - {name: bb, cidr: 10.0.0.0/16, role: worker}\n    - {name: bb, cidr: 10.0.1.0/24, role: worker}\n",
    ));
    let fields: Vec<String> = validate_cluster(&spec)
        .into_iter()
        .map(|e| e.field)
        .collect();
    assert_eq!(
        fields,
        vec![
            "spec.siteRef",
            "spec.vpc.name",
            "spec.subnets[0].cidr",
            "spec.subnets[2].name",
            "spec.subnets[2].cidr",
            "spec.vpc.networkSecurityGroup.rules[0].portRange",
            "spec.vpc.networkSecurityGroup.rules[1].portRange",
            "spec.vpc.networkSecurityGroup.rules[1].sourceCIDR",
        ]
    );
}

#[test]
fn machine_subnets_must_be_the_clusters() {
    let doc = "apiVersion: infrastructure.cluster.x-k8s.io/v1beta1\nkind: NvidiaBMMMachine\nmetadata: {name: m}\nspec:\n  instanceType: {}\n  network:\n    subnetName: nope\n    additionalInterfaces: [{subnetName: cp, virtualFunctionId: 17}]\n";
    let spec = serde_norway::from_str::<NvidiaBMMMachine>(doc)
        .expect("parses")
        .spec;
    let errors = validate_machine(&spec, &["cp"]);
    let fields: Vec<&str> = errors.iter().map(|e| e.field.as_str()).collect();
    assert_eq!(
        fields,
        [
            "spec.instanceType",
            "spec.network.subnetName",
            "spec.network.additionalInterfaces[0].virtualFunctionId"
        ]
    );
    assert_eq!(
        errors[1].to_string(),
        "spec.network.subnetName: \"nope\" is not a subnet of the cluster"
    );
}
