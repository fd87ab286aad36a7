//! SR-IOV VFs counted on the pod's Node, with the built handler running against
//! `test-apiserver` (`[sriov] physnet_resource_mappings = physnet2:sriov_a`): a node advertising
//! one VF gives it to the first pod; the second gets a `NoFreeVf` Warning Event and a record
//! carrying the failure, which the CNI side answers with code 11, and nothing is allocated for
//! it; once the first pod is deleted the second gets the VF. The same with `--source dir:PATH`,
//! the Node and the pods as files.

use k8s_openapi::api::core::v1::Node as KubeNode;
use kube::api::{Patch, PatchParams};
use nephrite_vif::Failure;
use nimbess_client::cni::ErrorCode;
use nimbess_cni::vif_plug::{PodRef, wait_for_record};

use super::processes::{handler_from, wait_for};
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
        event_note(&events, "NoFreeVf", "vf-b").await
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

/// A record file's record, once it satisfies `ready`.
fn record_file(path: &std::path::Path) -> anyhow::Result<Option<(String, VifRecord)>> {
    let Ok(text) = std::fs::read_to_string(path) else {
        return Ok(None);
    };
    let file: Value = serde_json::from_str(&text)?;
    let uid = file["uid"].as_str().unwrap_or_default().to_owned();
    Ok(Some((uid, serde_json::from_value(file["record"].clone())?)))
}

/// `--source dir:PATH` with a Node file advertising one VF and two pods on it, each in its own
/// file: the first gets the VF, the second's record file carries the failure and it holds no
/// port; the first pod's file removed, the second gets the VF.
pub(super) async fn the_directory_source_counts_vfs_on_its_nodes(env: &Env) -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let pods = dir.path().join("pods");
    std::fs::create_dir(&pods)?;
    let conf = dir.path().join("kuryr.conf");
    std::fs::write(
        &conf,
        format!(
            "[kubernetes]\nenabled_vif_drivers = sriov\n\n[neutron_defaults]\npod_subnet = {}\n\n[sriov]\nphysnet_resource_mappings = physnet2:sriov_a\ndefault_physnet_subnets = physnet2:{}\n\n[neutron]\nauth_type = noauth\nproject_id = {}\nendpoint_override = {}\n",
            env.pod_subnet, env.subnet_b, env.project, env.url
        ),
    )?;
    std::fs::write(
        pods.join("node.yaml"),
        "apiVersion: v1\nkind: Node\nmetadata: {name: node-1}\nstatus:\n  allocatable: {intel.com/sriov_a: \"1\", cpu: \"4\"}\n",
    )?;
    let pod = |name: &str| {
        format!(
            "apiVersion: v1\nkind: Pod\nmetadata: {{name: {name}, namespace: shop}}\nspec:\n  nodeName: node-1\n  containers:\n  - name: app\n    image: app\n    resources: {{limits: {{intel.com/sriov_a: \"1\"}}}}\n"
        )
    };
    // Files are read in name order: a.yaml's pod is looked at first.
    std::fs::write(pods.join("a.yaml"), pod("dir-vf-a"))?;
    std::fs::write(pods.join("b.yaml"), pod("dir-vf-b"))?;
    let (a_file, b_file) = (
        pods.join(".kuryr-vif/shop_dir-vf-a.json"),
        pods.join(".kuryr-vif/shop_dir-vf-b.json"),
    );
    let handler = handler_from(
        &dir.path().join("no-kubeconfig"),
        &conf,
        &format!("dir:{}", pods.display()),
    )?;
    let (a_uid, a) = wait_for("dir-vf-a's VF", || async {
        Ok(record_file(&a_file)?.filter(|(_, r)| r.vifs.len() == 2))
    })
    .await?;
    ensure!(
        a.vifs[1].target
            == Target::Physnet {
                physnet: "physnet2".into()
            },
        "{a:?}"
    );
    let (b_uid, refused) = wait_for("dir-vf-b's failure", || async {
        Ok(record_file(&b_file)?.filter(|(_, r)| r.failure.is_some()))
    })
    .await?;
    ensure!(
        refused.vifs.is_empty()
            && refused.failure.as_ref().is_some_and(|f| f.kind == FailureKind::Unavailable
                && f.message == "node node-1 has 0 free VFs on physnet physnet2 (intel.com/sriov_a: 1 allocatable, 1 held by its pods); the pod wants 1 more"),
        "{refused:?}"
    );
    ensure!(
        env.vifs.ports(&[("device_id", &b_uid)]).await?.is_empty(),
        "nothing allocated for dir-vf-b"
    );

    std::fs::remove_file(pods.join("a.yaml"))?;
    wait_for("dir-vf-b's VF", || async {
        Ok(record_file(&b_file)?.filter(|(_, r)| r.vifs.len() == 2 && r.failure.is_none()))
    })
    .await?;
    ensure!(!a_file.exists(), "dir-vf-a's record removed");
    ensure!(
        env.vifs.ports(&[("device_id", &a_uid)]).await?.is_empty(),
        "dir-vf-a's ports released"
    );
    std::fs::remove_file(pods.join("b.yaml"))?;
    wait_for("dir-vf-b's record removed", || async {
        Ok((!b_file.exists()).then_some(()))
    })
    .await?;
    ensure!(
        env.vifs.ports(&[("device_id", &b_uid)]).await?.is_empty(),
        "dir-vf-b's ports released"
    );
    drop(handler);
    Ok(())
}
