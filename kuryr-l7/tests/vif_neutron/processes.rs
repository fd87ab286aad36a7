//! The scenarios that run the built binary: against `test-apiserver` (killed and restarted,
//! bad annotations, NPWG networks, deletion held by the finalizer) and with `--source dir:PATH`.

use super::*;

pub(super) struct Daemon(Child);

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn handler_process(kubeconfig: &PathBuf, conf: &PathBuf) -> anyhow::Result<Daemon> {
    handler_from(kubeconfig, conf, "kube")
}

pub(super) fn handler_from(
    kubeconfig: &PathBuf,
    conf: &PathBuf,
    source: &str,
) -> anyhow::Result<Daemon> {
    Ok(Daemon(
        Command::new(BIN)
            .args(["vif-handler", "--source", source, "--backend", "neutron"])
            .arg("--config-file")
            .arg(conf)
            .args(["--activation-timeout", "1s"])
            .env("KUBECONFIG", kubeconfig)
            .env("RUST_LOG", "warn")
            .spawn()?,
    ))
}

pub(super) async fn wait_for<T, F>(what: &str, mut check: impl FnMut() -> F) -> anyhow::Result<T>
where
    F: std::future::Future<Output = anyhow::Result<Option<T>>>,
{
    for _ in 0..600 {
        if let Some(value) = check().await? {
            return Ok(value);
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    bail!("{what}: not within 60 s")
}

/// The binary killed (SIGKILL) as soon as a pod's first port exists, then restarted: the pod
/// ends with exactly the recorded ports. Killed again, the pod deleted meanwhile: the
/// finalizer holds the pod, and the restarted handler releases every port before letting go.
pub(super) async fn a_killed_handler_leaves_no_duplicate_or_leaked_port(
    env: &Env,
) -> anyhow::Result<()> {
    let server = TestApiServer::start().await?;
    let client = server.client()?;
    let dir = tempfile::tempdir()?;
    let kubeconfig = dir.path().join("kubeconfig");
    std::fs::write(&kubeconfig, server.kubeconfig())?;
    let conf = dir.path().join("kuryr.conf");
    std::fs::write(
        &conf,
        format!(
            "[kubernetes]\nenabled_vif_drivers = additional_subnets, npwg_multiple_interfaces, sriov\n\n[neutron_defaults]\npod_subnet = {}\n\n[sriov]\nphysnet_resource_mappings = physnet2:sriov_a\ndefault_physnet_subnets = physnet2:{}\n\n[neutron]\nauth_type = noauth\nproject_id = {}\nendpoint_override = {}\n",
            env.pod_subnet, env.subnet_b, env.project, env.url
        ),
    )?;
    let crds: Api<DynamicObject> = Api::all_with(
        client.clone(),
        &ApiResource::from_gvk_with_plural(
            &GroupVersionKind::gvk("apiextensions.k8s.io", "v1", "CustomResourceDefinition"),
            "customresourcedefinitions",
        ),
    );
    crds.create(&PostParams::default(), &serde_json::from_value(nad_crd())?)
        .await?;
    let nads: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), "default", &attachment_resource());
    let blue: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "k8s.cni.cncf.io/v1", "kind": "NetworkAttachmentDefinition",
        "metadata": {"name": "blue", "annotations": {
            "openstack.org/kuryr-config": format!(r#"{{"subnetId": "{}"}}"#, env.subnet_b)}},
        "spec": {"config": "{}"},
    }))?;
    nads.create(&PostParams::default(), &blue).await?;
    let pods: Api<KubePod> = Api::namespaced(client, "default");
    let pod: KubePod = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "multi", "annotations": {
            ADDITIONAL_SUBNETS: format!(r#"["{}", "{}"]"#, env.subnet_a, env.subnet_b)}},
        "spec": {"nodeName": "node-1", "containers": [{"name": "app", "image": "app"}]},
    }))?;
    let created = pods.create(&PostParams::default(), &pod).await?;
    let uid = created.metadata.uid.clone().context("uid")?;
    let identity = PodIdentity {
        namespace: "default".into(),
        name: "multi".into(),
        uid: uid.clone(),
        node: Some("node-1".into()),
    };

    let first = handler_process(&kubeconfig, &conf)?;
    wait_for("a first port", || async {
        Ok((!env.vifs.ports(&[("device_id", &uid)]).await?.is_empty()).then_some(()))
    })
    .await?;
    drop(first); // SIGKILL

    let second = handler_process(&kubeconfig, &conf)?;
    let record = wait_for("the pod's record with three VIFs", || async {
        let pod = pods.get("multi").await?;
        Ok(pod
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(VIF_ANNOTATION))
            .map(|v| VifRecord::parse(v))
            .transpose()?
            .filter(|r| r.vifs.len() == 3))
    })
    .await?;
    let pod = pods.get("multi").await?;
    ensure!(
        pod.metadata.finalizers.as_deref() == Some(&["kuryr.openstack.org/vif".to_owned()][..]),
        "the finalizer is on the pod: {:?}",
        pod.metadata.finalizers
    );
    let recorded: BTreeSet<String> = record.vifs.iter().map(|v| v.backend_id.clone()).collect();
    let (by_device, by_tag) = held(env, &identity).await?;
    ensure!(
        by_device == recorded && by_tag == recorded,
        "exactly the recorded ports: {by_device:?} vs {recorded:?}"
    );
    ensure!(
        record.vifs[1].target
            == Target::Subnet {
                id: env.subnet_a.clone()
            }
    );

    // The seed's own spec-ports example is not JSON: a Warning Event names the annotation and
    // the parse error, and nothing is allocated.
    let broken: KubePod = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "broken", "annotations": {
            SPEC_PORTS: "[\n  \"id_of_direct_precreated_port\".\n  \"id_of_normal_precreated_port\"\n]"}},
        "spec": {"nodeName": "node-1", "containers": [{"name": "app", "image": "app"}]},
    }))?;
    let broken_uid = pods
        .create(&PostParams::default(), &broken)
        .await?
        .metadata
        .uid
        .context("uid")?;
    let events: Api<KubeEvent> = Api::namespaced(server.client()?, "default");
    let note = wait_for("the VifRequestInvalid Event", || async {
        event_note(&events, "VifRequestInvalid", "broken").await
    })
    .await?;
    ensure!(
        note == "annotation spec-ports: not a JSON list of ids: expected `,` or `]` at line 2 column 33",
        "{note}"
    );
    ensure!(
        env.vifs
            .ports(&[("device_id", &broken_uid)])
            .await?
            .is_empty(),
        "nothing allocated for a pod whose request is wrong"
    );
    // An NPWG network through its NetworkAttachmentDefinition, on the interface asked for.
    let npwg: KubePod = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "npwg", "annotations": {"k8s.v1.cni.cncf.io/networks": "blue@net1"}},
        "spec": {"nodeName": "node-1", "containers": [{"name": "app", "image": "app"}]},
    }))?;
    pods.create(&PostParams::default(), &npwg).await?;
    let npwg_record = wait_for("the npwg pod's record", || async {
        let pod = pods.get("npwg").await?;
        Ok(pod
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(VIF_ANNOTATION))
            .map(|v| VifRecord::parse(v))
            .transpose()?
            .filter(|r| r.vifs.len() == 2))
    })
    .await?;
    let net1 = npwg_record.vif("net1").context("net1")?;
    let port = env
        .vifs
        .port(&net1.backend_id)
        .await?
        .context("net1's port")?;
    ensure!(
        net1.driver == Driver::NpwgMultipleInterfaces
            && port.fixed_ips[0].subnet_id == env.subnet_b,
        "net1 on blue's subnet: {port:?}"
    );
    pods.delete("npwg", &DeleteParams::default()).await?;
    pods.delete("broken", &DeleteParams::default()).await?;
    wait_for("the npwg pod gone", || async {
        Ok(pods.get_opt("npwg").await?.is_none().then_some(()))
    })
    .await?;
    ensure!(
        env.vifs.port(&net1.backend_id).await?.is_none(),
        "the npwg pod's port released"
    );
    wait_for("the broken pod gone", || async {
        Ok(pods.get_opt("broken").await?.is_none().then_some(()))
    })
    .await?;
    super::vfs::a_pod_short_of_vfs_gets_them_once_another_releases_them(env, &server)
        .await
        .context("SR-IOV VFs counted on the node")?;
    drop(second);

    // Deleted while no handler runs: the finalizer keeps the pod, the ports stay.
    pods.delete("multi", &DeleteParams::default()).await?;
    let held_pod = pods.get("multi").await?;
    ensure!(
        held_pod.metadata.deletion_timestamp.is_some(),
        "the pod is held by the finalizer"
    );
    let third = handler_process(&kubeconfig, &conf)?;
    wait_for("the pod gone", || async {
        Ok(pods.get_opt("multi").await?.is_none().then_some(()))
    })
    .await?;
    let (by_device, by_tag) = held(env, &identity).await?;
    ensure!(
        by_device.is_empty() && by_tag.is_empty(),
        "no port left with the pod's tag: {by_tag:?}"
    );
    drop(third);
    server.shutdown().await?;
    Ok(())
}

/// The NetworkAttachmentDefinition CRD (as the NPWG publishes it, schema reduced).
fn nad_crd() -> Value {
    json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "network-attachment-definitions.k8s.cni.cncf.io"},
        "spec": {
            "group": "k8s.cni.cncf.io", "scope": "Namespaced",
            "names": {"plural": "network-attachment-definitions",
                      "singular": "network-attachment-definition",
                      "kind": "NetworkAttachmentDefinition", "shortNames": ["net-attach-def"]},
            "versions": [{"name": "v1", "served": true, "storage": true, "schema": {"openAPIV3Schema": {
                "type": "object", "properties": {"spec": {"type": "object",
                    "properties": {"config": {"type": "string"}}}}}}}],
        },
    })
}

/// `--source dir:PATH`: a pod file gets its record file and its ports; removing the pod file
/// releases every port and then the record.
pub(super) async fn the_directory_source_records_in_files_and_releases_removed_pods(
    env: &Env,
) -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let pods = dir.path().join("pods");
    std::fs::create_dir(&pods)?;
    let conf = dir.path().join("kuryr.conf");
    std::fs::write(
        &conf,
        format!(
            "[kubernetes]\nenabled_vif_drivers = additional_subnets\n\n[neutron_defaults]\npod_subnet = {}\n\n[neutron]\nauth_type = noauth\nproject_id = {}\nendpoint_override = {}\n",
            env.pod_subnet, env.project, env.url
        ),
    )?;
    let pod_file = pods.join("files.yaml");
    std::fs::write(
        &pod_file,
        format!(
            "apiVersion: v1\nkind: Pod\nmetadata:\n  name: files\n  namespace: shop\n  annotations:\n    openstack.org/kuryr-additional-subnets: '[\"{}\"]'\nspec:\n  containers:\n  - {{name: app, image: app}}\n",
            env.subnet_a
        ),
    )?;
    let record_file = pods.join(".kuryr-vif/shop_files.json");
    let handler = handler_from(
        &dir.path().join("no-kubeconfig"),
        &conf,
        &format!("dir:{}", pods.display()),
    )?;
    let record = wait_for("the record file", || async {
        let Ok(text) = std::fs::read_to_string(&record_file) else {
            return Ok(None);
        };
        let file: Value = serde_json::from_str(&text)?;
        let record: VifRecord = serde_json::from_value(file["record"].clone())?;
        Ok((record.vifs.len() == 2).then_some(record))
    })
    .await?;
    let identity = PodIdentity {
        namespace: "shop".into(),
        name: "files".into(),
        uid: "dir-shop-files".into(),
        node: None,
    };
    let recorded: BTreeSet<String> = record.vifs.iter().map(|v| v.backend_id.clone()).collect();
    let (by_device, by_tag) = held(env, &identity).await?;
    ensure!(
        by_device == recorded && by_tag == recorded,
        "the recorded ports: {by_device:?}"
    );
    let port = env
        .vifs
        .port(&record.vifs[1].backend_id)
        .await?
        .context("eth1")?;
    ensure!(
        port.fixed_ips[0].subnet_id == env.subnet_a,
        "eth1 on subnet a"
    );

    std::fs::remove_file(&pod_file)?;
    wait_for("the record file removed", || async {
        Ok((!record_file.exists()).then_some(()))
    })
    .await?;
    let (by_device, by_tag) = held(env, &identity).await?;
    ensure!(by_device.is_empty() && by_tag.is_empty(), "released");
    drop(handler);
    Ok(())
}
