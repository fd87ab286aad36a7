//! kuryr-l7 on the real kube-apiserver (issue #35): each daemon runs as its manifests deploy
//! it, with only its ServiceAccount's token (TokenRequest) and the Roles and bindings of its
//! own `deploy/kubernetes/` YAML, so a verb missing from the manifests fails a scenario as it
//! would in a cluster; and the manifests grant no more than the daemons use (`rbac`).
//!
//! One server for the whole binary (`KubeApiServer::shared`, ~4 s, ~300 MB): each scenario
//! works in its own namespace. The controller scenarios run one after the other in one test,
//! since every controller watches every namespace and a leader writes status for all of them.
//! Without the server's binaries (`cargo xtask kube build`) the scenarios say so and skip;
//! under `CI=true` they fail.
//!
//! - `controller`: Ingress and Route to rules, status, Events; two replicas on one Lease; a
//!   right granted after start used without a change.
//! - `vif`: the VIF handler with the Nimbess backend on the agent's simulated data plane.
//! - `rbac`: the manifests' rights against the table of what each daemon uses.

#[path = "real_apiserver/cluster.rs"]
mod cluster;
#[path = "real_apiserver/controller.rs"]
mod controller;
#[path = "real_apiserver/rbac.rs"]
mod rbac;
#[path = "real_apiserver/vif.rs"]
mod vif;

use cluster::{Scenario, server};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_controller_serves_ingresses_and_routes_and_one_of_two_replicas_writes()
-> anyhow::Result<()> {
    let test = "the_controller_serves_ingresses_and_routes_and_one_of_two_replicas_writes";
    let Some(kube) = server(test) else {
        return Ok(());
    };
    let serve = Scenario::new(kube, "kl7-serve").await?;
    controller::ingress_and_route_become_rules_and_status(&serve).await?;
    let pair = Scenario::new(kube, "kl7-pair").await?;
    controller::two_replicas_one_writes_and_the_other_takes_over(&pair).await?;
    let late = Scenario::new(kube, "kl7-late").await?;
    controller::a_status_right_granted_late_is_used_without_a_change(&late).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_vif_handler_gives_npwg_pods_their_vifs_and_releases_them() -> anyhow::Result<()> {
    let Some(kube) = server("the_vif_handler_gives_npwg_pods_their_vifs_and_releases_them") else {
        return Ok(());
    };
    let scenario = Scenario::new(kube, "kl7-vif").await?;
    vif::npwg_pods_get_their_vifs_and_release_them(&scenario).await
}
