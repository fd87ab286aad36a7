//! `ntc plan` and `ntc crds`, driven as a user would: the real binary on the shipped example.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use nephrite_krm::Package;
use serde_json::Value;

fn example(file: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("examples/free5gc")
        .join(file)
}

fn ntc(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_ntc"))
        .args(args)
        .env_remove("NTC_POLICY")
        .output()
        .expect("ntc runs")
}

fn plan(extra: &[&str], clusters: &str, output: &str) -> Output {
    let topology = example("topology.yaml");
    let classes = example("classes.yaml");
    let clusters = example(clusters);
    let mut args = vec![
        "plan",
        "-f",
        topology.to_str().unwrap(),
        "--classes",
        classes.to_str().unwrap(),
        "--clusters",
        clusters.to_str().unwrap(),
        "-o",
        output,
    ];
    args.extend_from_slice(extra);
    ntc(&args)
}

fn stdout_json(output: &Output) -> Value {
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).expect("one JSON document")
}

#[test]
fn json_plan_of_the_free5gc_example() {
    let report = stdout_json(&plan(&[], "clusters.yaml", "json"));
    let sets = report["packageVariantSets"].as_array().unwrap();
    let names: Vec<&str> = sets
        .iter()
        .map(|s| s["metadata"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "free5gc-upf-west",
            "free5gc-upf-east",
            "free5gc-smf",
            "free5gc-amf"
        ]
    );
    for set in sets {
        assert_eq!(set["apiVersion"], "config.porch.kpt.dev/v1alpha2");
        assert_eq!(
            set["spec"]["template"]["labels"]["nf-deployment-name"],
            "free5gc"
        );
    }
    let upf_targets = &sets[0]["spec"]["targets"][0]["repositories"];
    assert_eq!(upf_targets[0]["name"], "edge01");
    assert_eq!(upf_targets[1]["name"], "edge02");
    assert_eq!(
        report["gates"]["smf-regional"],
        serde_json::json!([
            "wait-for-UPF-upf-west-edge01",
            "wait-for-UPF-upf-west-edge02",
            "wait-for-UPF-upf-east-edge03"
        ])
    );
    assert_eq!(report["gates"]["amf-regional"], serde_json::json!([]));
    let deployed = &report["deployedTopology"];
    assert_eq!(deployed["kind"], "NFDeployedTopology");
    let instances = deployed["spec"]["nfInstances"].as_array().unwrap();
    assert_eq!(instances.len(), 5);
    let smf = instances
        .iter()
        .find(|i| i["id"] == "smf-regional")
        .unwrap();
    let neighbours: Vec<&str> = smf["connectivities"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["neighborName"].as_str().unwrap())
        .collect();
    assert_eq!(
        neighbours,
        [
            "amf-regional",
            "upf-east-edge03",
            "upf-west-edge01",
            "upf-west-edge02"
        ]
    );
    assert_eq!(smf["clusterName"], "regional");
    assert_eq!(smf["nfVendor"], "free5gc");
    assert_eq!(
        report["rolloutOrder"],
        serde_json::json!([["amf", "upf"], ["smf"]])
    );
    assert_eq!(report["capacities"].as_array().unwrap().len(), 3);
}

#[test]
fn yaml_and_list_clusters_give_the_same_plan() {
    let json = stdout_json(&plan(&[], "clusters.yaml", "json"));
    let yaml = plan(&[], "clusters-list.yaml", "yaml");
    assert!(yaml.status.success());
    let from_yaml: Value = serde_norway::from_slice(&yaml.stdout).unwrap();
    assert_eq!(from_yaml, json);
}

#[test]
fn table_and_policies() {
    let table = plan(
        &["--policy", "amf:smf", "--policy", "smf:upf"],
        "clusters.yaml",
        "table",
    );
    assert!(table.status.success());
    let text = String::from_utf8(table.stdout).unwrap();
    let amf = text
        .lines()
        .find(|l| l.starts_with("amf-regional"))
        .unwrap();
    assert!(
        amf.contains(" 3 ") && amf.ends_with("smf-regional"),
        "{text}"
    );
    let cycle = plan(&["--policy", "amf:smf,smf:amf"], "clusters.yaml", "json");
    assert!(!cycle.status.success());
    let err = String::from_utf8_lossy(&cycle.stderr);
    assert!(
        err.contains("rollout rules form a cycle between NF types amf, smf"),
        "{err}"
    );
    let none = stdout_json(&plan(&["--no-policy"], "clusters.yaml", "json"));
    assert_eq!(none["gates"]["smf-regional"], serde_json::json!([]));
}

#[test]
fn unknown_class_and_malformed_files_fail_with_their_names() {
    let dir = tempfile::tempdir().unwrap();
    let classes = std::fs::read_to_string(example("classes.yaml")).unwrap();
    let without_smf: Vec<&str> = classes
        .split("---\n")
        .filter(|d| !d.contains("name: free5gc-smf"))
        .collect();
    let path = dir.path().join("classes.yaml");
    std::fs::write(&path, without_smf.join("---\n")).unwrap();
    let topology = example("topology.yaml");
    let clusters = example("clusters.yaml");
    let out = ntc(&[
        "plan",
        "-f",
        topology.to_str().unwrap(),
        "--classes",
        path.to_str().unwrap(),
        "--clusters",
        clusters.to_str().unwrap(),
    ]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("class free5gc-smf not found (instance smf)"),
        "{err}"
    );
    assert!(out.stdout.is_empty());

    let bad = dir.path().join("clusters.yaml");
    std::fs::write(
        &bad,
        "apiVersion: infra.nephio.org/v1alpha1\nkind: WorkloadCluster\nmetadata:\n  name: [oops\n",
    )
    .unwrap();
    let out = ntc(&[
        "plan",
        "-f",
        topology.to_str().unwrap(),
        "--classes",
        example("classes.yaml").to_str().unwrap(),
        "--clusters",
        bad.to_str().unwrap(),
    ]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(bad.to_str().unwrap()) && err.contains("line 4"),
        "{err}"
    );
}

#[test]
fn unplaced_instances_are_reported() {
    let dir = tempfile::tempdir().unwrap();
    let clusters = dir.path().join("clusters.yaml");
    std::fs::write(
        &clusters,
        "- name: regional\n  labels: {nephio.org/site-type: regional}\n",
    )
    .unwrap();
    let out = ntc(&[
        "plan",
        "-f",
        example("topology.yaml").to_str().unwrap(),
        "--classes",
        example("classes.yaml").to_str().unwrap(),
        "--clusters",
        clusters.to_str().unwrap(),
        "-o",
        "json",
    ]);
    let report = stdout_json(&out);
    assert_eq!(
        report["unplaced"],
        serde_json::json!(["upf-west", "upf-east"])
    );
    assert_eq!(report["packageVariantSets"].as_array().unwrap().len(), 2);
    assert_eq!(report["gates"]["smf-regional"], serde_json::json!([]));
    assert!(
        String::from_utf8_lossy(&out.stderr)
            .contains("instance upf-west: no cluster matches its selector")
    );
}

#[test]
fn crds_print_the_three_definitions() {
    let out = ntc(&["crds"]);
    assert!(out.status.success());
    let package = Package::from_yaml(&String::from_utf8(out.stdout).unwrap()).unwrap();
    let names: Vec<&str> = package.iter().filter_map(|o| o.name()).collect();
    assert_eq!(
        names,
        [
            "nfclasses.topology.nephio.org",
            "nftopologies.topology.nephio.org",
            "nfdeployedtopologies.topology.nephio.org"
        ]
    );
    let class = &package.objects()[0];
    assert_eq!(class.spec().unwrap()["scope"], "Cluster");
}

/// The checked-in CRDs are what the binary prints: a change to the CRDs without
/// `cargo xtask crds` fails here.
#[test]
fn checked_in_crds_are_current() {
    let out = ntc(&["crds"]);
    assert!(out.status.success());
    let printed = Package::from_yaml(&String::from_utf8(out.stdout).unwrap()).unwrap();
    let file = Path::new(env!("CARGO_MANIFEST_DIR")).join("deploy/crds.yaml");
    let checked_in = Package::from_yaml(&std::fs::read_to_string(&file).unwrap()).unwrap();
    assert!(
        printed == checked_in,
        "{} is stale: run `cargo xtask crds`",
        file.display()
    );
}

#[test]
fn deploy_manifests_and_examples_are_valid_krm() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    for file in [
        "deploy/kubernetes.yaml",
        "examples/free5gc/topology.yaml",
        "examples/free5gc/classes.yaml",
        "examples/free5gc/clusters.yaml",
        "examples/free5gc/revisions.yaml",
        "tests/porch-crds.yaml",
    ] {
        let text = std::fs::read_to_string(root.join(file)).unwrap();
        let package = Package::from_yaml(&text).unwrap_or_else(|e| panic!("{file}: {e}"));
        assert!(!package.is_empty(), "{file}");
    }
}

#[test]
fn version_prints_the_name_and_version() {
    let out = ntc(&["--version"]);
    assert!(out.status.success());
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        format!("ntc {}", env!("CARGO_PKG_VERSION"))
    );
}

#[test]
fn a_user_error_is_one_line_without_a_backtrace() {
    let out = Command::new(env!("CARGO_BIN_EXE_ntc"))
        .args([
            "plan",
            "-f",
            "/nonexistent/topology.yaml",
            "--classes",
            "/nonexistent/classes.yaml",
            "--clusters",
            "/nonexistent/clusters.yaml",
        ])
        .env("RUST_BACKTRACE", "1")
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    let lines: Vec<&str> = stderr.lines().collect();
    assert_eq!(lines.len(), 1, "{stderr}");
    assert!(lines[0].starts_with("ntc: error: "), "{stderr}");
    assert!(lines[0].contains("/nonexistent/topology.yaml"), "{stderr}");
    assert!(
        !stderr.contains("backtrace") && !stderr.contains("Caused by"),
        "{stderr}"
    );
}
