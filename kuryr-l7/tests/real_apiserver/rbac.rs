//! Least privilege, read from the manifests: every rule the Roles and ClusterRoles of
//! `deploy/kubernetes/*.yaml` grant, followed through their bindings to a ServiceAccount, must
//! be a row of [`EXPECTED`], and every row must be granted; no `*` anywhere. A right added to
//! a manifest without a row (or a row left after its right was dropped) fails here; a right
//! dropped that the daemon needs fails the scenarios that run it with that manifest's token.

use std::collections::{BTreeMap, BTreeSet};

use anyhow::{Context, bail, ensure};
use serde_json::Value;

use super::cluster::{deploy, documents};

/// The manifests that hold access objects.
const FILES: &[&str] = &[
    "kuryr-l7.yaml",
    "rbac.yaml",
    "rbac-octavia.yaml",
    "vif-handler.yaml",
];

/// `(ServiceAccount, where, apiGroup, resource, verb)`: `where` is `cluster` for a
/// ClusterRole bound cluster-wide, else the Role's namespace. What each right is for is the
/// comment beside it.
const EXPECTED: &[(&str, &str, &str, &str, &str)] = &[
    // The controller's watches (kube-runtime reflectors list, then watch; nothing is read
    // with get).
    (
        CONTROLLER,
        "cluster",
        "networking.k8s.io",
        "ingresses",
        "list",
    ),
    (
        CONTROLLER,
        "cluster",
        "networking.k8s.io",
        "ingresses",
        "watch",
    ),
    (
        CONTROLLER,
        "cluster",
        "networking.k8s.io",
        "ingressclasses",
        "list",
    ),
    (
        CONTROLLER,
        "cluster",
        "networking.k8s.io",
        "ingressclasses",
        "watch",
    ),
    (
        CONTROLLER,
        "cluster",
        "route.openshift.io",
        "routes",
        "list",
    ),
    (
        CONTROLLER,
        "cluster",
        "route.openshift.io",
        "routes",
        "watch",
    ),
    (CONTROLLER, "cluster", "", "services", "list"),
    (CONTROLLER, "cluster", "", "services", "watch"),
    (CONTROLLER, "cluster", "", "secrets", "list"),
    (CONTROLLER, "cluster", "", "secrets", "watch"),
    (
        CONTROLLER,
        "cluster",
        "discovery.k8s.io",
        "endpointslices",
        "list",
    ),
    (
        CONTROLLER,
        "cluster",
        "discovery.k8s.io",
        "endpointslices",
        "watch",
    ),
    // The leader's writes: status (merge patches) and Warning Events (kube's Recorder
    // creates an Event, then patches its series).
    (
        CONTROLLER,
        "cluster",
        "networking.k8s.io",
        "ingresses/status",
        "patch",
    ),
    (
        CONTROLLER,
        "cluster",
        "route.openshift.io",
        "routes/status",
        "patch",
    ),
    (CONTROLLER, "cluster", "events.k8s.io", "events", "create"),
    (CONTROLLER, "cluster", "events.k8s.io", "events", "patch"),
    // Leader election: read the Lease, create it, renew and take it over (PUT).
    (
        CONTROLLER,
        "kuryr-l7",
        "coordination.k8s.io",
        "leases",
        "get",
    ),
    (
        CONTROLLER,
        "kuryr-l7",
        "coordination.k8s.io",
        "leases",
        "create",
    ),
    (
        CONTROLLER,
        "kuryr-l7",
        "coordination.k8s.io",
        "leases",
        "update",
    ),
    // rbac-octavia.yaml, --driver octavia only: the state annotations on Ingresses and
    // Routes, the router state read from and written on the controller's Node.
    (
        CONTROLLER,
        "cluster",
        "networking.k8s.io",
        "ingresses",
        "patch",
    ),
    (
        CONTROLLER,
        "cluster",
        "route.openshift.io",
        "routes",
        "patch",
    ),
    (CONTROLLER, "cluster", "", "nodes", "get"),
    (CONTROLLER, "cluster", "", "nodes", "patch"),
    // The VIF handler: its Pod Controller (list, watch; the finalizer and the record are
    // patches), the Node watch (VF counts), the NetworkAttachmentDefinition watch, Events.
    (VIF_HANDLER, "cluster", "", "pods", "list"),
    (VIF_HANDLER, "cluster", "", "pods", "watch"),
    (VIF_HANDLER, "cluster", "", "pods", "patch"),
    (VIF_HANDLER, "cluster", "", "nodes", "list"),
    (VIF_HANDLER, "cluster", "", "nodes", "watch"),
    (
        VIF_HANDLER,
        "cluster",
        "k8s.cni.cncf.io",
        "network-attachment-definitions",
        "list",
    ),
    (
        VIF_HANDLER,
        "cluster",
        "k8s.cni.cncf.io",
        "network-attachment-definitions",
        "watch",
    ),
    (VIF_HANDLER, "cluster", "events.k8s.io", "events", "create"),
    (VIF_HANDLER, "cluster", "events.k8s.io", "events", "patch"),
];

const CONTROLLER: &str = "kuryr-l7/kuryr-l7-controller";
const VIF_HANDLER: &str = "kuryr-l7/kuryr-vif-handler";

type Right = (String, String, String, String, String);

/// `(kind, namespace or "cluster", name)` of a role.
type RoleKey = (String, String, String);

fn strings(value: &Value, what: &str) -> anyhow::Result<Vec<String>> {
    value
        .as_array()
        .with_context(|| format!("{what} is not a list"))?
        .iter()
        .map(|v| {
            v.as_str()
                .map(str::to_owned)
                .with_context(|| format!("{what} holds a non-string"))
        })
        .collect()
}

/// Every right the manifests grant, with the file that granted it in errors.
fn granted() -> anyhow::Result<BTreeSet<Right>> {
    let mut roles: BTreeMap<RoleKey, Vec<(String, String, String)>> = BTreeMap::new();
    let mut bindings = Vec::new();
    for file in FILES {
        for doc in documents(&deploy(file)?)? {
            let kind = doc["kind"].as_str().unwrap_or_default().to_owned();
            let name = doc["metadata"]["name"]
                .as_str()
                .unwrap_or_default()
                .to_owned();
            let namespace = doc["metadata"]["namespace"]
                .as_str()
                .unwrap_or("cluster")
                .to_owned();
            match kind.as_str() {
                "ClusterRole" | "Role" => {
                    let mut rights = Vec::new();
                    for (i, rule) in doc["rules"].as_array().into_iter().flatten().enumerate() {
                        let at = format!("{file}: {kind} {name}, rule {i}");
                        ensure!(
                            rule.get("resourceNames").is_none()
                                && rule.get("nonResourceURLs").is_none(),
                            "{at}: only apiGroups, resources and verbs are expected"
                        );
                        let groups = strings(&rule["apiGroups"], &format!("{at}: apiGroups"))?;
                        let resources = strings(&rule["resources"], &format!("{at}: resources"))?;
                        let verbs = strings(&rule["verbs"], &format!("{at}: verbs"))?;
                        for item in groups.iter().chain(&resources).chain(&verbs) {
                            ensure!(!item.contains('*'), "{at}: a wildcard {item:?}");
                        }
                        for group in &groups {
                            for resource in &resources {
                                for verb in &verbs {
                                    rights.push((group.clone(), resource.clone(), verb.clone()));
                                }
                            }
                        }
                    }
                    roles.insert((kind, namespace, name), rights);
                }
                "ClusterRoleBinding" | "RoleBinding" => bindings.push((file, kind, namespace, doc)),
                _ => {}
            }
        }
    }
    let mut out = BTreeSet::new();
    for (file, kind, namespace, doc) in bindings {
        let name = doc["metadata"]["name"].as_str().unwrap_or_default();
        let role_kind = doc["roleRef"]["kind"].as_str().unwrap_or_default();
        let role_name = doc["roleRef"]["name"].as_str().unwrap_or_default();
        let role_namespace = if role_kind == "Role" {
            namespace.clone()
        } else {
            "cluster".to_owned()
        };
        let key = (role_kind.to_owned(), role_namespace, role_name.to_owned());
        let Some(rights) = roles.get(&key) else {
            bail!("{file}: {kind} {name} binds {role_kind} {role_name}, which no manifest defines");
        };
        // A RoleBinding grants in its own namespace, whatever role it binds.
        let scope = if kind == "RoleBinding" {
            namespace.clone()
        } else {
            "cluster".to_owned()
        };
        for subject in doc["subjects"].as_array().into_iter().flatten() {
            ensure!(
                subject["kind"] == "ServiceAccount",
                "{file}: {kind} {name} binds a {} (only ServiceAccounts are expected)",
                subject["kind"]
            );
            let account = format!(
                "{}/{}",
                subject["namespace"].as_str().unwrap_or(&namespace),
                subject["name"].as_str().unwrap_or_default()
            );
            for (group, resource, verb) in rights {
                out.insert((
                    account.clone(),
                    scope.clone(),
                    group.clone(),
                    resource.clone(),
                    verb.clone(),
                ));
            }
        }
    }
    Ok(out)
}

#[test]
fn the_manifests_grant_each_service_account_exactly_what_it_uses_and_no_wildcard()
-> anyhow::Result<()> {
    let granted = granted()?;
    let expected: BTreeSet<Right> = EXPECTED
        .iter()
        .map(|(a, w, g, r, v)| {
            (
                (*a).to_owned(),
                (*w).to_owned(),
                (*g).to_owned(),
                (*r).to_owned(),
                (*v).to_owned(),
            )
        })
        .collect();
    let extra: Vec<_> = granted.difference(&expected).collect();
    let missing: Vec<_> = expected.difference(&granted).collect();
    ensure!(
        extra.is_empty() && missing.is_empty(),
        "granted beyond the table (drop them, or add a row saying what uses them): {extra:#?}\n\
         in the table but not granted: {missing:#?}"
    );
    Ok(())
}
