//! Least privilege, read from the manifests: every rule the Roles and ClusterRoles of
//! `deploy/kubernetes/*.yaml` grant, followed through their bindings to a ServiceAccount, must
//! be a row of [`EXPECTED`], and every row must be granted; no `*` anywhere. A right added to
//! a manifest without a row (or a row left after its right was dropped) fails here; a right
//! dropped that the daemon needs fails the scenarios that run it with that manifest's token.

use std::collections::BTreeSet;

use anyhow::ensure;
use nephrite_test_services::rbac::{self, Grant};

use super::cluster::deploy;

/// The Gateway API's group.
const GATEWAY: &str = "gateway.networking.k8s.io";

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
    // The Gateway API kinds.
    (CONTROLLER, "cluster", GATEWAY, "gatewayclasses", "list"),
    (CONTROLLER, "cluster", GATEWAY, "gatewayclasses", "watch"),
    (CONTROLLER, "cluster", GATEWAY, "gateways", "list"),
    (CONTROLLER, "cluster", GATEWAY, "gateways", "watch"),
    (CONTROLLER, "cluster", GATEWAY, "httproutes", "list"),
    (CONTROLLER, "cluster", GATEWAY, "httproutes", "watch"),
    (CONTROLLER, "cluster", GATEWAY, "referencegrants", "list"),
    (CONTROLLER, "cluster", GATEWAY, "referencegrants", "watch"),
    // Namespaces, for a Gateway listener's allowedRoutes namespace selector.
    (CONTROLLER, "cluster", "", "namespaces", "list"),
    (CONTROLLER, "cluster", "", "namespaces", "watch"),
    // Gateway API status (merge patches of the status subresource).
    (
        CONTROLLER,
        "cluster",
        GATEWAY,
        "gatewayclasses/status",
        "patch",
    ),
    (CONTROLLER, "cluster", GATEWAY, "gateways/status", "patch"),
    (CONTROLLER, "cluster", GATEWAY, "httproutes/status", "patch"),
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

/// The texts of [`FILES`].
fn manifests() -> anyhow::Result<Vec<(&'static str, String)>> {
    FILES
        .iter()
        .map(|file| Ok((*file, deploy(file)?)))
        .collect()
}

#[test]
fn the_manifests_grant_each_service_account_exactly_what_it_uses_and_no_wildcard()
-> anyhow::Result<()> {
    let texts = manifests()?;
    let manifests: Vec<(&str, &str)> = texts.iter().map(|(f, t)| (*f, t.as_str())).collect();
    // Every subject is a ServiceAccount of the table: a binding to a third account is caught.
    let accounts = rbac::bound_accounts(&manifests)?;
    ensure!(
        accounts == BTreeSet::from([CONTROLLER.to_owned(), VIF_HANDLER.to_owned()]),
        "the manifests bind {accounts:?}, the table {CONTROLLER} and {VIF_HANDLER}"
    );
    let mut wrong = Vec::new();
    for account in &accounts {
        let granted = rbac::granted(&manifests, account)?;
        let expected = EXPECTED.iter().filter(|(a, ..)| a == account).map(
            |(_, scope, group, resource, verb)| match *scope {
                "cluster" => Grant::cluster(group, resource, verb),
                namespace => Grant::in_namespace(namespace, group, resource, verb),
            },
        );
        if let Err(mismatch) = rbac::assert_exact(&granted, expected) {
            wrong.push(format!("{account}: {mismatch}"));
        }
    }
    ensure!(wrong.is_empty(), "{}", wrong.join("\n"));
    Ok(())
}
