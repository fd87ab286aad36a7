//! Fencing of the TKO backend's writes (the real preparer, in-process, SQLite): a re-plan of a
//! leader that was deposed while it paused (another replica took the named lease since)
//! writes nothing — its batch carries the holding it was elected with, and the preparer
//! refuses it whole — while the same re-plan under the current holding creates the children.

mod tko_lab;

use clap::Parser as _;
use nephrite_krm::Package;
use nephrite_ntc::tko::data::{self, DataEndpoint};
use nephrite_ntc::tko::follow::{self, Fingerprints, Followed};
use nephrite_ntc::tko::topology_of;
use nephrite_preparer::daemon::start;
use nephrite_preparer_client::{DataApi, DeploymentRequest, LeaseFence};
use nephrite_topology::RolloutPolicy;
use tko_lab::{PreparerFlags, register_example};

const LEASE: &str = "ntc-fenced";

#[tokio::test]
async fn a_deposed_leaders_replan_writes_nothing_and_the_new_leaders_writes() -> anyhow::Result<()>
{
    let dir = tempfile::tempdir()?;
    let store = format!("sqlite:{}", dir.path().join("p.db").display());
    let command = PreparerFlags::try_parse_from([
        "serve",
        "--listen",
        "127.0.0.1:0",
        "--store",
        &store,
        "--auto-approve",
        "false",
    ])?
    .serve;
    let preparer = start(&command, false).await?;
    let data = data::connect(&DataEndpoint::plain(preparer.endpoint.to_string())).await?;
    register_example(
        &data,
        &[
            ("regional", "regional", "us-west"),
            ("edge01", "edge", "us-west"),
            ("edge02", "edge", "us-west"),
        ],
    )
    .await?;
    let parent = data
        .create_deployment(DeploymentRequest {
            template_id: "free5gc-topology".into(),
            ..DeploymentRequest::default()
        })
        .await?
        .deployment_id;
    let package = Package::from_yaml(&data.get_deployment(&parent).await?.package_yaml)?;
    let (topology, classes) = topology_of(&parent, &package, "")?;
    let clusters = data::clusters(&data).await?;
    let plan =
        nephrite_topology::plan::plan(&topology, &classes, &clusters, &RolloutPolicy::default())?;

    // Replica A leads, then pauses; meanwhile its lease passes to replica B.
    let a = data.acquire_lease(LEASE, "replica-a", None).await?;
    let followed = Followed::default();
    followed.set_fence(Some(LeaseFence {
        name: LEASE.into(),
        transitions: a.transitions,
    }));
    data.release_lease(LEASE, &a.token).await?;
    let b = data.acquire_lease(LEASE, "replica-b", None).await?;
    assert_eq!(b.transitions, a.transitions + 1);

    // A wakes up and re-plans: refused whole, nothing written.
    let fingerprints = Fingerprints::default();
    let deposed = follow::replan(&data, &parent, &plan, &followed, &fingerprints)
        .await
        .expect_err("a deposed leader's batch is refused");
    assert!(deposed.to_string().contains("replica-b"), "{deposed}");
    let children = data::children(&data, &parent).await?;
    assert!(children.is_empty(), "{children:?}");

    // Under B's holding the same re-plan creates every child the plan wants, once.
    followed.set_fence(Some(LeaseFence {
        name: LEASE.into(),
        transitions: b.transitions,
    }));
    let applied = follow::replan(&data, &parent, &plan, &followed, &fingerprints).await?;
    let mut keys: Vec<String> = data::children(&data, &parent)
        .await?
        .into_iter()
        .map(|c| c.instance_key)
        .collect();
    keys.sort();
    assert_eq!(
        keys,
        [
            "amf-regional",
            "smf-regional",
            "upf-west-edge01",
            "upf-west-edge02"
        ]
    );
    assert_eq!(applied.created.len(), keys.len());
    assert_eq!(applied.batches, 1, "{applied:?}");
    preparer.stop().await?;
    Ok(())
}
