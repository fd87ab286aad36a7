//! `bmm-provider clusterctl --out DIR`: the clusterctl artefacts parse, every variable is
//! documented in the README, and with the variables substituted the objects are accepted by
//! the in-memory API server — the CRDs, RBAC, the controller Deployment, the cluster template —
//! which enforces the CRDs' schemas (enums, CIDR patterns, required fields) itself.

mod support;

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

use k8s_openapi::api::apps::v1::Deployment;
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, PostParams};
use nephrite_bmm_provider::clusterctl::{NAMESPACE, substitute, variables};
use nephrite_bmm_sim::openapi;
use nephrite_test_apiserver::TestApiServer;
use serde::Deserialize;
use serde_json::{Value, json};

fn documents(text: &str) -> Vec<Value> {
    serde_norway::Deserializer::from_str(text)
        .enumerate()
        .map(|(i, d)| Value::deserialize(d).unwrap_or_else(|e| panic!("document {}: {e}", i + 1)))
        .filter(|v| !v.is_null())
        .collect()
}

/// Sample values a user would export before `clusterctl init` / `generate cluster`.
fn sample(name: &str) -> Option<String> {
    let v = match name {
        "BMM_ENDPOINT" => "https://bmm.example.test",
        "BMM_ORG" => "acme",
        "BMM_TOKEN" => "eyJhbGciOiJIUzI1NiJ9.e30.sig",
        "CLUSTER_NAME" => "demo",
        "NAMESPACE" => "default",
        "BMM_SITE_NAME" => "site-a",
        "CONTROL_PLANE_ENDPOINT_HOST" => "api.demo.example.test",
        "KUBERNETES_VERSION" => "v1.33.1",
        "BMM_CONTROL_PLANE_INSTANCE_TYPE_ID" | "BMM_WORKER_INSTANCE_TYPE_ID" => {
            "7e1e0000-0000-4000-8000-000000000002"
        }
        _ => return None,
    };
    Some(v.to_string())
}

fn plural(kind: &str) -> String {
    format!("{}s", kind.to_lowercase())
}

fn stand_in_crd(group: &str, version: &str, kind: &str) -> Value {
    json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": format!("{}.{group}", plural(kind))},
        "spec": {"group": group, "scope": "Namespaced",
                 "names": {"plural": plural(kind), "singular": kind.to_lowercase(), "kind": kind, "listKind": format!("{kind}List")},
                 "versions": [{"name": version, "served": true, "storage": true,
                               "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}]}
    })
}

async fn create(client: &kube::Client, object: &Value) {
    let api_version = object["apiVersion"].as_str().expect("apiVersion");
    let kind = object["kind"].as_str().expect("kind");
    let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
    let resource = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk(group, version, kind),
        &plural(kind),
    );
    let api: Api<DynamicObject> = match object
        .pointer("/metadata/namespace")
        .and_then(Value::as_str)
    {
        Some(ns) => Api::namespaced_with(client.clone(), ns, &resource),
        None => Api::all_with(client.clone(), &resource),
    };
    let dynamic: DynamicObject = serde_json::from_value(object.clone()).expect("object");
    api.create(&PostParams::default(), &dynamic)
        .await
        .unwrap_or_else(|e| panic!("{kind} {:?} refused: {e}", object["metadata"]["name"]));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_clusterctl_artefacts_parse_are_documented_and_are_accepted() {
    let dir = tempfile::tempdir().expect("tempdir");
    let run = Command::new(env!("CARGO_BIN_EXE_bmm-provider"))
        .args(["clusterctl", "--out"])
        .arg(dir.path())
        .args(["--version", "v0.3.1"])
        .output()
        .expect("run bmm-provider clusterctl");
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    let read = |p: &str| std::fs::read_to_string(dir.path().join(p)).expect(p);
    let (metadata, components, template) = (
        read("metadata.yaml"),
        read("infrastructure-components.yaml"),
        read("cluster-template.yaml"),
    );

    // metadata.yaml: the release series speaks v1beta2.
    let meta = &documents(&metadata)[0];
    assert_eq!(meta["kind"], "Metadata");
    assert_eq!(meta["releaseSeries"][0]["major"], 0);
    assert_eq!(meta["releaseSeries"][0]["minor"], 3);
    assert_eq!(meta["releaseSeries"][0]["contract"], "v1beta2");

    // Everything parses as written; every variable is documented.
    let readme = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("README.md"))
        .expect("README");
    for text in [&components, &template] {
        documents(text);
        for name in variables(text) {
            assert!(
                readme.contains(&format!("`{name}`")),
                "variable {name} is not documented in README.md"
            );
        }
    }
    assert!(
        variables(&components).contains("BMM_TOKEN"),
        "credentials are placeholders"
    );

    let components = documents(&substitute(&components, sample).expect("components substituted"));
    let template = documents(&substitute(&template, sample).expect("template substituted"));
    let kinds: BTreeMap<&str, usize> = components.iter().fold(BTreeMap::new(), |mut m, o| {
        *m.entry(o["kind"].as_str().unwrap_or_default()).or_default() += 1;
        m
    });
    assert_eq!(kinds.get("CustomResourceDefinition"), Some(&4));
    assert_eq!(kinds.get("Deployment"), Some(&1));
    for crd in components
        .iter()
        .filter(|o| o["kind"] == "CustomResourceDefinition")
    {
        assert_eq!(
            crd["metadata"]["labels"]["cluster.x-k8s.io/v1beta2"], "v1beta1",
            "{}",
            crd["metadata"]["name"]
        );
    }

    let server = TestApiServer::start().await.expect("apiserver");
    let client = server.client().expect("client");
    for object in &components {
        if object["kind"] == "Deployment" {
            let d: Deployment = serde_json::from_value(object.clone()).expect("Deployment");
            let container = &d.spec.expect("spec").template.spec.expect("pod").containers[0];
            assert!(
                container
                    .args
                    .as_ref()
                    .is_some_and(|a| a.iter().any(|x| x.contains(NAMESPACE)))
            );
        }
        // Everything, RBAC and the Deployment included, is accepted by the server.
        create(&client, object).await;
    }
    for (kind, plural) in [
        ("ClusterRole", "clusterroles"),
        ("ClusterRoleBinding", "clusterrolebindings"),
        ("Deployment", "deployments"),
    ] {
        let expected = components.iter().filter(|o| o["kind"] == kind).count();
        assert!(expected > 0, "the components hold a {kind}");
        let group = if kind == "Deployment" {
            ("apps", "v1")
        } else {
            ("rbac.authorization.k8s.io", "v1")
        };
        let resource = ApiResource::from_gvk_with_plural(
            &GroupVersionKind::gvk(group.0, group.1, kind),
            plural,
        );
        let api: Api<DynamicObject> = if kind == "Deployment" {
            Api::namespaced_with(client.clone(), NAMESPACE, &resource)
        } else {
            Api::all_with(client.clone(), &resource)
        };
        let stored = api.list(&Default::default()).await.expect("list").items;
        assert_eq!(stored.len(), expected, "{kind} stored by the server");
    }
    // Secrets are read with `get` only: no list or watch on Secrets anywhere.
    for role in components
        .iter()
        .filter(|o| o["kind"] == "ClusterRole" || o["kind"] == "Role")
    {
        for rule in role["rules"].as_array().expect("rules") {
            if rule["resources"]
                .as_array()
                .is_some_and(|r| r.iter().any(|x| x == "secrets"))
            {
                assert_eq!(rule["verbs"], json!(["get"]));
            }
        }
    }
    for (group, version, kind) in [
        ("cluster.x-k8s.io", "v1beta2", "Cluster"),
        ("cluster.x-k8s.io", "v1beta2", "MachineDeployment"),
        (
            "controlplane.cluster.x-k8s.io",
            "v1beta2",
            "KubeadmControlPlane",
        ),
        (
            "bootstrap.cluster.x-k8s.io",
            "v1beta2",
            "KubeadmConfigTemplate",
        ),
    ] {
        create(&client, &stand_in_crd(group, version, kind)).await;
    }
    tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    for object in &template {
        create(&client, object).await;
    }
    // The provider's own objects also satisfy their CRDs' full schemas (patterns and enums,
    // which the in-memory server does not check) ...
    let schema_of = |kind: &str| {
        components
            .iter()
            .find(|o| o["kind"] == "CustomResourceDefinition" && o["spec"]["names"]["kind"] == kind)
            .map(|crd| crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"].clone())
            .expect("CRD of the kind")
    };
    for object in template.iter().filter(|o| {
        o["apiVersion"]
            .as_str()
            .is_some_and(|a| a.starts_with("infrastructure."))
    }) {
        let kind = object["kind"].as_str().unwrap_or_default();
        let problems = openapi::violations(&schema_of(kind), object).expect("schema compiles");
        assert!(problems.is_empty(), "{kind}: {problems:?}");
    }
    // ... which a bad CIDR breaks ...
    let mut bad = template
        .iter()
        .find(|o| o["kind"] == "NvidiaBMMCluster")
        .cloned()
        .expect("NvidiaBMMCluster");
    bad["metadata"]["name"] = json!("bad");
    bad["spec"]["subnets"][0]["cidr"] = json!("10.0.0.0/99");
    let problems = openapi::violations(&schema_of("NvidiaBMMCluster"), &bad).expect("schema");
    assert!(
        problems.iter().any(|p| p.contains("subnets/0/cidr")),
        "{problems:?}"
    );
    // ... and the server itself refuses a bad CIDR, a bad enum and a missing required field.
    let resource = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk(
            "infrastructure.cluster.x-k8s.io",
            "v1beta1",
            "NvidiaBMMCluster",
        ),
        "nvidiabmmclusters",
    );
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), "default", &resource);
    let refused = |object: Value| {
        let api = api.clone();
        async move {
            match api
                .create(
                    &PostParams::default(),
                    &serde_json::from_value(object).expect("object"),
                )
                .await
            {
                Err(kube::Error::Api(e)) => e,
                other => panic!("accepted, or not an API refusal: {other:?}"),
            }
        }
    };
    let e = refused(bad.clone()).await;
    assert_eq!(e.code, 422, "{e:?}");
    assert!(e.message.contains("spec.subnets[0].cidr"), "{e:?}");

    let mut bad_enum = bad.clone();
    bad_enum["spec"]["subnets"][0]["cidr"] = json!("10.0.0.0/24");
    bad_enum["spec"]["vpc"]["networkVirtualizationType"] = json!("VXLAN");
    let e = refused(bad_enum.clone()).await;
    assert_eq!(e.code, 422, "{e:?}");
    assert!(
        e.message.contains("spec.vpc.networkVirtualizationType"),
        "{e:?}"
    );

    let mut incomplete = bad_enum;
    incomplete["spec"]
        .as_object_mut()
        .expect("spec")
        .remove("vpc");
    let e = refused(incomplete).await;
    assert_eq!(e.code, 422, "{e:?}");
    assert!(e.message.contains("spec.vpc"), "{e:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_ccm_manifest_is_accepted_and_template_kubelets_wait_for_it() {
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/deploy/ccm/cloud-controller-manager.yaml"
    ))
    .expect("deploy/ccm/cloud-controller-manager.yaml");
    let objects = documents(&substitute(&text, sample).expect("substituted"));
    let server = TestApiServer::start().await.expect("apiserver");
    let client = server.client().expect("client");
    for object in &objects {
        create(&client, object).await;
    }
    let deployment = objects
        .iter()
        .find(|o| o["kind"] == "Deployment")
        .expect("a Deployment");
    let pod = &deployment["spec"]["template"]["spec"];
    assert_eq!(pod["containers"][0]["args"][0], "ccm");
    assert_eq!(pod["hostNetwork"], true);
    let tolerated: Vec<&str> = pod["tolerations"]
        .as_array()
        .expect("tolerations")
        .iter()
        .filter_map(|t| t["key"].as_str())
        .collect();
    assert!(tolerated.contains(&"node.cloudprovider.kubernetes.io/uninitialized"));
    // No verb beyond what the node controllers use; Secrets by name only.
    for role in objects
        .iter()
        .filter(|o| o["kind"] == "ClusterRole" || o["kind"] == "Role")
    {
        for rule in role["rules"].as_array().expect("rules") {
            for verb in rule["verbs"].as_array().expect("verbs") {
                assert!(
                    [
                        "get", "list", "watch", "patch", "delete", "create", "update"
                    ]
                    .contains(&verb.as_str().expect("verb")),
                    "{rule}"
                );
            }
            if rule["resources"] == json!(["secrets"]) {
                assert_eq!(rule["verbs"], json!(["get"]));
                assert_eq!(rule["resourceNames"], json!(["bmm-cloud-credentials"]));
            }
        }
    }
    // Every kubelet the cluster template starts waits for an external cloud provider.
    let template = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/deploy/templates/cluster-template.yaml"
    ))
    .expect("template");
    let template = documents(&substitute(&template, sample).expect("substituted"));
    let external = json!([{"name": "cloud-provider", "value": "external"}]);
    let kcp = template
        .iter()
        .find(|o| o["kind"] == "KubeadmControlPlane")
        .expect("KubeadmControlPlane");
    for phase in ["initConfiguration", "joinConfiguration"] {
        assert_eq!(
            kcp["spec"]["kubeadmConfigSpec"][phase]["nodeRegistration"]["kubeletExtraArgs"],
            external
        );
    }
    let workers = template
        .iter()
        .find(|o| o["kind"] == "KubeadmConfigTemplate")
        .expect("KubeadmConfigTemplate");
    assert_eq!(
        workers["spec"]["template"]["spec"]["joinConfiguration"]["nodeRegistration"]["kubeletExtraArgs"],
        external
    );
}
