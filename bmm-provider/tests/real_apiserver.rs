//! bmm-provider on the real kube-apiserver (issue #35): each role's binary runs as its own
//! `deploy/` manifest deploys it — the manifest's ServiceAccount, Roles and bindings applied,
//! a TokenRequest token for that account, the Deployment's arguments and environment — against
//! bmm-sim, so a verb our RBAC lacks fails the scenario as it would fail in a cluster.
//!
//! The in-memory API server of the other tests is our reading of the API; kube-apiserver
//! brings OpenAPI validation of the CRDs, RBAC, and no garbage collector or namespace
//! controller (no kube-controller-manager runs), so each scenario deletes what it created and
//! checks that the finalizers let it go. One server serves the whole binary
//! (`KubeApiServer::shared`), each scenario in a namespace of its own; the two scenarios that
//! create Nodes take turns ([`setup::NODES`]) because Nodes are cluster-scoped and the CCM acts
//! on every Node it sees. `rbac` checks, without a server, that each manifest grants exactly
//! the table of what its role uses.

mod support;

#[path = "real_apiserver/ccm.rs"]
mod ccm;
#[path = "real_apiserver/daemon.rs"]
mod daemon;
#[path = "real_apiserver/machine_api.rs"]
mod machine_api;
#[path = "real_apiserver/rbac.rs"]
mod rbac;
#[path = "real_apiserver/serve.rs"]
mod serve;
#[path = "real_apiserver/setup.rs"]
mod setup;
