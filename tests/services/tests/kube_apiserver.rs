//! The real kube-apiserver (`KubeApiServer`), used the way the daemons' tests use it: every
//! CRD the project ships applies and is served, each CEL rule in them refuses the object it
//! exists to refuse, and a ServiceAccount's token gets exactly what RBAC grants it.
//!
//! The CEL table is checked against the rules actually in the CRDs, both ways: a rule with no
//! row fails (write its row), and a row whose rule was removed fails too, because its bad
//! object is then accepted.

use std::collections::BTreeSet;
use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{Context, bail, ensure};
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::api::rbac::v1::{PolicyRule, Role, RoleBinding, RoleRef, Subject};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{
    Api, ApiResource, DynamicObject, GroupVersionKind, ListParams, ObjectMeta, Patch, PatchParams,
    PostParams,
};
use nephrite_test_services::{KubeApiServer, kube_apiserver};
use serde::Deserialize;
use serde_json::{Value, json};

/// The field manager of this test's server-side applies.
const MANAGER: &str = "nephrite-kube-apiserver-test";

/// The CRDs checked in as YAML, relative to the workspace (bmm's come from its Rust types).
const CRD_FILES: &[&str] = &[
    "topology/deploy/crds.yaml",
    "kuryr-l7/examples/kubernetes/route-crd.yaml",
];

/// The shared server, or None after saying why this test is skipped.
fn server(test: &str) -> Option<&'static KubeApiServer> {
    match KubeApiServer::shared() {
        Ok(kube) => Some(kube),
        Err(e) => {
            e.skip(test);
            None
        }
    }
}

fn workspace() -> &'static Path {
    Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."))
}

/// Every CRD the project ships: the checked-in YAML files and bmm's Rust types.
fn our_crds() -> anyhow::Result<Vec<CustomResourceDefinition>> {
    let mut crds = Vec::new();
    for file in CRD_FILES {
        let path = workspace().join(file);
        let text = std::fs::read_to_string(&path)
            .with_context(|| format!("reading {}", path.display()))?;
        for document in serde_norway::Deserializer::from_str(&text) {
            let value = Value::deserialize(document).with_context(|| format!("parsing {file}"))?;
            if value.is_null() {
                continue;
            }
            crds.push(serde_json::from_value(value).with_context(|| format!("a CRD in {file}"))?);
        }
    }
    crds.extend(nephrite_bmm::crd::all_crds());
    Ok(crds)
}

fn crd_name(crd: &CustomResourceDefinition) -> String {
    crd.metadata.name.clone().unwrap_or_default()
}

/// Server-side apply every CRD and wait until each is Established.
async fn apply_crds(
    client: &kube::Client,
    crds: &[CustomResourceDefinition],
) -> anyhow::Result<()> {
    kube_apiserver::apply_crds(client, crds, MANAGER, Duration::from_secs(60)).await?;
    Ok(())
}

/// Every (CRD name, message) of an `x-kubernetes-validations` rule in `crds`.
fn cel_rules(crds: &[CustomResourceDefinition]) -> anyhow::Result<BTreeSet<(String, String)>> {
    fn walk(value: &Value, crd: &str, found: &mut BTreeSet<(String, String)>) {
        match value {
            Value::Object(map) => {
                for rule in map
                    .get("x-kubernetes-validations")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                {
                    let message = rule["message"].as_str().or(rule["rule"].as_str());
                    found.insert((crd.to_owned(), message.unwrap_or_default().to_owned()));
                }
                map.values().for_each(|v| walk(v, crd, found));
            }
            Value::Array(items) => items.iter().for_each(|v| walk(v, crd, found)),
            _ => {}
        }
    }
    let mut found = BTreeSet::new();
    for crd in crds {
        walk(&serde_json::to_value(crd)?, &crd_name(crd), &mut found);
    }
    Ok(found)
}

/// A NvidiaBMMCluster spec every rule accepts.
fn cluster_spec() -> Value {
    json!({
        "siteRef": {"name": "site-a"},
        "vpc": {
            "name": "vpc-a",
            "networkSecurityGroup": {
                "name": "nsg-a",
                "rules": [{"name": "api", "direction": "INGRESS", "protocol": "TCP",
                           "action": "PERMIT", "portRange": "6443"}],
            },
        },
        "subnets": [{"name": "cp", "cidr": "10.100.0.0/24", "role": "control-plane"}],
    })
}

/// A NvidiaBMMMachine spec every rule accepts.
fn machine_spec() -> Value {
    json!({"instanceType": {"id": "type-a"}, "network": {"subnetName": "cp"}})
}

/// One CEL rule's case: the kind, the valid spec, where in the object a bad value goes, the
/// value, and the rule's message the refusal must carry.
struct CelCase {
    kind: &'static str,
    spec: fn() -> Value,
    pointer: &'static str,
    bad: fn() -> Value,
    message: &'static str,
}

/// A row per CEL rule per CRD that carries it (templates embed the same types).
const CEL_CASES: &[CelCase] = &[
    CelCase {
        kind: "NvidiaBMMCluster",
        spec: cluster_spec,
        pointer: "/spec/siteRef",
        bad: || json!({}),
        message: "siteRef needs name or id",
    },
    CelCase {
        kind: "NvidiaBMMCluster",
        spec: cluster_spec,
        pointer: "/spec/vpc/networkSecurityGroup/rules/0/protocol",
        bad: || json!("ICMP"),
        message: "portRange is only allowed for TCP and UDP",
    },
    CelCase {
        kind: "NvidiaBMMClusterTemplate",
        spec: || json!({"template": {"spec": cluster_spec()}}),
        pointer: "/spec/template/spec/siteRef",
        bad: || json!({}),
        message: "siteRef needs name or id",
    },
    CelCase {
        kind: "NvidiaBMMClusterTemplate",
        spec: || json!({"template": {"spec": cluster_spec()}}),
        pointer: "/spec/template/spec/vpc/networkSecurityGroup/rules/0/protocol",
        bad: || json!("ANY"),
        message: "portRange is only allowed for TCP and UDP",
    },
    CelCase {
        kind: "NvidiaBMMMachine",
        spec: machine_spec,
        pointer: "/spec/instanceType",
        bad: || json!({"allowUnhealthyMachine": true}),
        message: "instanceType needs id or machineID",
    },
    CelCase {
        kind: "NvidiaBMMMachineTemplate",
        spec: || json!({"template": {"spec": machine_spec()}}),
        pointer: "/spec/template/spec/instanceType",
        bad: || json!({}),
        message: "instanceType needs id or machineID",
    },
];

/// The API of `kind`'s custom objects in `default`, from its CRD.
fn api_for(
    client: &kube::Client,
    crds: &[CustomResourceDefinition],
    kind: &str,
) -> anyhow::Result<(String, Api<DynamicObject>, ApiResource)> {
    let crd = crds
        .iter()
        .find(|c| c.spec.names.kind == kind)
        .with_context(|| format!("no CRD for kind {kind}"))?;
    let version = crd
        .spec
        .versions
        .iter()
        .find(|v| v.storage)
        .with_context(|| format!("CRD for {kind} stores no version"))?;
    let gvk = GroupVersionKind::gvk(&crd.spec.group, &version.name, kind);
    let resource = ApiResource::from_gvk_with_plural(&gvk, &crd.spec.names.plural);
    let api = Api::namespaced_with(client.clone(), "default", &resource);
    Ok((crd_name(crd), api, resource))
}

fn object(resource: &ApiResource, spec: Value) -> anyhow::Result<DynamicObject> {
    Ok(serde_json::from_value(json!({
        "apiVersion": resource.api_version,
        "kind": resource.kind,
        "metadata": {"name": "cel-probe", "namespace": "default"},
        "spec": spec,
    }))?)
}

#[tokio::test]
async fn every_crd_applies_and_each_cel_rule_refuses_its_bad_object_with_its_message()
-> anyhow::Result<()> {
    let Some(kube) = server("every_crd_applies_and_each_cel_rule_refuses_its_bad_object") else {
        return Ok(());
    };
    let client = kube.endpoint().client()?;
    let crds = our_crds()?;
    ensure!(
        crds.len() >= 8,
        "expected ntc's, the Route and bmm's CRDs, got {}",
        crds.len()
    );
    apply_crds(&client, &crds).await?;

    let in_crds = cel_rules(&crds)?;
    let mut in_table = BTreeSet::new();
    for case in CEL_CASES {
        let (crd, api, resource) = api_for(&client, &crds, case.kind)?;
        in_table.insert((crd, case.message.to_owned()));
        let dry_run = PostParams {
            dry_run: true,
            ..PostParams::default()
        };
        let good = object(&resource, (case.spec)())?;
        api.create(&dry_run, &good)
            .await
            .with_context(|| format!("the valid {} was refused", case.kind))?;

        let mut bad = serde_json::to_value(&good)?;
        *bad.pointer_mut(case.pointer)
            .with_context(|| format!("{} has no {}", case.kind, case.pointer))? = (case.bad)();
        let bad: DynamicObject = serde_json::from_value(bad)?;
        match api.create(&dry_run, &bad).await {
            Ok(_) => bail!(
                "{} with a bad {} was accepted: the rule \"{}\" is gone from its CRD",
                case.kind,
                case.pointer,
                case.message
            ),
            Err(kube::Error::Api(status)) => ensure!(
                status.code == 422 && status.message.contains(case.message),
                "{} {}: expected 422 naming \"{}\", got {} {}",
                case.kind,
                case.pointer,
                case.message,
                status.code,
                status.message
            ),
            Err(other) => return Err(other.into()),
        }
    }
    let untested: Vec<_> = in_crds.difference(&in_table).collect();
    ensure!(
        untested.is_empty(),
        "CEL rules without a row in CEL_CASES: {untested:?}"
    );
    let gone: Vec<_> = in_table.difference(&in_crds).collect();
    ensure!(
        gone.is_empty(),
        "rows of CEL_CASES whose rule is not in the CRDs: {gone:?}"
    );
    Ok(())
}

#[tokio::test]
async fn a_service_account_gets_403_until_rbac_grants_it_and_a_wrong_token_401()
-> anyhow::Result<()> {
    let Some(kube) = server("a_service_account_gets_403_until_rbac_grants_it") else {
        return Ok(());
    };
    let endpoint = kube.endpoint();
    let admin = endpoint.client()?;
    let version = admin.apiserver_version().await?;
    ensure!(
        version.git_version == nephrite_test_services::kube_apiserver::KUBERNETES_VERSION,
        "the server says it is {}",
        version.git_version
    );
    Api::<ConfigMap>::namespaced(admin.clone(), "default")
        .list(&ListParams::default())
        .await
        .context("the admin lists ConfigMaps")?;

    let token = endpoint
        .service_account_token("default", "no-rights")
        .await?;
    let account = endpoint.client_with_token(&token)?;
    let config_maps = Api::<ConfigMap>::namespaced(account.clone(), "default");
    match config_maps.list(&ListParams::default()).await {
        Err(kube::Error::Api(status)) => ensure!(
            status.code == 403
                && status
                    .message
                    .contains("system:serviceaccount:default:no-rights"),
            "expected 403 for the ServiceAccount, got {} {}",
            status.code,
            status.message
        ),
        other => bail!("a ServiceAccount without RBAC listed ConfigMaps: {other:?}"),
    }

    // Granted, the same token lists: the 403 was RBAC's, not a broken token.
    let meta = |name: &str| ObjectMeta {
        name: Some(name.to_owned()),
        namespace: Some("default".to_owned()),
        ..ObjectMeta::default()
    };
    let role = Role {
        metadata: meta("list-config-maps"),
        rules: Some(vec![PolicyRule {
            api_groups: Some(vec![String::new()]),
            resources: Some(vec!["configmaps".to_owned()]),
            verbs: vec!["list".to_owned()],
            ..PolicyRule::default()
        }]),
    };
    Api::<Role>::namespaced(admin.clone(), "default")
        .create(&PostParams::default(), &role)
        .await?;
    let binding = RoleBinding {
        metadata: meta("no-rights-lists-config-maps"),
        role_ref: RoleRef {
            api_group: "rbac.authorization.k8s.io".to_owned(),
            kind: "Role".to_owned(),
            name: "list-config-maps".to_owned(),
        },
        subjects: Some(vec![Subject {
            kind: "ServiceAccount".to_owned(),
            name: "no-rights".to_owned(),
            namespace: Some("default".to_owned()),
            ..Subject::default()
        }]),
    };
    Api::<RoleBinding>::namespaced(admin.clone(), "default")
        .create(&PostParams::default(), &binding)
        .await?;
    // The authorizer reads RBAC from its informers: allow it a moment to see the binding.
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        match config_maps.list(&ListParams::default()).await {
            Ok(_) => break,
            Err(kube::Error::Api(status)) if status.code == 403 && Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            Err(e) => bail!("the granted ServiceAccount still cannot list: {e}"),
        }
    }

    let stranger = endpoint.client_with_token("not-a-token")?;
    match Api::<ConfigMap>::namespaced(stranger, "default")
        .list(&ListParams::default())
        .await
    {
        Err(kube::Error::Api(status)) => ensure!(
            status.code == 401,
            "expected 401 for an unknown token, got {} {}",
            status.code,
            status.message
        ),
        other => bail!("an unknown token listed ConfigMaps: {other:?}"),
    }
    Ok(())
}

#[tokio::test]
async fn the_written_kubeconfig_reaches_the_server_as_admin() -> anyhow::Result<()> {
    let Some(kube) = server("the_written_kubeconfig_reaches_the_server_as_admin") else {
        return Ok(());
    };
    eprintln!(
        "kube-apiserver and etcd ready in {:.1}s (RSS {} MiB)",
        kube.started_in().as_secs_f64(),
        (nephrite_test_services::process::tree_rss_bytes(kube.apiserver_pid())
            + nephrite_test_services::process::tree_rss_bytes(kube.etcd_pid()))
            >> 20
    );
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("kubeconfig");
    kube.write_kubeconfig(&path)?;
    let kubeconfig = kube::config::Kubeconfig::read_from(&path)?;
    let config = kube::Config::from_custom_kubeconfig(
        kubeconfig,
        &kube::config::KubeConfigOptions::default(),
    )
    .await?;
    ensure!(config.cluster_url.to_string().starts_with(&kube.url()));
    let client = kube::Client::try_from(config)?;
    let namespaces: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(client);
    let names: Vec<String> = namespaces
        .list(&ListParams::default())
        .await?
        .items
        .into_iter()
        .filter_map(|n| n.metadata.name)
        .collect();
    ensure!(
        names.iter().any(|n| n == "kube-system"),
        "namespaces: {names:?}"
    );
    Ok(())
}

#[tokio::test]
async fn a_daemons_manifest_gives_its_service_account_exactly_its_rules() -> anyhow::Result<()> {
    let Some(kube) = server("a_daemons_manifest_gives_its_service_account_exactly_its_rules")
    else {
        return Ok(());
    };
    let endpoint = kube.endpoint();
    let file = "topology/deploy/kubernetes.yaml";
    let yaml = std::fs::read_to_string(workspace().join(file))?;
    let missing = endpoint
        .apply_access(file, &yaml, "nephrite-system/nobody")
        .await
        .expect_err("the manifest defines no ServiceAccount nobody");
    assert!(
        missing
            .to_string()
            .contains("no ServiceAccount nephrite-system/nobody"),
        "{missing}"
    );
    let ntc = endpoint
        .apply_access(file, &yaml, "nephrite-system/ntc")
        .await?;
    let client = endpoint.client_with_token(&ntc.token)?;
    // The ClusterRole grants NFTopologies (and Porch kinds), not ConfigMaps.
    apply_crds(&endpoint.client()?, &our_crds()?).await?;
    let topologies = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("topology.nephio.org", "v1alpha1", "NFTopology"),
        "nftopologies",
    );
    let listed = Api::<DynamicObject>::all_with(client.clone(), &topologies)
        .list(&ListParams::default())
        .await;
    ensure!(listed.is_ok(), "ntc may list NFTopologies: {listed:?}");
    let config_maps = Api::<ConfigMap>::namespaced(client, "kube-system")
        .list(&ListParams::default())
        .await;
    match config_maps {
        Err(kube::Error::Api(status)) if status.code == 403 => Ok(()),
        other => bail!("ntc's token listed ConfigMaps in kube-system: {other:?}"),
    }
}

/// Every Kubernetes manifest under a daemon's `deploy/`, relative to the workspace.
/// `bmm-provider/deploy/templates/` is left out: it is a clusterctl template (`${VARIABLES}`
/// clusterctl renders, kinds of the Cluster API's own providers), not a manifest.
const DEPLOY_MANIFESTS: &[&str] = &[
    "preparer/deploy/kubernetes.yaml",
    "topology/deploy/kubernetes.yaml",
    "nimbess-agent/deploy/daemonset.yaml",
    "kuryr-l7/deploy/kubernetes/kuryr-l7.yaml",
    "kuryr-l7/deploy/kubernetes/rbac.yaml",
    "kuryr-l7/deploy/kubernetes/rbac-octavia.yaml",
    "kuryr-l7/deploy/kubernetes/vif-handler.yaml",
    "bmm-provider/deploy/rbac.yaml",
    "bmm-provider/deploy/manager.yaml",
    "bmm-provider/deploy/ccm/cloud-controller-manager.yaml",
    "bmm-provider/deploy/openshift/machine-api-provider.yaml",
    "bmm-provider/deploy/openshift/machineset.yaml",
];

/// Third-party CRDs some manifests' kinds need (Porch's, OpenShift's Machine API), as fixtures.
const FIXTURE_CRDS: &[&str] = &[
    "topology/tests/porch-crds.yaml",
    "bmm-provider/tests/fixtures/machine-api-crds.yaml",
];

/// The documents of a YAML file, nulls skipped.
fn documents(file: &str) -> anyhow::Result<Vec<Value>> {
    let path = workspace().join(file);
    let text =
        std::fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))?;
    let mut values = Vec::new();
    for document in serde_norway::Deserializer::from_str(&text) {
        let value = Value::deserialize(document).with_context(|| format!("parsing {file}"))?;
        if !value.is_null() {
            values.push(value);
        }
    }
    Ok(values)
}

#[tokio::test]
async fn every_deploy_manifest_passes_a_server_side_dry_run_apply() -> anyhow::Result<()> {
    let Some(kube) = server("every_deploy_manifest_passes_a_server_side_dry_run_apply") else {
        return Ok(());
    };
    let client = kube.endpoint().client()?;
    let mut crds = our_crds()?;
    for file in FIXTURE_CRDS {
        for value in documents(file)? {
            crds.push(serde_json::from_value(value).with_context(|| format!("a CRD in {file}"))?);
        }
    }
    apply_crds(&client, &crds).await?;
    let discovery = kube::discovery::Discovery::new(client.clone())
        .run()
        .await
        .context("discovering the served kinds")?;
    let namespaces: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(client.clone());
    let mut refused = Vec::new();
    let mut applied = 0;
    for file in DEPLOY_MANIFESTS {
        for (index, value) in documents(file)?.into_iter().enumerate() {
            let object: DynamicObject = serde_json::from_value(value)
                .with_context(|| format!("{file}, document {index}: not an object"))?;
            let types = object
                .types
                .clone()
                .with_context(|| format!("{file}, document {index}: no apiVersion or kind"))?;
            let gvk = GroupVersionKind::try_from(&types)
                .with_context(|| format!("{file}, document {index}: {}", types.api_version))?;
            let Some((resource, capabilities)) = discovery.resolve_gvk(&gvk) else {
                refused.push(format!("{file}, document {index}: {gvk:?} is not served"));
                continue;
            };
            let name = object.metadata.name.clone().unwrap_or_default();
            let api: Api<DynamicObject> = match capabilities.scope {
                kube::discovery::Scope::Namespaced => {
                    let namespace = object.metadata.namespace.as_deref().unwrap_or("default");
                    // The manifest may be applied before its namespace's own document: the
                    // namespace exists for the dry run as it would after the first apply.
                    let ns = json!({"apiVersion": "v1", "kind": "Namespace",
                                    "metadata": {"name": namespace}});
                    namespaces
                        .patch(namespace, &PatchParams::apply(MANAGER), &Patch::Apply(&ns))
                        .await
                        .with_context(|| format!("creating namespace {namespace}"))?;
                    Api::namespaced_with(client.clone(), namespace, &resource)
                }
                kube::discovery::Scope::Cluster => Api::all_with(client.clone(), &resource),
            };
            let params = PatchParams::apply(MANAGER).force().dry_run();
            match api.patch(&name, &params, &Patch::Apply(&object)).await {
                Ok(_) => applied += 1,
                Err(e) => refused.push(format!(
                    "{file}, document {index} ({} {name}): {e}",
                    types.kind
                )),
            }
        }
    }
    ensure!(
        refused.is_empty(),
        "refused by the server:\n{}",
        refused.join("\n")
    );
    ensure!(
        applied >= DEPLOY_MANIFESTS.len(),
        "only {applied} documents applied"
    );
    Ok(())
}

#[tokio::test]
async fn printer_columns_are_what_kubectl_get_shows() -> anyhow::Result<()> {
    let Some(kube) = server("printer_columns_are_what_kubectl_get_shows") else {
        return Ok(());
    };
    let client = kube.endpoint().client()?;
    let crds = our_crds()?;
    apply_crds(&client, &crds).await?;
    let mut checked = 0;
    for crd in &crds {
        let Some(version) = crd.spec.versions.iter().find(|v| v.served) else {
            continue;
        };
        let Some(columns) = version.additional_printer_columns.as_ref() else {
            continue;
        };
        let scope = if crd.spec.scope == "Namespaced" {
            "namespaces/default/"
        } else {
            ""
        };
        // What `kubectl get` asks for: the list as a server-side Table.
        let request = http::Request::get(format!(
            "/apis/{}/{}/{scope}{}",
            crd.spec.group, version.name, crd.spec.names.plural
        ))
        .header(
            "Accept",
            "application/json;as=Table;v=v1;g=meta.k8s.io,application/json",
        )
        .body(Vec::new())?;
        let table: Value = client.request(request).await?;
        let shown: Vec<&str> = table["columnDefinitions"]
            .as_array()
            .with_context(|| format!("{}: not a Table: {table}", crd_name(crd)))?
            .iter()
            .filter_map(|c| c["name"].as_str())
            .collect();
        for column in columns {
            ensure!(
                shown.contains(&column.name.as_str()),
                "{}: column {} missing from kubectl get's table {shown:?}",
                crd_name(crd),
                column.name
            );
        }
        checked += 1;
    }
    ensure!(checked > 0, "no CRD of ours has printer columns");
    Ok(())
}
