//! `kuryr-l7 vif-handler --source kube --backend nimbess` on the real API server, with only
//! its ServiceAccount's token from `vif-handler.yaml`: a Nimbess agent on the simulated data
//! plane (in this process, on a Unix socket; no root, no OpenStack) makes the VIFs. A pod of
//! this node naming two NetworkAttachmentDefinitions (NPWG annotation) gets the finalizer and a
//! record of three VIFs the agent holds; a pod of another node is left alone (the field-selected
//! watch); a pod with a broken annotation gets a Warning Event naming it; deleting the pod
//! releases every VIF and lifts the finalizer.

use std::collections::BTreeSet;
use std::process::Command;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, ensure};
use k8s_openapi::api::core::v1::Pod as KubePod;
use kube::api::{Api, DeleteParams};
use nephrite_kuryr_l7::vif::kube::FINALIZER;
use nephrite_runtime::{DaemonIdentity, Endpoint, GrpcServer};
use nephrite_vif::{VIF_ANNOTATION, VifRecord};
use nimbess_agent::agent::Agent;
use nimbess_agent::config::AgentConfig;
use nimbess_agent::driver::Driver;
use nimbess_agent::driver::sim::SimDriver;
use nimbess_agent::state::StateStore;
use nimbess_client::VifClient;
use serde_json::json;

use super::cluster::{BIN, Daemon, Scenario, credentials, eventually, log_text};

/// The handler's ServiceAccount, as `vif-handler.yaml` defines it.
const ACCOUNT: &str = "kuryr-l7/kuryr-vif-handler";
/// The node this handler serves.
const NODE: &str = "node-real-1";

/// The NetworkAttachmentDefinition CRD, as Multus ships it (the part the handler reads).
const NAD_CRD: &str = "apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: network-attachment-definitions.k8s.cni.cncf.io}
spec:
  group: k8s.cni.cncf.io
  scope: Namespaced
  names: {plural: network-attachment-definitions, singular: network-attachment-definition, kind: NetworkAttachmentDefinition, shortNames: [net-attach-def]}
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            properties:
              config: {type: string}
";

fn record_of(pod: &KubePod) -> anyhow::Result<Option<VifRecord>> {
    Ok(pod
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(VIF_ANNOTATION))
        .map(|v| VifRecord::parse(v))
        .transpose()?)
}

fn has_finalizer(pod: &KubePod) -> bool {
    pod.metadata
        .finalizers
        .iter()
        .flatten()
        .any(|f| f == FINALIZER)
}

fn pod(name: &str, node: &str, networks: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\n  annotations: {{k8s.v1.cni.cncf.io/networks: '{networks}'}}\nspec:\n  nodeName: {node}\n  containers: [{{name: app, image: registry.example/app:1}}]\n"
    )
}

/// Scenario 3: NPWG pods, NADs, the finalizer, Events and the field-selected watch.
pub async fn npwg_pods_get_their_vifs_and_release_them(scenario: &Scenario) -> anyhow::Result<()> {
    let ns = scenario.namespace.as_str();
    // kuryr-l7.yaml holds the namespace the handler's manifest lives in.
    let creds = credentials(
        scenario.kube,
        &["kuryr-l7.yaml", "vif-handler.yaml"],
        ACCOUNT,
    )
    .await?;
    let kubeconfig = scenario.kubeconfig(&creds)?;
    let dir = scenario.dir.path();

    // The agent: three networks, the simulated data plane.
    let agent_config = dir.join("agent.yaml");
    std::fs::write(
        &agent_config,
        "networks:\n  - name: pods\n    subnet: 10.251.1.0/24\n  - name: blue\n    subnet: 10.251.2.0/24\n  - name: green\n    subnet: 10.251.3.0/24\n",
    )?;
    let config = AgentConfig::load(&agent_config)?;
    let agent = Arc::new(
        Agent::start(
            StateStore::open(&dir.join("state"))?,
            &config.networks,
            Driver::Sim(SimDriver::new()),
        )
        .await?,
    );
    let socket = dir.join("agent.sock");
    let server = nimbess_agent::grpc::add_services(
        GrpcServer::new(DaemonIdentity::new("nimbess-agent", "test")).handle_signals(false),
        Arc::clone(&agent),
    )
    .bind(&Endpoint::unix(&socket))
    .await?;
    let stop = server.shutdown_handle();
    let serving = tokio::spawn(server.run());
    let vifs = VifClient::new(&socket);

    // The NAD CRD and two NADs naming the agent's networks.
    scenario.apply_crds(NAD_CRD).await?;
    for (nad, network) in [("net-a", "blue"), ("net-b", "green")] {
        let config = json!({"cniVersion": "1.1.0", "name": network, "type": "nimbess-cni"});
        scenario
            .apply(&format!(
                "apiVersion: k8s.cni.cncf.io/v1\nkind: NetworkAttachmentDefinition\nmetadata: {{name: {nad}}}\nspec: {{config: '{config}'}}\n"
            ))
            .await?;
    }
    scenario.apply(&pod("multi", NODE, "net-a, net-b")).await?;
    scenario
        .apply(&pod("elsewhere", "node-real-2", "net-a"))
        .await?;

    let conf = dir.join("kuryr.conf");
    std::fs::write(
        &conf,
        "[kubernetes]\nenabled_vif_drivers = npwg_multiple_interfaces\n",
    )?;
    let log = scenario.log("vif-handler");
    let mut command = Command::new(BIN);
    command
        .args(["vif-handler", "--source", "kube", "--backend", "nimbess"])
        .arg("--config-file")
        .arg(&conf)
        .arg("--agent-socket")
        .arg(&socket)
        .args(["--pod-network", "pods", "--node-name", NODE])
        .args(["--identity", "vif-real-1"])
        .env("KUBECONFIG", &kubeconfig)
        .env("RUST_LOG", "info");
    let handler = Daemon::spawn(command, &log)?;

    let pods: Api<KubePod> = Api::namespaced(scenario.admin.clone(), ns);
    let (record, uid) = eventually(
        "the pod's record with three VIFs",
        Duration::from_secs(30),
        async || {
            let pod = pods.get("multi").await?;
            let uid = pod.metadata.uid.clone().context("uid")?;
            Ok(record_of(&pod)?
                .filter(|r| r.vifs.len() == 3 && has_finalizer(&pod))
                .map(|r| (r, uid)))
        },
    )
    .await
    .with_context(|| log_text(&log))?;
    let recorded: BTreeSet<(String, String)> = record
        .vifs
        .iter()
        .map(|v| (v.ifname.clone(), v.network.clone()))
        .collect();
    let expected: BTreeSet<(String, String)> =
        [("eth0", "pods"), ("eth1", "blue"), ("eth2", "green")]
            .into_iter()
            .map(|(i, n)| (i.to_owned(), n.to_owned()))
            .collect();
    ensure!(recorded == expected, "the record's VIFs: {recorded:?}");
    let held: BTreeSet<String> = vifs
        .list(Some(&uid))
        .await?
        .into_iter()
        .map(|v| v.entry.vif.key)
        .collect();
    let recorded_keys: BTreeSet<String> = record.vifs.iter().map(|v| v.key.clone()).collect();
    ensure!(
        held == recorded_keys,
        "the agent holds exactly the recorded VIFs: {held:?} vs {recorded_keys:?}"
    );
    // Another node's pod: not this handler's (its watch is field-selected on spec.nodeName).
    let other = pods.get("elsewhere").await?;
    ensure!(
        record_of(&other)?.is_none() && !has_finalizer(&other),
        "the pod of node-real-2 was touched: {:?}",
        other.metadata
    );

    // A broken networks annotation: a Warning Event naming it, nothing allocated.
    scenario.apply(&pod("broken", NODE, "[{\"name\": ")).await?;
    let note = eventually(
        "a VifRequestInvalid Event",
        Duration::from_secs(20),
        async || {
            Ok(scenario.events().await?.iter().find_map(|e| {
                (e["reason"] == "VifRequestInvalid"
                    && e["type"] == "Warning"
                    && e["regarding"]["name"] == "broken"
                    && e["reportingInstance"] == "vif-real-1")
                    .then(|| e["note"].as_str().unwrap_or_default().to_owned())
            }))
        },
    )
    .await
    .with_context(|| log_text(&log))?;
    ensure!(
        note.contains("k8s.v1.cni.cncf.io/networks"),
        "the Event names the annotation: {note}"
    );

    // Deleting the pod: every VIF released, the finalizer lifted. With no kubelet here the
    // pod then stays Terminating (a node's pod is the kubelet's to remove): force it.
    pods.delete("multi", &DeleteParams::default()).await?;
    eventually(
        "the VIFs released and the finalizer lifted",
        Duration::from_secs(30),
        async || {
            let released = vifs.list(Some(&uid)).await?.is_empty();
            let lifted = pods
                .get_opt("multi")
                .await?
                .is_none_or(|p| !has_finalizer(&p));
            Ok((released && lifted).then_some(()))
        },
    )
    .await
    .with_context(|| log_text(&log))?;
    pods.delete(
        "multi",
        &DeleteParams {
            grace_period_seconds: Some(0),
            ..DeleteParams::default()
        },
    )
    .await
    .ok();
    eventually("the pod gone", Duration::from_secs(20), async || {
        Ok(pods.get_opt("multi").await?.is_none().then_some(()))
    })
    .await?;
    let text = log_text(&log);
    ensure!(
        !text.contains("forbidden"),
        "the handler was refused something:\n{text}"
    );
    drop(handler);
    stop.trigger();
    let _ = serving.await;
    Ok(())
}
