//! Least privilege, read off the manifests: for each ServiceAccount, the rules its bindings
//! give it are exactly the table of what its role's code calls, and no rule says `*`. The
//! scenarios against the real server prove the table is enough (a verb missing from a
//! manifest fails them with the API's 403 in the daemon's log); this proves it is no more.

use std::collections::{BTreeMap, BTreeSet};

use anyhow::{Context, bail, ensure};
use k8s_openapi::api::rbac::v1::{PolicyRule, RoleRef, Subject};
use serde::Deserialize;
use serde_json::Value;

/// One row: where the grant holds (`cluster` or a namespace), the API group (`core` for the
/// empty one), the resource (`secrets[name]` when limited to names) and its verbs.
type Row = (
    &'static str,
    &'static str,
    &'static str,
    &'static [&'static str],
);

/// `bmm-provider serve`: the cluster and machine controllers watch their kinds and the Cluster
/// API objects, read owners, infrastructure clusters and Secrets by name, merge-patch
/// finalizers and status, and hold the `bmm-provider` Lease (get, create, replace). It records
/// no Events.
const MANAGER: &[Row] = &[
    (
        "cluster",
        "infrastructure.cluster.x-k8s.io",
        "nvidiabmmclusters",
        &["get", "list", "watch", "patch"],
    ),
    (
        "cluster",
        "infrastructure.cluster.x-k8s.io",
        "nvidiabmmclusters/status",
        &["patch"],
    ),
    (
        "cluster",
        "infrastructure.cluster.x-k8s.io",
        "nvidiabmmmachines",
        &["list", "watch", "patch"],
    ),
    (
        "cluster",
        "infrastructure.cluster.x-k8s.io",
        "nvidiabmmmachines/status",
        &["patch"],
    ),
    (
        "cluster",
        "cluster.x-k8s.io",
        "clusters",
        &["get", "list", "watch"],
    ),
    (
        "cluster",
        "cluster.x-k8s.io",
        "machines",
        &["get", "list", "watch"],
    ),
    ("cluster", "core", "secrets", &["get"]),
    (
        "capbmm-system",
        "coordination.k8s.io",
        "leases",
        &["get", "create", "update"],
    ),
];

/// `bmm-provider ccm`: the node controller watches Nodes, patches them and their status,
/// deletes a Node whose instance is gone, records Events (kube-runtime's recorder writes
/// `events.k8s.io/v1`), reads its one credentials Secret and holds its Lease.
const CCM: &[Row] = &[
    (
        "cluster",
        "core",
        "nodes",
        &["list", "watch", "patch", "delete"],
    ),
    ("cluster", "core", "nodes/status", &["patch"]),
    ("cluster", "events.k8s.io", "events", &["create", "patch"]),
    (
        "kube-system",
        "core",
        "secrets[bmm-cloud-credentials]",
        &["get"],
    ),
    (
        "kube-system",
        "coordination.k8s.io",
        "leases",
        &["get", "create", "update"],
    ),
];

/// `bmm-provider machine-api`: the Machine controller watches Machines, patches them and their
/// status, reads the credentials and user-data Secrets by name, holds its Lease, and links
/// Nodes (watched, read, annotated). It records no Events.
const MACHINE_API: &[Row] = &[
    (
        "openshift-machine-api",
        "machine.openshift.io",
        "machines",
        &["list", "watch", "patch"],
    ),
    (
        "openshift-machine-api",
        "machine.openshift.io",
        "machines/status",
        &["patch"],
    ),
    ("openshift-machine-api", "core", "secrets", &["get"]),
    (
        "openshift-machine-api",
        "coordination.k8s.io",
        "leases",
        &["get", "create", "update"],
    ),
    (
        "cluster",
        "core",
        "nodes",
        &["get", "list", "watch", "patch"],
    ),
];

/// Each manifest, the ServiceAccount it runs its daemon as, and that daemon's table.
const ACCOUNTS: &[(&str, &str, &str, &[Row])] = &[
    (
        "deploy/rbac.yaml",
        include_str!("../../deploy/rbac.yaml"),
        "capbmm-system/capbmm-controller-manager",
        MANAGER,
    ),
    (
        "deploy/ccm/cloud-controller-manager.yaml",
        include_str!("../../deploy/ccm/cloud-controller-manager.yaml"),
        "kube-system/bmm-cloud-controller-manager",
        CCM,
    ),
    (
        "deploy/openshift/machine-api-provider.yaml",
        include_str!("../../deploy/openshift/machine-api-provider.yaml"),
        "openshift-machine-api/bmm-machine-api",
        MACHINE_API,
    ),
];

/// A Role or ClusterRole as far as grants go.
#[derive(Deserialize)]
struct RoleDoc {
    #[serde(default)]
    rules: Vec<PolicyRule>,
}

/// A RoleBinding or ClusterRoleBinding.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct BindingDoc {
    role_ref: RoleRef,
    #[serde(default)]
    subjects: Vec<Subject>,
}

/// The `scope group/resource verb` lines of a table, one per verb.
fn expand(rows: &[Row]) -> BTreeSet<String> {
    rows.iter()
        .flat_map(|(scope, group, resource, verbs)| {
            verbs
                .iter()
                .map(move |verb| format!("{scope} {group}/{resource} {verb}"))
        })
        .collect()
}

/// What `account` (`namespace/name`) is granted by the bindings of `text`, one line per
/// (scope, group, resource, verb); refused when a rule has a `*` or a non-resource URL, or a
/// binding names a role the manifest does not define.
fn grants(source: &str, text: &str, account: &str) -> anyhow::Result<BTreeSet<String>> {
    let (sa_namespace, sa_name) = account.split_once('/').context("namespace/name")?;
    let mut roles: BTreeMap<(String, String), Vec<PolicyRule>> = BTreeMap::new();
    let mut bindings = Vec::new();
    for (index, doc) in serde_norway::Deserializer::from_str(text).enumerate() {
        let doc = Value::deserialize(doc).with_context(|| format!("{source} #{index}"))?;
        let kind = doc["kind"].as_str().unwrap_or_default().to_string();
        let namespace = doc["metadata"]["namespace"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        let name = doc["metadata"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        let key = match kind.as_str() {
            "ClusterRole" => ("cluster".to_string(), name.clone()),
            "Role" => (namespace.clone(), name.clone()),
            "ClusterRoleBinding" | "RoleBinding" => {
                let binding: BindingDoc = serde_json::from_value(doc.clone())
                    .with_context(|| format!("{source}: {kind} {name}"))?;
                let scope = if kind == "ClusterRoleBinding" {
                    "cluster".to_string()
                } else {
                    namespace
                };
                bindings.push((scope, binding));
                continue;
            }
            _ => continue,
        };
        let role: RoleDoc =
            serde_json::from_value(doc).with_context(|| format!("{source}: {kind} {name}"))?;
        roles.insert(key, role.rules);
    }
    let mut granted = BTreeSet::new();
    for (scope, binding) in bindings {
        let to_account = binding.subjects.iter().any(|s| {
            s.kind == "ServiceAccount"
                && s.name == sa_name
                && s.namespace.as_deref() == Some(sa_namespace)
        });
        if !to_account {
            continue;
        }
        let role = &binding.role_ref;
        let role_key = match role.kind.as_str() {
            "ClusterRole" => ("cluster".to_string(), role.name.clone()),
            _ => (scope.clone(), role.name.clone()),
        };
        let Some(rules) = roles.get(&role_key) else {
            bail!(
                "{source}: a binding names {} {}, which the manifest does not define",
                role.kind,
                role.name
            );
        };
        for rule in rules {
            let groups = rule.api_groups.clone().unwrap_or_default();
            let resources = rule.resources.clone().unwrap_or_default();
            let names = rule.resource_names.clone().unwrap_or_default();
            for word in groups
                .iter()
                .chain(&resources)
                .chain(&rule.verbs)
                .chain(&names)
            {
                ensure!(
                    !word.contains('*'),
                    "{source}: {} {} grants {word:?}",
                    role.kind,
                    role.name
                );
            }
            ensure!(
                rule.non_resource_urls.is_none(),
                "{source}: {} {} grants non-resource URLs",
                role.kind,
                role.name
            );
            for group in &groups {
                let group = if group.is_empty() { "core" } else { group };
                for resource in &resources {
                    let targets: Vec<String> = if names.is_empty() {
                        vec![resource.clone()]
                    } else {
                        names.iter().map(|n| format!("{resource}[{n}]")).collect()
                    };
                    for target in targets {
                        for verb in &rule.verbs {
                            granted.insert(format!("{scope} {group}/{target} {verb}"));
                        }
                    }
                }
            }
        }
    }
    ensure!(
        !granted.is_empty(),
        "{source} grants ServiceAccount {account} nothing"
    );
    Ok(granted)
}

#[test]
fn each_manifest_grants_its_service_account_exactly_what_its_role_uses_and_no_wildcard()
-> anyhow::Result<()> {
    let mut wrong = Vec::new();
    for (source, text, account, table) in ACCOUNTS {
        let granted = grants(source, text, account)?;
        let expected = expand(table);
        let missing: Vec<_> = expected.difference(&granted).collect();
        let extra: Vec<_> = granted.difference(&expected).collect();
        if !missing.is_empty() || !extra.is_empty() {
            wrong.push(format!(
                "{source} ({account}):\n  used but not granted: {missing:?}\n  \
                 granted but not used: {extra:?}"
            ));
        }
    }
    ensure!(wrong.is_empty(), "{}", wrong.join("\n"));
    Ok(())
}

#[test]
fn a_wildcard_is_refused_and_an_extra_verb_is_named() -> anyhow::Result<()> {
    let (source, text, account, table) = ACCOUNTS[2];
    let nodes_rule = "verbs: [get, list, watch, patch]";
    ensure!(
        text.contains(nodes_rule),
        "the machine-api nodes rule changed: update this test"
    );
    let widened = text.replacen(nodes_rule, "verbs: ['*']", 1);
    let refused = grants(source, &widened, account).expect_err("a * is refused");
    ensure!(refused.to_string().contains("\"*\""), "{refused}");
    let extra = text.replacen(nodes_rule, "verbs: [get, list, watch, patch, delete]", 1);
    let granted = grants(source, &extra, account)?;
    let beyond: Vec<String> = granted.difference(&expand(table)).cloned().collect();
    ensure!(beyond == ["cluster core/nodes delete"], "{beyond:?}");
    Ok(())
}
