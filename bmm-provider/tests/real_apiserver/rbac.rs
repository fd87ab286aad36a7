//! Least privilege, read off the manifests: for each ServiceAccount, the rules its bindings
//! give it are exactly the table of what its role's code calls, and no rule says `*`. The
//! scenarios against the real server prove the table is enough (a verb missing from a
//! manifest fails them with the API's 403 in the daemon's log); this proves it is no more.

use std::collections::BTreeSet;

use anyhow::ensure;
use nephrite_test_services::rbac::{self, Grant, RbacError};

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

/// The grants of a table, one per verb (`core` is the empty group, `secrets[name]` a rule
/// limited to one name).
fn expand(rows: &[Row]) -> Vec<Grant> {
    rows.iter()
        .flat_map(|&(scope, group, resource, verbs)| {
            let group = if group == "core" { "" } else { group };
            let (resource, name) = match resource.split_once('[') {
                Some((resource, name)) => (resource, Some(name.trim_end_matches(']'))),
                None => (resource, None),
            };
            verbs.iter().map(move |verb| {
                let grant = match scope {
                    "cluster" => Grant::cluster(group, resource, verb),
                    namespace => Grant::in_namespace(namespace, group, resource, verb),
                };
                match name {
                    Some(name) => grant.named(name),
                    None => grant,
                }
            })
        })
        .collect()
}

/// What `account` (`namespace/name`) is granted by the bindings of `text`; refused when a rule
/// has a `*` or a non-resource URL, a binding names a role the manifest does not define, or
/// the account is granted nothing.
fn grants(source: &str, text: &str, account: &str) -> anyhow::Result<BTreeSet<Grant>> {
    let granted = rbac::granted(&[(source, text)], account)?;
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
        if let Err(mismatch) = rbac::assert_exact(&granted, expand(table)) {
            wrong.push(format!("{source} ({account}):\n{mismatch}"));
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
    ensure!(
        matches!(
            refused.downcast_ref(),
            Some(RbacError::Wildcard { field: "verbs", .. })
        ),
        "{refused}"
    );
    let extra = text.replacen(nodes_rule, "verbs: [get, list, watch, patch, delete]", 1);
    let granted = grants(source, &extra, account)?;
    let mismatch = rbac::assert_exact(&granted, expand(table)).expect_err("an extra verb");
    ensure!(
        mismatch.granted_not_used == [Grant::cluster("", "nodes", "delete")]
            && mismatch.used_not_granted.is_empty(),
        "{mismatch}"
    );
    ensure!(
        mismatch.to_string().contains("cluster core/nodes:delete"),
        "{mismatch}"
    );
    Ok(())
}
