//! Two `ntc serve --backend porch` replicas on one Lease: only the holder writes; the holder
//! killed (SIGKILL, the Lease not released), the other takes it once it expires and carries
//! the rollout on; a third replica takes over from a leader that steps down (SIGTERM).
//!
//! Each replica writes under its own field manager (its identity), so the API server's
//! `managedFields` say which replica wrote each object: the evidence of who wrote is the
//! server's, not the replicas' logs (which are checked as well).

use std::collections::BTreeSet;

use anyhow::{Context as _, ensure};
use k8s_openapi::api::coordination::v1::Lease;
use kube::api::{Api, DeleteParams, DynamicObject};
use nephrite_ntc::porch::resources;
use nephrite_test_services::KubeApiServer;
use serde_json::Value;

use super::cluster::{Porch, api, apply, eventually, example_namespace, example_objects, names};
use super::ntc::{LEASE_NAMESPACE, Ntc, Replica};

/// Every replica's identity starts so; nothing else writes under such a field manager.
const REPLICA_PREFIX: &str = "ntc-replica-";

/// What only a leader's controller logs: its writes and its start.
const LEADER_LINES: &[&str] = &["applying", "gating", "deleting", "leading: starting"];

/// The Lease's holder, `None` when it does not exist or nobody holds it.
async fn holder(admin: &kube::Client, lease: &str) -> anyhow::Result<Option<String>> {
    let leases: Api<Lease> = Api::namespaced(admin.clone(), LEASE_NAMESPACE);
    Ok(leases
        .get_opt(lease)
        .await?
        .and_then(|l| l.spec)
        .and_then(|s| s.holder_identity)
        .filter(|h| !h.is_empty()))
}

/// The replicas whose field manager appears in `object`'s `managedFields`.
fn writers(object: &DynamicObject) -> BTreeSet<String> {
    object
        .metadata
        .managed_fields
        .iter()
        .flatten()
        .filter_map(|entry| entry.manager.clone())
        .filter(|manager| manager.starts_with(REPLICA_PREFIX))
        .collect()
}

/// The replicas that wrote anything ntc writes in namespace `ns`: the topology (finalizer,
/// status), its PackageVariantSets, Capacities, NFDeployedTopology and the PackageRevisions.
async fn all_writers(admin: &kube::Client, ns: &str) -> anyhow::Result<BTreeSet<String>> {
    let mut found = BTreeSet::new();
    for resource in [
        resources::nf_topology(),
        resources::package_variant_set(),
        resources::capacity(),
        resources::nf_deployed_topology(),
        resources::package_revision(),
    ] {
        for object in api(admin, ns, &resource).list(&Default::default()).await? {
            found.extend(writers(&object));
        }
    }
    Ok(found)
}

fn leader_lines(log: &str) -> Vec<&str> {
    log.lines()
        .filter(|line| LEADER_LINES.iter().any(|marker| line.contains(marker)))
        .collect()
}

/// The scenario; `kube` is the shared server with the CRDs installed.
pub async fn two_replicas_one_writes_and_the_other_takes_over(
    kube: &KubeApiServer,
) -> anyhow::Result<()> {
    let ns = "ntc-pair";
    let lease = "ntc-pair";
    let admin = kube.endpoint().client()?;
    example_namespace(&admin, ns).await?;
    let (id_a, id_b, id_c) = ("ntc-replica-a", "ntc-replica-b", "ntc-replica-c");

    // A first, alone: it takes the Lease; B then starts and stands by.
    let a = Ntc::start_replica(
        kube,
        ns,
        &Replica {
            identity: id_a,
            lease,
        },
    )
    .await?;
    eventually("replica a holding the Lease", || async {
        Ok((holder(&admin, lease).await?.as_deref() == Some(id_a)).then_some(()))
    })
    .await
    .with_context(|| format!("a's log:\n{}", a.log_tail(20)))?;
    let b = Ntc::start_replica(
        kube,
        ns,
        &Replica {
            identity: id_b,
            lease,
        },
    )
    .await?;
    eventually("replica b campaigning", || async {
        Ok(b.log().contains("standing by").then_some(()))
    })
    .await
    .with_context(|| format!("b's log:\n{}", b.log_tail(20)))?;

    let topology = example_objects("topology.yaml", ns)?
        .pop()
        .context("the example topology")?;
    apply(&admin, &topology).await?;
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
    .with_context(|| format!("a's log:\n{}", a.log_tail(20)))?;

    // Porch renders the SMF and the UPFs; one UPF is published: the leader gates the SMF and
    // opens that UPF's gate.
    let porch = Porch::new(&admin, ns);
    porch
        .create("regional-smf-1", "regional", "smf", "1", "Draft")
        .await?;
    for (name, repo, package) in [
        ("edge01-upf-west-1", "edge01", "upf-west"),
        ("edge02-upf-west-1", "edge02", "upf-west"),
        ("edge03-upf-east-1", "edge03", "upf-east"),
    ] {
        porch.create(name, repo, package, "1", "Draft").await?;
    }
    porch
        .set_lifecycle("edge01-upf-west-1", "Published")
        .await?;
    eventually("upf-west-edge01's gate open, the others closed", || async {
        let gates = porch.gates("regional-smf-1").await?;
        Ok(
            (gates.status("wait-for-UPF-upf-west-edge01") == Some("True")
                && gates.status("wait-for-UPF-upf-west-edge02") == Some("False"))
            .then_some(()),
        )
    })
    .await?;

    // Only the holder wrote; the standby did not even start its controller.
    let wrote = all_writers(&admin, ns).await?;
    ensure!(
        wrote == BTreeSet::from([id_a.to_owned()]),
        "only the leader {id_a} may have written, the server says {wrote:?}"
    );
    let standby_log = b.log();
    ensure!(
        leader_lines(&standby_log).is_empty(),
        "the standby acted as a leader:\n{standby_log}"
    );
    ensure!(
        holder(&admin, lease).await?.as_deref() == Some(id_a),
        "the Lease changed hands while a was running"
    );

    // The leader dies without releasing the Lease; meanwhile the rollout goes on: the other
    // UPFs are published. B takes the Lease once it expires and opens their gates.
    let a_log = a.kill()?;
    porch
        .set_lifecycle("edge02-upf-west-1", "Published")
        .await?;
    porch
        .set_lifecycle("edge03-upf-east-1", "Published")
        .await?;
    eventually("replica b holding the Lease", || async {
        Ok((holder(&admin, lease).await?.as_deref() == Some(id_b)).then_some(()))
    })
    .await
    .with_context(|| format!("b's log:\n{}", b.log_tail(20)))?;
    let upf_gates = [
        "wait-for-UPF-upf-east-edge03",
        "wait-for-UPF-upf-west-edge01",
        "wait-for-UPF-upf-west-edge02",
    ];
    eventually("every SMF gate open", || async {
        let gates = porch.gates("regional-smf-1").await?;
        Ok(upf_gates
            .iter()
            .all(|g| gates.status(g) == Some("True"))
            .then_some(()))
    })
    .await
    .with_context(|| format!("b's log:\n{}", b.log_tail(20)))?;
    porch.set_lifecycle("regional-smf-1", "Published").await?;
    porch
        .create("regional-amf-1", "regional", "amf", "1", "Published")
        .await?;
    let topologies = api(&admin, ns, &resources::nf_topology());
    eventually("five instances deployed", || async {
        let topology = topologies.get("free5gc").await?;
        let status = topology.data.get("status").cloned().unwrap_or(Value::Null);
        Ok((status["numNFDeployed"] == 5).then_some(()))
    })
    .await
    .with_context(|| format!("b's log:\n{}", b.log_tail(20)))?;
    // The new leader's gates are on the SMF's revision; nothing was made twice or lost.
    let smf = api(&admin, ns, &resources::package_revision())
        .get("regional-smf-1")
        .await?;
    ensure!(
        writers(&smf).contains(id_b),
        "b did not write the SMF's gates: {:?}",
        smf.metadata.managed_fields
    );
    assert_eq!(names(&sets).await?, expected_sets);
    let capacities = api(&admin, ns, &resources::capacity());
    assert_eq!(names(&capacities).await?.len(), 3);
    let deployed = api(&admin, ns, &resources::nf_deployed_topology())
        .get("free5gc")
        .await?;
    let instances = deployed.data["spec"]["nfInstances"]
        .as_array()
        .map_or(0, Vec::len);
    assert_eq!(instances, 5, "{}", deployed.data);

    // A third replica stands by; B steps down (SIGTERM): C takes over at its next retry, and
    // the topology's deletion is its to finish.
    let c = Ntc::start_replica(
        kube,
        ns,
        &Replica {
            identity: id_c,
            lease,
        },
    )
    .await?;
    eventually("replica c campaigning", || async {
        Ok(c.log().contains("standing by").then_some(()))
    })
    .await?;
    let b_log = b.stop().await?;
    ensure!(b_log.contains("left the election"), "{b_log}");
    eventually("replica c holding the Lease", || async {
        Ok((holder(&admin, lease).await?.as_deref() == Some(id_c)).then_some(()))
    })
    .await
    .with_context(|| format!("c's log:\n{}", c.log_tail(20)))?;
    topologies
        .delete("free5gc", &DeleteParams::default())
        .await?;
    eventually("the topology and its children gone", || async {
        Ok((topologies.get_opt("free5gc").await?.is_none()
            && names(&sets).await?.is_empty()
            && names(&capacities).await?.is_empty())
        .then_some(()))
    })
    .await
    .with_context(|| format!("c's log:\n{}", c.log_tail(20)))?;
    let c_log = c.stop().await?;
    ensure!(
        c_log.contains("leading: starting the controller"),
        "c never led:\n{c_log}"
    );
    // Stepping down released the Lease.
    ensure!(
        holder(&admin, lease).await?.is_none(),
        "the Lease is still held after every replica stopped"
    );
    ensure!(
        !a_log.contains("forbidden") && !a_log.contains("Forbidden"),
        "the API server refused replica a:\n{a_log}"
    );
    Ok(())
}
