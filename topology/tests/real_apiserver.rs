//! ntc's Porch backend on the real kube-apiserver (upstream kube-apiserver + etcd, one server
//! shared by this binary's tests, each scenario in its own namespace).
//!
//! The in-memory API server (`porch_backend.rs`) is our reading of the API; here the CRDs are
//! applied as CRDs (ours from `deploy/crds.yaml`, Porch's and Nephio's from the fixtures), so
//! schemas prune and validate, server-side apply and RBAC are the real ones, and there is no
//! garbage collector (that lives in kube-controller-manager). ntc runs as its binary with only
//! the token of the ServiceAccount its `deploy/kubernetes.yaml` defines: a verb missing from
//! its ClusterRole fails the scenario, and the least-privilege test holds the ClusterRole to
//! exactly the table of what ntc does.

mod real_apiserver {
    pub mod cluster;
    pub mod election;
    pub mod ntc;
}

use anyhow::{Context as _, bail, ensure};
use kube::api::{DeleteParams, DynamicObject, PostParams};
use nephrite_ntc::porch::resources;
use nephrite_test_services::rbac::{self, Grant};
use real_apiserver::cluster::{
    Porch, api, apply, crate_file, eventually, example_namespace, example_objects, install_crds,
    names, server,
};
use real_apiserver::ntc::{ACCOUNT, LEASE_NAMESPACE, MANIFEST, Ntc};
use serde_json::{Value, json};

/// What ntc does to each resource, and so exactly what its ClusterRole grants:
/// (API group, resource, verbs).
const NTC_ACCESS: &[(&str, &str, &[&str])] = &[
    // The controller's watch; the finalizer is written with a merge patch.
    (
        "topology.nephio.org",
        "nftopologies",
        &["list", "watch", "patch"],
    ),
    ("topology.nephio.org", "nftopologies/status", &["patch"]),
    // Read for every plan, watched to replan.
    ("topology.nephio.org", "nfclasses", &["list", "watch"]),
    ("infra.nephio.org", "workloadclusters", &["list", "watch"]),
    // Read by name, written with server-side apply (creating needs `create` besides `patch`)
    // or a merge patch, listed and deleted when the topology goes.
    (
        "topology.nephio.org",
        "nfdeployedtopologies",
        &["get", "list", "create", "patch", "delete"],
    ),
    // Listed by label, applied, deleted when no longer planned; watched to reconcile.
    (
        "config.porch.kpt.dev",
        "packagevariantsets",
        &["list", "watch", "create", "patch", "delete"],
    ),
    (
        "req.nephio.org",
        "capacities",
        &["list", "create", "patch", "delete"],
    ),
    // Watched to follow publication; gates written with a merge patch.
    (
        "porch.kpt.dev",
        "packagerevisions",
        &["list", "watch", "patch"],
    ),
];

/// Leader election, in the Lease's namespace only: read the Lease, create it, renew it and
/// take it over (an update at the read `resourceVersion`).
const LEASE_VERBS: &[&str] = &["get", "create", "update"];

#[test]
fn the_cluster_role_grants_exactly_what_ntc_does_and_no_wildcard() -> anyhow::Result<()> {
    // Followed through the bindings whose subject is ntc's ServiceAccount, so a grant that
    // does not reach the account counts as missing.
    let granted = rbac::granted(&[(MANIFEST, &crate_file(MANIFEST)?)], ACCOUNT)?;
    let mut expected = rbac::cluster_wide(NTC_ACCESS);
    expected.extend(
        LEASE_VERBS.iter().map(|verb| {
            Grant::in_namespace(LEASE_NAMESPACE, "coordination.k8s.io", "leases", verb)
        }),
    );
    rbac::assert_exact(&granted, expected).with_context(|| format!("{MANIFEST} and {ACCOUNT}"))?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_replicas_only_the_lease_holder_writes_and_the_other_carries_the_rollout_on()
-> anyhow::Result<()> {
    let Some(kube) = server("two_replicas_only_the_lease_holder_writes") else {
        return Ok(());
    };
    install_crds(&kube.endpoint().client()?).await?;
    real_apiserver::election::two_replicas_one_writes_and_the_other_takes_over(kube).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_schema_keeps_a_deletion_policy_and_refuses_an_unknown_one() -> anyhow::Result<()> {
    let Some(kube) = server("the_schema_keeps_a_deletion_policy_and_refuses_an_unknown_one") else {
        return Ok(());
    };
    let admin = kube.endpoint().client()?;
    install_crds(&admin).await?;
    let topologies = api(&admin, "default", &resources::nf_topology());
    let mut topology = example_objects("topology.yaml", "default")?
        .pop()
        .context("the example topology")?
        .to_json();
    let dry_run = PostParams {
        dry_run: true,
        ..PostParams::default()
    };

    topology["spec"]["deletionPolicy"] = json!("orphan");
    let object: DynamicObject = serde_json::from_value(topology.clone())?;
    let stored = topologies.create(&dry_run, &object).await?;
    assert_eq!(
        stored.data["spec"]["deletionPolicy"], "orphan",
        "the schema must keep spec.deletionPolicy, not prune it"
    );

    topology["spec"]["deletionPolicy"] = json!("keep");
    let object: DynamicObject = serde_json::from_value(topology)?;
    match topologies.create(&dry_run, &object).await {
        Err(kube::Error::Api(status)) => ensure!(
            status.code == 422
                && status.message.contains("spec.deletionPolicy")
                && status.message.contains("\"delete\"")
                && status.message.contains("\"orphan\""),
            "expected 422 naming spec.deletionPolicy and its values, got {} {}",
            status.code,
            status.message
        ),
        other => bail!("a topology with deletionPolicy keep was not refused: {other:?}"),
    }
    Ok(())
}

/// The instance ids of the deployed topology `free5gc`, each with its sorted neighbours.
async fn deployed(
    admin: &kube::Client,
    ns: &str,
) -> anyhow::Result<Option<Vec<(String, Vec<String>)>>> {
    let Some(object) = api(admin, ns, &resources::nf_deployed_topology())
        .get_opt("free5gc")
        .await?
    else {
        return Ok(None);
    };
    let mut instances: Vec<(String, Vec<String>)> = object.data["spec"]["nfInstances"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|i| {
            let mut neighbours: Vec<String> = i["connectivities"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|c| c["neighborName"].as_str().unwrap_or_default().to_owned())
                .collect();
            neighbours.sort();
            (i["id"].as_str().unwrap_or_default().to_owned(), neighbours)
        })
        .collect();
    instances.sort();
    Ok(Some(instances))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ntc_with_its_own_token_writes_variants_gates_the_smf_and_cleans_up_after_the_topology()
-> anyhow::Result<()> {
    let Some(kube) = server("ntc_with_its_own_token_writes_variants_gates_the_smf") else {
        return Ok(());
    };
    let ns = "ntc-porch";
    let admin = kube.endpoint().client()?;
    install_crds(&admin).await?;
    example_namespace(&admin, ns).await?;
    let ntc = Ntc::start(kube, ns).await?;
    let topology = example_objects("topology.yaml", ns)?
        .pop()
        .context("the example topology")?;
    apply(&admin, &topology).await?;

    // A PackageVariantSet per instance, listing the matching clusters' repositories.
    let sets = api(&admin, ns, &resources::package_variant_set());
    let expected_sets = [
        "free5gc-amf",
        "free5gc-smf",
        "free5gc-upf-east",
        "free5gc-upf-west",
    ];
    eventually("four PackageVariantSets", || async {
        Ok((names(&sets).await? == expected_sets).then_some(()))
    })
    .await
    .with_context(|| format!("ntc's log (last 20 lines):\n{}", ntc.log_tail(20)))?;
    let upf_west = sets.get("free5gc-upf-west").await?;
    let repositories: Vec<&str> = upf_west.data["spec"]["targets"][0]["repositories"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|r| r["name"].as_str())
        .collect();
    assert_eq!(repositories, ["edge01", "edge02"]);
    assert_eq!(
        upf_west.data["spec"]["template"]["labels"]["nf-deployment-name"],
        "free5gc"
    );
    assert_eq!(
        upf_west.data["spec"]["template"]["deletionPolicy"],
        "delete"
    );
    let capacities = api(&admin, ns, &resources::capacity());
    eventually("a Capacity per instance with one", || async {
        Ok((names(&capacities).await?.len() == 3).then_some(()))
    })
    .await?;

    // Porch renders the SMF first: ntc gates it on the three UPF variants it talks to.
    let porch = Porch::new(&admin, ns);
    porch
        .create("regional-smf-1", "regional", "smf", "1", "Draft")
        .await?;
    let upf_gates = [
        "wait-for-UPF-upf-east-edge03",
        "wait-for-UPF-upf-west-edge01",
        "wait-for-UPF-upf-west-edge02",
    ];
    let gates = eventually("the SMF gated on three UPFs", || async {
        let gates = porch.gates("regional-smf-1").await?;
        Ok((gates.gates.len() == 3 && gates.conditions.len() == 3).then_some(gates))
    })
    .await?;
    let mut gate_types = gates.gates.clone();
    gate_types.sort();
    assert_eq!(gate_types, upf_gates);
    assert!(
        upf_gates.iter().all(|g| gates.status(g) == Some("False")),
        "{gates:?}"
    );
    for (name, repo, package) in [
        ("edge01-upf-west-1", "edge01", "upf-west"),
        ("edge02-upf-west-1", "edge02", "upf-west"),
        ("edge03-upf-east-1", "edge03", "upf-east"),
    ] {
        porch.create(name, repo, package, "1", "Draft").await?;
    }

    // One UPF published: its gate alone opens, and the deployed topology shows it.
    porch
        .set_lifecycle("edge01-upf-west-1", "Published")
        .await?;
    let gates = eventually("upf-west-edge01's gate open", || async {
        let gates = porch.gates("regional-smf-1").await?;
        Ok((gates.status("wait-for-UPF-upf-west-edge01") == Some("True")).then_some(gates))
    })
    .await?;
    assert_eq!(gates.status("wait-for-UPF-upf-west-edge02"), Some("False"));
    assert_eq!(gates.status("wait-for-UPF-upf-east-edge03"), Some("False"));
    let first = eventually("the deployed topology", || deployed(&admin, ns)).await?;
    assert_eq!(first, [("upf-west-edge01".to_owned(), Vec::new())]);

    // Every UPF published: the SMF is free to go; then SMF and AMF published.
    porch
        .set_lifecycle("edge02-upf-west-1", "Published")
        .await?;
    porch
        .set_lifecycle("edge03-upf-east-1", "Published")
        .await?;
    eventually("every SMF gate open", || async {
        let gates = porch.gates("regional-smf-1").await?;
        Ok(upf_gates
            .iter()
            .all(|g| gates.status(g) == Some("True"))
            .then_some(()))
    })
    .await?;
    porch.set_lifecycle("regional-smf-1", "Published").await?;
    porch
        .create("regional-amf-1", "regional", "amf", "1", "Published")
        .await?;
    let topologies = api(&admin, ns, &resources::nf_topology());
    let status = eventually("five instances deployed", || async {
        let topology = topologies.get("free5gc").await?;
        let status = topology.data.get("status").cloned().unwrap_or(Value::Null);
        Ok((status["numNFDeployed"] == 5).then_some(status))
    })
    .await?;
    let ready = status["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|c| c["type"] == "Ready")
        .context("a Ready condition")?;
    assert_eq!(ready["status"], "True", "{status}");
    let full = eventually("the full deployed topology", || async {
        Ok(deployed(&admin, ns).await?.filter(|t| t.len() == 5))
    })
    .await?;
    let smf = full
        .iter()
        .find(|(id, _)| id == "smf-regional")
        .context("smf-regional deployed")?;
    assert_eq!(
        smf.1,
        [
            "amf-regional",
            "upf-east-edge03",
            "upf-west-edge01",
            "upf-west-edge02"
        ]
    );

    // The operator switches to `orphan` and drops upf-east's capacity: every PackageVariantSet
    // is updated in place to tell Porch to leave the packages when the set goes, and the
    // server-side apply removes upf-east's injector (a field no longer applied is removed, as
    // the in-memory server's merge-patch reading of apply would not), and its Capacity goes.
    let uid = sets.get("free5gc-upf-east").await?.metadata.uid;
    let mut changed = topology.to_json();
    changed["spec"]["deletionPolicy"] = json!("orphan");
    for instance in changed["spec"]["nfInstances"]
        .as_array_mut()
        .context("nfInstances")?
    {
        if instance["name"] == "upf-east" {
            instance["nfTemplate"]
                .as_object_mut()
                .context("nfTemplate")?
                .remove("capacity");
        }
    }
    apply(&admin, &nephrite_krm::Object::from_json(changed)?).await?;
    eventually("deletionPolicy orphan in every set", || async {
        let listed = sets.list(&Default::default()).await?.items;
        Ok((listed.len() == 4
            && listed
                .iter()
                .all(|s| s.data["spec"]["template"]["deletionPolicy"] == "orphan"))
        .then_some(()))
    })
    .await?;
    let upf_east = sets.get("free5gc-upf-east").await?;
    assert_eq!(
        upf_east.metadata.uid, uid,
        "updated in place, never recreated"
    );
    assert_eq!(
        upf_east.data["spec"]["template"].get("injectors"),
        None,
        "{}",
        upf_east.data
    );
    eventually("upf-east's Capacity deleted", || async {
        Ok((names(&capacities).await? == ["free5gc-smf", "free5gc-upf-west"]).then_some(()))
    })
    .await?;

    // The topology deleted: ntc deletes what it made, then lets the topology go.
    topologies
        .delete("free5gc", &DeleteParams::default())
        .await?;
    eventually("the topology gone", || async {
        Ok(topologies.get_opt("free5gc").await?.is_none().then_some(()))
    })
    .await
    .with_context(|| format!("ntc's log (last 20 lines):\n{}", ntc.log_tail(20)))?;
    assert_eq!(names(&sets).await?, Vec::<String>::new());
    assert_eq!(names(&capacities).await?, Vec::<String>::new());
    assert_eq!(deployed(&admin, ns).await?, None);
    // Porch's packages are Porch's: ntc leaves the revisions alone.
    assert_eq!(names(&porch.revisions).await?.len(), 5);

    let log = ntc.stop().await?;
    assert!(log.contains("received SIGTERM"), "{log}");
    Ok(())
}
