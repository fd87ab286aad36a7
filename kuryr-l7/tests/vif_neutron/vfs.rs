//! SR-IOV VFs counted on the pod's Node, with the built handler running against
//! `test-apiserver` (`[sriov] physnet_resource_mappings = physnet2:sriov_a`): a node advertising
//! one VF gives it to the first pod; the second gets a `NoFreeVf` Warning Event and a record
//! carrying the failure, which the CNI side answers with code 11, and nothing is allocated for
//! it; once the first pod is deleted the second gets the VF.

use k8s_openapi::api::core::v1::Node as KubeNode;
use kube::api::{Patch, PatchParams};
use nephrite_vif::Failure;
use nimbess_agent::cni::ErrorCode;
use nimbess_agent::vif_plug::{PodRef, wait_for_record};

use super::processes::wait_for;
use super::*;

fn vf_pod(name: &str) -> anyhow::Result<KubePod> {
    Ok(serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name},
        "spec": {"nodeName": "node-1", "containers": [{"name": "app", "image": "app",
            "resources": {"requests": {"intel.com/sriov_a": "1"}, "limits": {"intel.com/sriov_a": "1"}}}]},
    }))?)
}

async fn record(pods: &Api<KubePod>, name: &str) -> anyhow::Result<Option<VifRecord>> {
    Ok(pods
        .get(name)
        .await?
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(VIF_ANNOTATION))
        .map(|v| VifRecord::parse(v))
        .transpose()?)
}

pub(super) async fn a_pod_short_of_vfs_gets_them_once_another_releases_them(
    env: &Env,
    server: &TestApiServer,
) -> anyhow::Result<()> {
    let client = server.client()?;
    let nodes: Api<KubeNode> = Api::all(client.clone());
    let node: KubeNode = serde_json::from_value(
        json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "node-1"}}),
    )?;
    nodes.create(&PostParams::default(), &node).await?;
    let status = json!({"status": {"allocatable": {"intel.com/sriov_a": "1", "cpu": "4"}}});
    nodes
        .patch_status("node-1", &PatchParams::default(), &Patch::Merge(&status))
        .await?;

    let pods: Api<KubePod> = Api::namespaced(client.clone(), "default");
    let first = pods
        .create(&PostParams::default(), &vf_pod("vf-a")?)
        .await?;
    let first_uid = first.metadata.uid.context("uid")?;
    let first_record = wait_for("vf-a's VF", || async {
        Ok(record(&pods, "vf-a")
            .await?
            .filter(|r| r.vifs.len() == 2 && r.failure.is_none()))
    })
    .await?;
    let vf = &first_record.vifs[1];
    let port = env
        .vifs
        .port(&vf.backend_id)
        .await?
        .context("vf-a's VF port")?;
    ensure!(
        vf.driver == Driver::Sriov
            && vf.target
                == Target::Physnet {
                    physnet: "physnet2".into()
                }
            && port.vnic_type == "direct"
            && port.fixed_ips[0].subnet_id == env.subnet_b,
        "a direct port on physnet2's subnet: {port:?}"
    );

    // The node's only VF is taken: the second pod is refused, named, and holds nothing.
    let second = pods
        .create(&PostParams::default(), &vf_pod("vf-b")?)
        .await?;
    let second_uid = second.metadata.uid.context("uid")?;
    let events: Api<KubeEvent> = Api::namespaced(client.clone(), "default");
    let note = wait_for("the NoFreeVf Event", || async {
        Ok(events
            .list(&ListParams::default())
            .await?
            .items
            .into_iter()
            .find(|e| {
                e.reason.as_deref() == Some("NoFreeVf")
                    && e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some("vf-b")
            })
            .and_then(|e| e.note))
    })
    .await?;
    let expected = "node node-1 has 0 free VFs on physnet physnet2 (intel.com/sriov_a: 1 allocatable, 1 held by its pods); the pod wants 1 more";
    ensure!(note == expected, "{note}");
    let refused = wait_for("vf-b's record of the failure", || async {
        Ok(record(&pods, "vf-b").await?.filter(|r| r.failure.is_some()))
    })
    .await?;
    ensure!(
        refused.vifs.is_empty()
            && refused.failure
                == Some(Failure {
                    kind: FailureKind::Unavailable,
                    message: expected.to_owned(),
                }),
        "{refused:?}"
    );
    ensure!(
        env.vifs
            .ports(&[("device_id", &second_uid)])
            .await?
            .is_empty(),
        "nothing allocated for vf-b"
    );

    // The CNI side's ADD: code 11 (try again later) with the handler's words, at once.
    let pod_ref = PodRef {
        namespace: "default".into(),
        name: "vf-b".into(),
        uid: Some(second_uid.clone()),
    };
    match wait_for_record(&client, &pod_ref, "eth0", "pods", Duration::from_secs(60)).await {
        Err(e) => ensure!(
            e.code == ErrorCode::TryAgainLater && e.msg.contains(expected),
            "{}: {}",
            e.code.number(),
            e.msg
        ),
        Ok(plugs) => bail!("ADD would plug {plugs:?}"),
    }

    // vf-a goes: its VF is released, and vf-b gets it.
    pods.delete("vf-a", &DeleteParams::default()).await?;
    wait_for("vf-a gone", || async {
        Ok(pods.get_opt("vf-a").await?.is_none().then_some(()))
    })
    .await?;
    ensure!(
        env.vifs
            .ports(&[("device_id", &first_uid)])
            .await?
            .is_empty(),
        "vf-a's ports released"
    );
    let granted = wait_for("vf-b's VF", || async {
        Ok(record(&pods, "vf-b")
            .await?
            .filter(|r| r.vifs.len() == 2 && r.failure.is_none()))
    })
    .await?;
    let port = env
        .vifs
        .port(&granted.vifs[1].backend_id)
        .await?
        .context("vf-b's VF port")?;
    ensure!(
        port.vnic_type == "direct" && port.device_id == second_uid,
        "{port:?}"
    );
    pods.delete("vf-b", &DeleteParams::default()).await?;
    wait_for("vf-b gone", || async {
        Ok(pods.get_opt("vf-b").await?.is_none().then_some(()))
    })
    .await?;
    ensure!(
        env.vifs
            .ports(&[("device_id", &second_uid)])
            .await?
            .is_empty(),
        "vf-b's ports released"
    );
    Ok(())
}
