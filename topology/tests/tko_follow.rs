//! The TKO backend follows the world (issue #37), against the real preparer (SQLite store,
//! in-process on loopback): a site registered after the preparation gets its children, an SMF
//! it talks to (an existing one, or its own new one) waiting for the new UPF; a site relabelled
//! away loses its children (or, under `deletionPolicy: orphan`, keeps them out of the deployed
//! topology); a deleted site loses its children and its place (instance and connectivities) in
//! the deployed topology; an edited NFTopology is re-planned and only the children that must
//! change are created, updated in place or deleted. "Untouched" is read from the preparer's
//! change log (`Watch` from the revision before the change): an untouched child was not written
//! at all, its revision is the one it had.

mod tko_lab;
mod tko_follow {
    pub mod lab;
}

use std::collections::BTreeMap;

use anyhow::Context as _;
use nephrite_preparer_client::DataApi as _;
use nephrite_topology::replan::SPEC_FINGERPRINT_KEY;
use serde_json::json;
use tko_follow::lab::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_late_site_gets_its_upf_and_the_smf_waits_for_that_upf() -> anyhow::Result<()> {
    let lab = Lab::start(&[
        ("regional", "regional", "us-west"),
        ("edge01", "edge", "us-west"),
        ("edge02", "edge", "us-west"),
    ])
    .await?;
    let (parent, before) = lab.topology(4).await?;
    assert_eq!(
        before.keys().collect::<Vec<_>>(),
        [
            "amf-regional",
            "smf-regional",
            "upf-west-edge01",
            "upf-west-edge02"
        ]
    );

    // The tracker has seen the four children prepared (its status says so) and has gone
    // quiet (the parent unchanged for a while) before the late site comes, so only the site
    // change can make it act.
    lab.parent_until(&parent, "four children prepared in the status", |p| {
        let status = p.get(&topology_gvk(), "free5gc")?.status()?;
        let packages = status["packages"].as_array()?;
        (packages.len() == 4 && packages.iter().all(|p| p["lifecycle"] == "Prepared")).then_some(())
    })
    .await?;
    lab.quiet(&parent).await?;

    // edge03 matches upf-east's selector: its child comes, stamped and with its capacity, and
    // nothing else is touched. How long it took is printed, not asserted (a loaded machine is
    // no measure; the `churn` bench reports the figure).
    let from = lab.revision().await?;
    let registered = std::time::Instant::now();
    register_site(&lab.data, "edge03", "edge", "us-east").await?;
    let after = lab
        .until("child for the late site", EVENTUALLY, |c| {
            c.contains_key("upf-east-edge03")
        })
        .await?;
    eprintln!(
        "late site: upf-east-edge03 created {:?} after edge03 was registered",
        registered.elapsed()
    );
    let upf_east = &after["upf-east-edge03"];
    assert_eq!(upf_east.site_id, "edge03");
    assert!(!upf_east.approved);
    let package = lab.package(&upf_east.id).await?;
    assert!(package.contains("maxUplinkThroughput: '500M'"), "{package}");
    assert!(package.contains(SPEC_FINGERPRINT_KEY), "{package}");
    for (key, child) in &before {
        assert_eq!(after[key].id, child.id, "{key} kept its deployment");
    }

    // The west UPFs approved, the SMF still waits for the late UPF: the tracker says so in the
    // status and leaves the SMF unapproved.
    let prepared = lab
        .until("the late UPF prepared", EVENTUALLY, |c| {
            c["upf-east-edge03"].prepared
        })
        .await?;
    lab.quiet(&parent).await?;
    untouched(
        &lab.written_since(from).await?,
        &before,
        &[
            "amf-regional",
            "smf-regional",
            "upf-west-edge01",
            "upf-west-edge02",
        ],
    )?;
    lab.approve(&prepared, "upf-west-edge01").await?;
    lab.approve(&prepared, "upf-west-edge02").await?;
    let pending = lab
        .parent_until(&parent, "the SMF waiting for the late UPF only", |p| {
            pending_of(p, "smf-regional").filter(|gates| {
                gates.len() == 1 && deployed_ids(p).is_some_and(|ids| ids.len() == 2)
            })
        })
        .await?;
    assert_eq!(pending, ["wait-for-UPF-upf-east-edge03"]);
    assert!(!lab.children().await?["smf-regional"].approved);

    // `ntc status` shows the same through the Data API: one row per instance and site.
    let table = ntc_status(&lab, &parent).await?;
    let row = |id: &str| {
        table
            .lines()
            .find(|l| l.split_whitespace().nth(2) == Some(id))
            .unwrap_or_else(|| panic!("no row for {id}:\n{table}"))
            .to_owned()
    };
    assert!(table.starts_with("INSTANCE"), "{table}");
    assert_eq!(table.lines().count(), 6, "{table}");
    assert!(
        row("smf-regional").contains("Waiting")
            && row("smf-regional").contains("for wait-for-UPF-upf-east-edge03"),
        "{table}"
    );
    assert!(row("upf-west-edge01").contains("Approved"), "{table}");
    assert!(row("upf-east-edge03").contains("Prepared"), "{table}");

    // The late UPF approved: ntc approves the SMF.
    lab.approve(&prepared, "upf-east-edge03").await?;
    lab.until("the SMF approved by ntc", EVENTUALLY, |c| {
        c["smf-regional"].approved
    })
    .await?;
    lab.stop().await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_late_site_gets_its_upf_and_its_own_smf_after_it_and_relabelled_away_loses_both()
-> anyhow::Result<()> {
    let lab = Lab::start(&[
        ("regional", "regional", "us-west"),
        ("edge01", "edge", "us-west"),
        ("edge02", "edge", "us-west"),
    ])
    .await?;
    let (parent, before) = lab.topology(4).await?;
    // An SMF on every us-east edge site, on the N4 network every UPF is on: none matches yet.
    lab.edit_topology(&parent, |spec| {
        if let Some(instances) = spec["nfInstances"].as_array_mut() {
            instances.push(json!({
                "name": "smf-east",
                "clusterSelector": {"matchLabels": {
                    "nephio.org/site-type": "edge",
                    "nephio.org/region": "us-east",
                }},
                "nfTemplate": {
                    "nfType": "smf",
                    "className": "free5gc-smf",
                    "nfInterfaces": [{"name": "n4", "networkInstanceName": "n4"}],
                },
            }));
        }
    })
    .await?;
    for key in ["upf-west-edge01", "upf-west-edge02", "amf-regional"] {
        lab.approve(&before, key).await?;
    }
    lab.until("the regional SMF approved by ntc", EVENTUALLY, |c| {
        c["smf-regional"].approved
    })
    .await?;
    lab.parent_until(&parent, "four deployed", |p| {
        deployed_ids(p).filter(|ids| ids.len() == 4)
    })
    .await?;
    lab.quiet(&parent).await?;
    let settled = lab.children().await?;
    assert_eq!(settled.len(), 4, "smf-east has no site yet: {settled:?}");

    // edge03 matches upf-east and smf-east: both children come, the SMF gated on the late UPF
    // (`nephio.org/approve: Manual`, so no auto-approving preparer would take it either).
    let from = lab.revision().await?;
    register_site(&lab.data, "edge03", "edge", "us-east").await?;
    let late = ["upf-east-edge03", "smf-east-edge03"];
    let prepared = lab
        .until("both children of the late site prepared", EVENTUALLY, |c| {
            late.iter().all(|k| c.get(*k).is_some_and(|d| d.prepared))
        })
        .await?;
    for key in late {
        assert_eq!(prepared[key].site_id, "edge03", "{key}");
    }
    let smf_package = lab.package(&prepared["smf-east-edge03"].id).await?;
    assert!(
        smf_package.contains("nephio.org/approve: Manual"),
        "{smf_package}"
    );
    // The west UPFs are approved already: the new SMF waits for the late UPF only, and ntc
    // leaves it unapproved while it waits.
    let pending = lab
        .parent_until(&parent, "smf-east-edge03 waiting for the late UPF", |p| {
            pending_of(p, "smf-east-edge03").filter(|gates| !gates.is_empty())
        })
        .await?;
    assert_eq!(pending, ["wait-for-UPF-upf-east-edge03"]);
    lab.quiet(&parent).await?;
    let waiting = lab.children().await?;
    assert!(!waiting["upf-east-edge03"].approved);
    assert!(
        !waiting["smf-east-edge03"].approved,
        "the SMF approved before its UPF"
    );
    untouched(
        &lab.written_since(from).await?,
        &settled,
        &[
            "amf-regional",
            "smf-regional",
            "upf-west-edge01",
            "upf-west-edge02",
        ],
    )?;

    // The late UPF approved: ntc approves the late SMF, and the deployed topology lists both,
    // the new SMF connected to every UPF.
    lab.approve(&waiting, "upf-east-edge03").await?;
    lab.until("smf-east-edge03 approved by ntc", EVENTUALLY, |c| {
        c["smf-east-edge03"].approved
    })
    .await?;
    let neighbours = lab
        .parent_until(&parent, "six deployed", |p| {
            deployed_ids(p)
                .filter(|ids| ids.len() == 6)
                .and(neighbours_of(p, "smf-east-edge03"))
        })
        .await?;
    assert_eq!(
        neighbours,
        [
            "smf-regional",
            "upf-east-edge03",
            "upf-west-edge01",
            "upf-west-edge02"
        ]
    );

    // edge03 relabelled away (the default deletion policy): both its children are deleted,
    // the deployed topology drops them and the regional SMF's connectivity to the late UPF,
    // and no other child is written.
    lab.quiet(&parent).await?;
    let full = lab.children().await?;
    let from = lab.revision().await?;
    register_site(&lab.data, "edge03", "lab", "us-east").await?;
    let after = lab
        .until("both children of edge03 deleted", EVENTUALLY, |c| {
            late.iter().all(|k| !c.contains_key(*k))
        })
        .await?;
    assert_eq!(
        after.keys().collect::<Vec<_>>(),
        [
            "amf-regional",
            "smf-regional",
            "upf-west-edge01",
            "upf-west-edge02"
        ]
    );
    let neighbours = lab
        .parent_until(&parent, "four deployed again", |p| {
            deployed_ids(p)
                .filter(|ids| ids.len() == 4)
                .and(neighbours_of(p, "smf-regional"))
        })
        .await?;
    assert_eq!(
        neighbours,
        ["amf-regional", "upf-west-edge01", "upf-west-edge02"]
    );
    lab.quiet(&parent).await?;
    let written = lab.written_since(from).await?;
    for key in late {
        assert!(
            written.contains_key(&full[key].id),
            "{key}'s deletion is in the change log"
        );
    }
    untouched(
        &written,
        &full,
        &[
            "amf-regional",
            "smf-regional",
            "upf-west-edge01",
            "upf-west-edge02",
        ],
    )?;
    lab.stop().await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_site_relabelled_away_loses_its_children_or_keeps_them_as_orphans() -> anyhow::Result<()>
{
    let lab = Lab::start(&[
        ("regional", "regional", "us-west"),
        ("edge01", "edge", "us-west"),
        ("edge02", "edge", "us-west"),
        ("edge03", "edge", "us-east"),
    ])
    .await?;
    let (parent, before) = lab.topology(5).await?;
    for key in [
        "upf-west-edge01",
        "upf-west-edge02",
        "upf-east-edge03",
        "amf-regional",
    ] {
        lab.approve(&before, key).await?;
    }
    lab.parent_until(&parent, "five deployed", |p| {
        deployed_ids(p).filter(|ids| ids.len() == 5)
    })
    .await?;

    // edge02 relabelled to a site type no instance selects: its UPF child is deleted (the
    // default policy), the deployed topology drops it, the other children stay as they were.
    register_site(&lab.data, "edge02", "lab", "us-west").await?;
    let after = lab
        .until("upf-west-edge02 deleted", EVENTUALLY, |c| {
            !c.contains_key("upf-west-edge02")
        })
        .await?;
    assert_eq!(after.len(), 4);
    for (key, child) in &after {
        assert_eq!(child.id, before[key].id, "{key} kept its deployment");
    }
    let ids = lab
        .parent_until(&parent, "four deployed", |p| {
            deployed_ids(p).filter(|ids| ids.len() == 4)
        })
        .await?;
    assert!(!ids.iter().any(|id| id == "upf-west-edge02"), "{ids:?}");

    // Under deletionPolicy: orphan, edge01 relabelled away at once after the edit keeps its
    // child, which leaves the deployed topology. The relabel comes while the tracker may still
    // be busy with the edge02 step: a re-plan that read the package before the edit must not
    // apply the old policy to the new sites.
    lab.edit_topology(&parent, |spec| {
        spec.insert("deletionPolicy".into(), json!("orphan"));
    })
    .await?;
    register_site(&lab.data, "edge01", "lab", "us-west").await?;
    let ids = lab
        .parent_until(&parent, "the orphan out of the deployed topology", |p| {
            deployed_ids(p).filter(|ids| ids.len() == 3)
        })
        .await?;
    assert!(!ids.iter().any(|id| id == "upf-west-edge01"), "{ids:?}");
    lab.quiet(&parent).await?;
    let now = lab.children().await?;
    assert_eq!(
        now.get("upf-west-edge01").map(|c| &c.id),
        Some(&before["upf-west-edge01"].id),
        "the orphan is left in place"
    );
    lab.stop().await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deleted_site_loses_its_children_and_its_place_in_the_deployed_topology()
-> anyhow::Result<()> {
    let lab = Lab::start(&[
        ("regional", "regional", "us-west"),
        ("edge01", "edge", "us-west"),
        ("edge02", "edge", "us-west"),
        ("edge03", "edge", "us-east"),
    ])
    .await?;
    let (parent, before) = lab.topology(5).await?;
    for key in [
        "upf-west-edge01",
        "upf-west-edge02",
        "upf-east-edge03",
        "amf-regional",
    ] {
        lab.approve(&before, key).await?;
    }
    lab.until("the SMF approved by ntc", EVENTUALLY, |c| {
        c["smf-regional"].approved
    })
    .await?;
    let smf_neighbours = |p: &nephrite_krm::Package| neighbours_of(p, "smf-regional");
    let full = lab
        .parent_until(&parent, "five deployed", |p| {
            deployed_ids(p)
                .filter(|ids| ids.len() == 5)
                .and(smf_neighbours(p))
        })
        .await?;
    assert!(full.contains(&"upf-east-edge03".to_owned()), "{full:?}");

    // edge03 deleted from the preparer (the default deletion policy): its UPF child is
    // deleted, the deployed topology drops the instance and the SMF's connectivity to it, and
    // the other children stay as they were.
    assert!(
        lab.data.delete_site("edge03").await?,
        "edge03 was registered"
    );
    let after = lab
        .until("upf-east-edge03 deleted", EVENTUALLY, |c| {
            !c.contains_key("upf-east-edge03")
        })
        .await?;
    assert_eq!(after.len(), 4);
    for (key, child) in &after {
        assert_eq!(child.id, before[key].id, "{key} kept its deployment");
    }
    let neighbours = lab
        .parent_until(&parent, "four deployed, the SMF without upf-east", |p| {
            deployed_ids(p)
                .filter(|ids| ids.len() == 4)
                .and(smf_neighbours(p))
                .filter(|n| !n.iter().any(|id| id == "upf-east-edge03"))
        })
        .await?;
    assert_eq!(
        neighbours,
        ["amf-regional", "upf-west-edge01", "upf-west-edge02"]
    );
    let package =
        nephrite_krm::Package::from_yaml(&lab.data.get_deployment(&parent).await?.package_yaml)?;
    let ids = deployed_ids(&package).context("the deployed topology")?;
    assert!(!ids.iter().any(|id| id == "upf-east-edge03"), "{ids:?}");
    let status = ntc_status(&lab, &parent).await?;
    let upf_east = status
        .lines()
        .find(|l| l.starts_with("upf-east"))
        .with_context(|| format!("no upf-east row:\n{status}"))?;
    assert!(upf_east.contains("Unplaced"), "{status}");
    lab.stop().await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn topology_edits_change_only_the_children_they_must() -> anyhow::Result<()> {
    let lab = Lab::start(&[
        ("regional", "regional", "us-west"),
        ("edge01", "edge", "us-west"),
        ("edge02", "edge", "us-west"),
        ("edge03", "edge", "us-east"),
    ])
    .await?;
    let (parent, before) = lab.topology(5).await?;
    let mut packages = BTreeMap::new();
    for (key, child) in &before {
        packages.insert(key.clone(), lab.package(&child.id).await?);
    }
    lab.quiet(&parent).await?;

    // A capacity edit of upf-west: both its children updated in place (same ids, a new
    // revision and package), the others not written at all (their revisions compared in the
    // preparer's change log).
    let from = lab.revision().await?;
    lab.edit_topology(&parent, |spec| {
        instance_mut(spec, "upf-west")["nfTemplate"]["capacity"]["maxUplinkThroughput"] =
            json!("2G");
    })
    .await?;
    let after = lab
        .until("upf-west's children updated", EVENTUALLY, |c| {
            ["upf-west-edge01", "upf-west-edge02"]
                .iter()
                .all(|k| c.get(*k).is_some_and(|d| d.updated != before[*k].updated))
        })
        .await?;
    for key in ["upf-west-edge01", "upf-west-edge02"] {
        assert_eq!(after[key].id, before[key].id, "{key} updated in place");
        assert!(after[key].prepared, "{key} stays prepared");
        let package = lab.package(&after[key].id).await?;
        assert!(package.contains("maxUplinkThroughput: '2G'"), "{package}");
        assert!(!package.contains("maxUplinkThroughput: '1G'"), "{package}");
        assert_ne!(package, packages[key]);
        assert_eq!(
            package.matches("kind: Capacity").count(),
            1,
            "one Capacity: {package}"
        );
    }
    lab.quiet(&parent).await?;
    let written = lab.written_since(from).await?;
    rewritten(&written, &after, &["upf-west-edge01", "upf-west-edge02"])?;
    untouched(
        &written,
        &after,
        &["amf-regional", "smf-regional", "upf-east-edge03"],
    )?;
    assert_eq!(after.len(), 5, "{after:?}");

    // The upf-west instance removed: both its children deleted, the others not written (the
    // SMF's gates are rollout state, not content).
    let from = lab.revision().await?;
    lab.edit_topology(&parent, |spec| {
        if let Some(instances) = spec["nfInstances"].as_array_mut() {
            instances.retain(|i| i["name"] != "upf-west");
        }
    })
    .await?;
    let after_removal = lab
        .until("upf-west's children deleted", EVENTUALLY, |c| {
            !c.contains_key("upf-west-edge01") && !c.contains_key("upf-west-edge02")
        })
        .await?;
    assert_eq!(
        after_removal.keys().collect::<Vec<_>>(),
        ["amf-regional", "smf-regional", "upf-east-edge03"]
    );
    lab.quiet(&parent).await?;
    let written = lab.written_since(from).await?;
    rewritten(&written, &after, &["upf-west-edge01", "upf-west-edge02"])?;
    untouched(
        &written,
        &after,
        &["amf-regional", "smf-regional", "upf-east-edge03"],
    )?;

    // An instance added on every edge site: its three children created, the others not
    // written.
    let from = lab.revision().await?;
    lab.edit_topology(&parent, |spec| {
        if let Some(instances) = spec["nfInstances"].as_array_mut() {
            instances.push(json!({
                "name": "upf-edge",
                "clusterSelector": {"matchLabels": {"nephio.org/site-type": "edge"}},
                "nfTemplate": {
                    "nfType": "upf",
                    "className": "free5gc-upf",
                    "nfInterfaces": [{"name": "n4", "networkInstanceName": "n4"}],
                },
            }));
        }
    })
    .await?;
    let added = ["upf-edge-edge01", "upf-edge-edge02", "upf-edge-edge03"];
    let after_addition = lab
        .until("upf-edge's children created", EVENTUALLY, |c| {
            added.iter().all(|k| c.contains_key(*k))
        })
        .await?;
    assert_eq!(after_addition.len(), 6, "{after_addition:?}");
    for (key, site) in added.iter().zip(["edge01", "edge02", "edge03"]) {
        assert_eq!(after_addition[*key].site_id, site, "{key}");
    }
    lab.quiet(&parent).await?;
    untouched(
        &lab.written_since(from).await?,
        &after,
        &["amf-regional", "smf-regional", "upf-east-edge03"],
    )?;
    lab.stop().await
}
