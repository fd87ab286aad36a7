//! The Porch backend end to end against the in-memory API server, with the test standing in
//! for Porch: it creates labelled PackageRevisions and moves them Draft → Published →
//! DeletionProposed → deleted, checking the gates, the deployed topology and the status at each
//! step.

mod support;

use std::time::Duration;

use anyhow::Context as _;
use kube::api::{DeleteParams, Patch, PatchParams};
use nephrite_ntc::porch::{PorchConfig, resources};
use serde_json::{Value, json};
use support::*;

fn pvs_names(items: &[kube::api::DynamicObject]) -> Vec<String> {
    let mut names: Vec<String> = items
        .iter()
        .filter_map(|i| i.metadata.name.clone())
        .collect();
    names.sort();
    names
}

fn repositories(pvs: &kube::api::DynamicObject) -> Vec<String> {
    pvs.data["spec"]["targets"][0]["repositories"]
        .as_array()
        .map(|rs| {
            rs.iter()
                .map(|r| r["name"].as_str().unwrap_or("").to_owned())
                .collect()
        })
        .unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn smf_waits_for_upfs_and_the_deployed_topology_follows_published_revisions()
-> anyhow::Result<()> {
    let (server, client) = server_with_example().await?;
    let controller = start_controller(&client, PorchConfig::default());
    create_all(&client, &example("topology.yaml")).await?;

    // One PackageVariantSet per instance, owned by the topology, labels in the template.
    let pvs_api = api(&client, &resources::package_variant_set());
    let sets = eventually("four PackageVariantSets", || async {
        let items = list(&pvs_api).await?;
        Ok((items.len() == 4).then_some(items))
    })
    .await?;
    assert_eq!(
        pvs_names(&sets),
        [
            "free5gc-amf",
            "free5gc-smf",
            "free5gc-upf-east",
            "free5gc-upf-west"
        ]
    );
    let upf_west = sets
        .iter()
        .find(|s| s.metadata.name.as_deref() == Some("free5gc-upf-west"))
        .unwrap();
    assert_eq!(
        upf_west.data["spec"]["template"]["labels"]["nf-deployment-name"],
        "free5gc"
    );
    assert_eq!(repositories(upf_west), ["edge01", "edge02"]);
    let owner = &upf_west.metadata.owner_references.as_ref().unwrap()[0];
    assert_eq!(
        (owner.kind.as_str(), owner.name.as_str()),
        ("NFTopology", "free5gc")
    );
    let upf_west_uid = upf_west.metadata.uid.clone();
    // The Capacities are written in the same reconcile, after the sets: wait for all three.
    let capacity_api = api(&client, &resources::capacity());
    eventually("three Capacities", || async {
        Ok((list(&capacity_api).await?.len() == 3).then_some(()))
    })
    .await?;

    // The SMF's revision appears before any UPF's: it is gated at once, on all three UPFs.
    create_revision(&client, "regional-smf-1", "regional", "smf", "1", "Draft").await?;
    let gates = eventually("SMF gated", || async {
        let revision = api(&client, &resources::package_revision())
            .get("regional-smf-1")
            .await?;
        let gates = revision.data["spec"]["readinessGates"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        Ok((gates.len() == 3).then_some(gates))
    })
    .await?;
    assert_eq!(
        gates[0],
        json!({"conditionType": "wait-for-UPF-upf-west-edge01"})
    );
    let conditions = revision_conditions(&client, "regional-smf-1").await?;
    assert_eq!(conditions.len(), 3);
    assert!(
        conditions.iter().all(|(_, s)| s == "False"),
        "{conditions:?}"
    );

    // Porch's placeholder `main` revision of a UPF does not count as published.
    create_revision(
        &client,
        "edge01-upf-west-main",
        "edge01",
        "upf-west",
        "main",
        "Published",
    )
    .await?;
    create_revision(
        &client,
        "edge01-upf-west-1",
        "edge01",
        "upf-west",
        "1",
        "Draft",
    )
    .await?;
    create_revision(
        &client,
        "edge02-upf-west-1",
        "edge02",
        "upf-west",
        "1",
        "Draft",
    )
    .await?;
    create_revision(
        &client,
        "edge03-upf-east-1",
        "edge03",
        "upf-east",
        "1",
        "Draft",
    )
    .await?;
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(
        deployed(&client).await?.is_none(),
        "nothing is published yet"
    );
    let status = topology_status(&client).await?;
    let smf_package = status["packages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == "smf-regional")
        .unwrap()
        .clone();
    assert_eq!(smf_package["lifecycle"], "Draft");
    assert_eq!(
        smf_package["pendingConditions"].as_array().unwrap().len(),
        3
    );

    // One UPF published: its gate opens, the deployed topology appears with it alone.
    set_lifecycle(&client, "edge01-upf-west-1", "Published").await?;
    eventually("gate for upf-west-edge01 open", || async {
        let c = revision_conditions(&client, "regional-smf-1").await?;
        Ok(
            c.contains(&("wait-for-UPF-upf-west-edge01".into(), "True".into()))
                .then_some(()),
        )
    })
    .await?;
    let conditions = revision_conditions(&client, "regional-smf-1").await?;
    assert!(conditions.contains(&("wait-for-UPF-upf-east-edge03".into(), "False".into())));
    let topology = eventually("deployed topology", || async { deployed(&client).await }).await?;
    assert_eq!(
        topology,
        [("upf-west-edge01".to_owned(), Vec::<String>::new())]
    );

    // Every UPF, then the SMF and AMF, published.
    set_lifecycle(&client, "edge02-upf-west-1", "Published").await?;
    set_lifecycle(&client, "edge03-upf-east-1", "Published").await?;
    eventually("all SMF gates open", || async {
        let c = revision_conditions(&client, "regional-smf-1").await?;
        Ok((c.len() == 3 && c.iter().all(|(_, s)| s == "True")).then_some(()))
    })
    .await?;
    set_lifecycle(&client, "regional-smf-1", "Published").await?;
    create_revision(
        &client,
        "regional-amf-1",
        "regional",
        "amf",
        "1",
        "Published",
    )
    .await?;
    let status = eventually("five deployed", || async {
        let status = topology_status(&client).await?;
        Ok((status["numNFDeployed"] == 5).then_some(status))
    })
    .await?;
    let ready = status["conditions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["type"] == "Ready")
        .unwrap();
    assert_eq!(ready["status"], "True");
    assert_eq!(status["nfInstances"].as_array().unwrap().len(), 5);
    let topology = eventually("full deployed topology", || async {
        let t = deployed(&client).await?;
        Ok(t.filter(|t| t.len() == 5))
    })
    .await?;
    let smf = topology
        .iter()
        .find(|(id, _)| id == "smf-regional")
        .unwrap();
    assert_eq!(
        smf.1,
        [
            "amf-regional",
            "upf-east-edge03",
            "upf-west-edge01",
            "upf-west-edge02"
        ]
    );

    // A second reconcile of the unchanged state writes nothing.
    tokio::time::sleep(Duration::from_millis(300)).await;
    server.requests().reset();
    api(&client, &resources::nf_topology())
        .patch(
            "free5gc",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"annotations": {"touch": "1"}}})),
        )
        .await?;
    eventually("a reconcile", || async {
        Ok((server.requests().count("list", "workloadclusters") > 0).then_some(()))
    })
    .await?;
    tokio::time::sleep(Duration::from_millis(300)).await;
    for resource in [
        "packagevariantsets",
        "capacities",
        "packagerevisions",
        "nfdeployedtopologies",
    ] {
        assert_eq!(
            server.requests().writes(resource),
            0,
            "writes to {resource}"
        );
    }
    assert_eq!(
        server.requests().writes("nftopologies"),
        1,
        "only the test's own touch"
    );

    // DeletionProposed, then deleted: the UPF leaves the deployed topology.
    set_lifecycle(&client, "edge03-upf-east-1", "DeletionProposed").await?;
    eventually("upf-east gone", || async {
        let t = deployed(&client).await?.unwrap_or_default();
        Ok((t.len() == 4
            && !t.iter().any(|(id, n)| {
                id == "upf-east-edge03" || n.contains(&"upf-east-edge03".to_owned())
            }))
        .then_some(()))
    })
    .await?;
    api(&client, &resources::package_revision())
        .delete("edge03-upf-east-1", &DeleteParams::default())
        .await?;
    tokio::time::sleep(Duration::from_millis(200)).await;
    let status = eventually("status follows", || async {
        let s = topology_status(&client).await?;
        Ok((s["numNFDeployed"] == 4).then_some(s))
    })
    .await?;
    let east = status["packages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == "upf-east-edge03")
        .unwrap()
        .clone();
    assert_eq!(east["lifecycle"], "Pending");

    // A relabelled cluster moves between PackageVariantSets, updated in place.
    api(&client, &resources::workload_cluster())
        .patch(
            "edge02",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {"nephio.org/region": "us-east"}}})),
        )
        .await?;
    let west = eventually("edge02 leaves upf-west", || async {
        let pvs = pvs_api.get("free5gc-upf-west").await?;
        Ok((repositories(&pvs) == ["edge01"]).then_some(pvs))
    })
    .await?;
    assert_eq!(
        west.metadata.uid, upf_west_uid,
        "updated in place, never recreated"
    );
    eventually("edge02 joins upf-east", || async {
        let pvs = pvs_api.get("free5gc-upf-east").await?;
        Ok((repositories(&pvs) == ["edge02", "edge03"]).then_some(()))
    })
    .await?;

    // A removed instance: its PackageVariantSet goes, the others stay.
    let topologies = api(&client, &resources::nf_topology());
    let current = topologies.get("free5gc").await?;
    let instances: Vec<Value> = current.data["spec"]["nfInstances"]
        .as_array()
        .context("instances")?
        .iter()
        .filter(|i| i["name"] != "amf")
        .cloned()
        .collect();
    topologies
        .patch(
            "free5gc",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"nfInstances": instances}})),
        )
        .await?;
    eventually("amf PVS deleted", || async {
        let names = pvs_names(&list(&pvs_api).await?);
        Ok((names == ["free5gc-smf", "free5gc-upf-east", "free5gc-upf-west"]).then_some(()))
    })
    .await?;

    // Restart: no duplicate, nothing rewritten.
    controller.stop().await;
    let before = list(&pvs_api).await?;
    server.requests().reset();
    let controller = start_controller(&client, PorchConfig::default());
    eventually("the restarted controller reconciles", || async {
        Ok((server.requests().count("list", "workloadclusters") > 0).then_some(()))
    })
    .await?;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let after = list(&pvs_api).await?;
    assert_eq!(pvs_names(&after), pvs_names(&before));
    assert_eq!(server.requests().writes("packagevariantsets"), 0);
    controller.stop().await;
    server.shutdown().await?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unknown_class_creates_nothing_and_says_why() -> anyhow::Result<()> {
    let (server, client) = server_with_example().await?;
    kube::api::Api::<kube::api::DynamicObject>::all_with(client.clone(), &resources::nf_class())
        .delete("free5gc-smf", &DeleteParams::default())
        .await?;
    let controller = start_controller(&client, PorchConfig::default());
    create_all(&client, &example("topology.yaml")).await?;
    let ready = eventually("Ready=False", || async {
        let status = topology_status(&client).await?;
        Ok(status["conditions"]
            .as_array()
            .and_then(|cs| cs.iter().find(|c| c["type"] == "Ready").cloned()))
    })
    .await?;
    assert_eq!(ready["status"], "False");
    assert_eq!(ready["reason"], "ClassNotFound");
    assert_eq!(
        ready["message"],
        "class free5gc-smf not found (instance smf)"
    );
    assert!(
        list(&api(&client, &resources::package_variant_set()))
            .await?
            .is_empty()
    );

    // The class appears: the topology is planned.
    let classes = example("classes.yaml");
    let smf_class = classes
        .split("---\n")
        .find(|d| d.contains("name: free5gc-smf"))
        .unwrap_or_default();
    create_all(&client, smf_class).await?;
    eventually("PVSs after the class appears", || async {
        Ok((list(&api(&client, &resources::package_variant_set()))
            .await?
            .len()
            == 4)
            .then_some(()))
    })
    .await?;
    controller.stop().await;
    server.shutdown().await?;
    Ok(())
}
