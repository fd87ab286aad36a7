//! What the handler and the CNI side refuse: a NetworkAttachmentDefinition naming a network the
//! agent does not serve, and a record naming one.

use super::*;

/// A NetworkAttachmentDefinition naming a network the agent does not serve: the handler's
/// `VifAllocationFailed` Warning Event names the attachment and the network, the pod's record
/// carries the failure, and the runtime's ADD fails at once with code 7 naming them; the pod
/// holds no VIF (its main VIF, allocated first, is released again) and nothing is plugged.
pub(super) async fn an_unknown_network_is_named_by_the_handler_and_the_add(
    client: &kube::Client,
    vifs: &VifClient,
    agent: &Agent,
    netns: &str,
    main_conf: &Value,
) -> anyhow::Result<()> {
    let nads: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), "default", &attachment_resource());
    let config = json!({"cniVersion": "1.1.0", "name": "ghost", "type": "nimbess-cni"});
    let ghost: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "k8s.cni.cncf.io/v1", "kind": "NetworkAttachmentDefinition",
        "metadata": {"name": "ghost"}, "spec": {"config": config.to_string()},
    }))?;
    nads.create(&PostParams::default(), &ghost).await?;
    let pods: Api<KubePod> = Api::namespaced(client.clone(), "default");
    let pod: KubePod = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "lost", "annotations": {"k8s.v1.cni.cncf.io/networks": "ghost"}},
        "spec": {"nodeName": "node-1", "containers": [{"name": "app", "image": "app"}]},
    }))?;
    let uid = pods
        .create(&PostParams::default(), &pod)
        .await?
        .metadata
        .uid
        .context("uid")?;
    let events: Api<KubeEvent> = Api::namespaced(client.clone(), "default");
    let note = wait_for("the VifAllocationFailed Event", || async {
        event_note(&events, "VifAllocationFailed", "lost").await
    })
    .await?;
    let expected = "annotation k8s.v1.cni.cncf.io/networks: NetworkAttachmentDefinition default/ghost: network \"ghost\" is not served by the nimbess agent";
    ensure!(note == expected, "{note}");
    let record = wait_for("the failure in lost's record", || async {
        Ok(record_of(&pods.get("lost").await?)?.filter(|r| r.failure.is_some()))
    })
    .await?;
    ensure!(
        record.vifs.is_empty()
            && record
                .failure
                .as_ref()
                .is_some_and(|f| f.kind == FailureKind::Invalid && f.message == expected),
        "{record:?}"
    );
    ensure!(
        vifs.list(Some(&uid)).await?.is_empty(),
        "the main VIF allocated before the refusal is released"
    );
    let args = format!("K8S_POD_NAMESPACE=default;K8S_POD_NAME=lost;K8S_POD_UID={uid}");
    let (code, error) = cni("ADD", "c-lost", netns, "eth0", &args, main_conf).await;
    ensure!(
        code == 1
            && error["code"] == 7
            && error["msg"].as_str().is_some_and(|m| m.contains(expected)),
        "{error}"
    );
    ensure!(
        agent
            .ports()
            .await
            .iter()
            .all(|p| p.container_id != "c-lost"),
        "nothing plugged for the pod"
    );
    pods.delete("lost", &DeleteParams::default()).await?;
    wait_for("lost gone", || async {
        Ok(pods.get_opt("lost").await?.is_none().then_some(()))
    })
    .await?;
    nads.delete("ghost", &DeleteParams::default()).await?;
    Ok(())
}

/// A record naming a network the agent does not serve (written here, no handler running): the
/// ADD plugs `eth1` (a VIF the agent holds), fails on `eth2` with code 7 naming the network,
/// and unplugs `eth1` again: nothing half-plugged. The reservation stays for the handler.
pub(super) async fn a_failing_interface_unplugs_the_others(
    pods: &Api<KubePod>,
    vifs: &VifClient,
    agent: &Agent,
    netns: &str,
    main_conf: &Value,
    net_a: &str,
) -> anyhow::Result<()> {
    let pod: KubePod = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "stale"},
        "spec": {"nodeName": "node-1", "containers": [{"name": "app", "image": "app"}]},
    }))?;
    let uid = pods
        .create(&PostParams::default(), &pod)
        .await?
        .metadata
        .uid
        .context("uid")?;
    let held = nimbess_client::vif::VifRef {
        pod_uid: uid.clone(),
        key: "network/default/net-a/0".into(),
    };
    let view = vifs
        .allocate(&nimbess_client::vif::VifClaim {
            vif: held.clone(),
            network: net_a.to_owned(),
            pod_namespace: "default".into(),
            pod_name: "stale".into(),
        })
        .await?;
    let vif = |key: &str, ifname: &str, network: &str, address: &str| {
        json!({"key": key, "ifname": ifname, "driver": "npwg_multiple_interfaces",
               "target": {"kind": "network", "name": network}, "vnic_type": "normal",
               "network": network, "addresses": [address], "mac": "",
               "backend_id": format!("{uid}/{key}"), "active": true})
    };
    let record = json!({"version": 1, "vifs": [
        vif(&held.key, "eth1", net_a, &view.entry.address.to_string()),
        vif("network/default/gone/0", "eth2", "gone", "10.9.9.2/24"),
    ]});
    let patch = json!({"metadata": {"annotations": {VIF_ANNOTATION: record.to_string()}}});
    pods.patch(
        "stale",
        &kube::api::PatchParams::default(),
        &kube::api::Patch::Merge(&patch),
    )
    .await?;
    let args = format!("K8S_POD_NAMESPACE=default;K8S_POD_NAME=stale;K8S_POD_UID={uid}");
    let (code, error) = cni("ADD", "c-stale", netns, "eth0", &args, main_conf).await;
    ensure!(
        code == 1
            && error["code"] == 7
            && error["msg"]
                .as_str()
                .is_some_and(|m| m.contains("eth2") && m.contains("\"gone\"")),
        "{error}"
    );
    ensure!(
        agent
            .ports()
            .await
            .iter()
            .all(|p| p.container_id != "c-stale"),
        "eth1 was unplugged again"
    );
    ensure!(
        vifs.get(&held).await?.is_some_and(|v| v.plugged.is_none()),
        "the reservation stays, unplugged"
    );
    ensure!(vifs.release(&held).await?, "released");
    pods.delete("stale", &DeleteParams::default()).await?;
    Ok(())
}
