//! The TKO backend end to end against the real preparer (SQLite store, in-process on
//! loopback): ntc registers as the NFTopology plugin, creates the child deployments, holds
//! the SMF until its UPFs are approved, and keeps the NFDeployedTopology in the parent package.

mod tko_lab;

use std::time::Duration;

use anyhow::{Context as _, bail};
use clap::Parser as _;
use nephrite_krm::{Gvk, Package, keys};
use nephrite_ntc::tko::{self, TkoConfig};
use nephrite_preparer::daemon::{ServeCommand, start};
use nephrite_proto::nephrite::preparer::data::v1 as pb;
use nephrite_proto::nephrite::preparer::data::v1::data_client::DataClient;
use nephrite_runtime::{DaemonIdentity, GrpcServer};
use nephrite_topology::RolloutPolicy;
use tko_lab::{PreparerFlags, example};
use tonic::transport::Channel;

type Data = DataClient<Channel>;

fn preparer_command(store: String) -> ServeCommand {
    preparer_command_on(store, "127.0.0.1:0")
}

fn preparer_command_on(store: String, listen: &str) -> ServeCommand {
    PreparerFlags::try_parse_from([
        "serve",
        "--listen",
        listen,
        "--store",
        &store,
        // Nothing is approved by itself: the test approves the UPFs and AMF, ntc the SMF.
        "--auto-approve",
        "false",
        "--interval",
        "100ms",
        "--plugin-timeout",
        "5s",
        "--lease",
        "5s",
        "--retry-backoff",
        "100ms",
        "--max-backoff",
        "500ms",
        "--concurrency",
        "4",
    ])
    .expect("preparer flags")
    .serve
}

async fn start_ntc(data: &str) -> anyhow::Result<tko::RunningTko> {
    let server = GrpcServer::new(DaemonIdentity::new("ntc", "test")).handle_signals(false);
    tko::start(
        server,
        &"127.0.0.1:0".parse()?,
        TkoConfig {
            data: data.to_owned(),
            credentials: Default::default(),
            advertise: None,
            plugin_name: "ntc".into(),
            policy: RolloutPolicy::default(),
            election: None,
        },
    )
    .await
}

async fn eventually<T, F, Fut>(what: &str, mut check: F) -> anyhow::Result<T>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = anyhow::Result<Option<T>>>,
{
    let mut last = None;
    for _ in 0..300 {
        match check().await {
            Ok(Some(value)) => return Ok(value),
            Ok(None) => {}
            Err(e) => last = Some(e),
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    bail!("timed out waiting for {what} (last error: {last:?})")
}

/// instance key → (deployment id, prepared, approved)
async fn children(
    data: &mut Data,
    parent: &str,
) -> anyhow::Result<Vec<(String, String, bool, bool)>> {
    let list = data
        .list_deployments(pb::ListDeploymentsRequest {
            parent_deployment_id: parent.to_owned(),
            ..Default::default()
        })
        .await?
        .into_inner();
    let mut out: Vec<_> = list
        .deployments
        .into_iter()
        .map(|d| (d.instance_key, d.deployment_id, d.prepared, d.approved))
        .collect();
    out.sort();
    Ok(out)
}

fn child<'a>(
    list: &'a [(String, String, bool, bool)],
    key: &str,
) -> &'a (String, String, bool, bool) {
    list.iter().find(|c| c.0 == key).expect("child present")
}

/// The deployed topology in the parent's package: ids with their neighbours.
async fn deployed(
    data: &mut Data,
    parent: &str,
) -> anyhow::Result<Option<Vec<(String, Vec<String>)>>> {
    let deployment = data
        .get_deployment(pb::GetRequest {
            id: parent.to_owned(),
        })
        .await?
        .into_inner();
    let package = Package::from_yaml(&deployment.package_yaml)?;
    let gvk = Gvk::new("topology.nephio.org", "v1alpha1", "NFDeployedTopology");
    let Some(object) = package.get(&gvk, "free5gc") else {
        return Ok(None);
    };
    let spec = object.spec().context("spec")?;
    Ok(Some(
        spec["nfInstances"]
            .as_array()
            .cloned()
            .unwrap_or_default()
            .iter()
            .map(|i| {
                let neighbours = i["connectivities"]
                    .as_array()
                    .map(|cs| {
                        cs.iter()
                            .map(|c| c["neighborName"].as_str().unwrap_or("").to_owned())
                            .collect()
                    })
                    .unwrap_or_default();
                (i["id"].as_str().unwrap_or("").to_owned(), neighbours)
            })
            .collect(),
    ))
}

async fn approve(data: &mut Data, id: &str) -> anyhow::Result<()> {
    data.approve_deployment(pb::ApproveDeploymentRequest {
        deployment_id: id.to_owned(),
    })
    .await?;
    Ok(())
}

async fn register_fixtures(data: &mut Data) -> anyhow::Result<()> {
    let config =
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: nf-config}\ndata: {mode: demo}\n";
    for template in [
        "pkg-example-upf-bp",
        "pkg-example-smf-bp",
        "pkg-example-amf-bp",
    ] {
        data.register_template(pb::RegisterTemplateRequest {
            id: template.into(),
            metadata: Default::default(),
            package_yaml: config.into(),
        })
        .await?;
    }
    for (site, kind, region) in [
        ("regional", "regional", "us-west"),
        ("edge01", "edge", "us-west"),
        ("edge02", "edge", "us-west"),
        ("edge03", "edge", "us-east"),
    ] {
        data.register_site(pb::RegisterSiteRequest {
            id: site.into(),
            metadata: [
                ("Site.nephio.org/site-type".to_owned(), kind.to_owned()),
                ("Site.nephio.org/region".to_owned(), region.to_owned()),
            ]
            .into(),
            package_yaml: config.into(),
            ..Default::default()
        })
        .await?;
    }
    data.register_template(pb::RegisterTemplateRequest {
        id: "free5gc-topology".into(),
        metadata: Default::default(),
        package_yaml: format!(
            "{}---\n{}",
            example("topology.yaml"),
            example("classes.yaml")
        ),
    })
    .await?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn children_gates_and_deployed_topology_through_the_preparer() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let preparer = start(
        &preparer_command(format!("sqlite:{}", dir.path().join("p.db").display())),
        false,
    )
    .await?;
    let endpoint = preparer.endpoint.to_string();
    let mut data = DataClient::new(nephrite_runtime::dial(&preparer.endpoint).await?);
    register_fixtures(&mut data).await?;
    let ntc = start_ntc(&endpoint).await?;

    let parent = data
        .create_deployment(pb::CreateDeploymentRequest {
            template_id: "free5gc-topology".into(),
            ..Default::default()
        })
        .await?
        .into_inner()
        .deployment_id;

    // One child per (instance × matching site), prepared by the preparer, none approved.
    let list = eventually("five prepared children", || {
        let mut data = data.clone();
        let parent = parent.clone();
        async move {
            let list = children(&mut data, &parent).await?;
            Ok((list.len() == 5 && list.iter().all(|c| c.2)).then_some(list))
        }
    })
    .await?;
    let keys: Vec<&str> = list.iter().map(|c| c.0.as_str()).collect();
    assert_eq!(
        keys,
        [
            "amf-regional",
            "smf-regional",
            "upf-east-edge03",
            "upf-west-edge01",
            "upf-west-edge02"
        ]
    );
    assert!(list.iter().all(|c| !c.3), "nothing approved yet: {list:?}");
    let smf = child(&list, "smf-regional").1.clone();
    let smf_package = data
        .get_deployment(pb::GetRequest { id: smf.clone() })
        .await?
        .into_inner()
        .package_yaml;
    assert!(
        smf_package.contains("nephio.org/approve: Manual"),
        "{smf_package}"
    );
    let upf = child(&list, "upf-west-edge01").1.clone();
    let upf_package = data
        .get_deployment(pb::GetRequest { id: upf.clone() })
        .await?
        .into_inner()
        .package_yaml;
    assert!(
        upf_package.contains("kind: Capacity") && upf_package.contains("maxUplinkThroughput: '1G'"),
        "{upf_package}"
    );
    assert!(upf_package.contains("name: n6-internet"), "{upf_package}");

    // Approve the UPFs one by one: the SMF stays held until the last one.
    approve(&mut data, &child(&list, "upf-west-edge01").1).await?;
    approve(&mut data, &child(&list, "upf-west-edge02").1).await?;
    eventually("two UPFs in the deployed topology", || {
        let mut data = data.clone();
        let parent = parent.clone();
        async move { Ok(deployed(&mut data, &parent).await?.filter(|t| t.len() == 2)) }
    })
    .await?;
    let now = children(&mut data, &parent).await?;
    assert!(
        !child(&now, "smf-regional").3,
        "the SMF waits for upf-east-edge03"
    );
    approve(&mut data, &child(&list, "upf-east-edge03").1).await?;
    eventually("the SMF approved by ntc", || {
        let mut data = data.clone();
        let parent = parent.clone();
        async move {
            Ok(child(&children(&mut data, &parent).await?, "smf-regional")
                .3
                .then_some(()))
        }
    })
    .await?;
    approve(&mut data, &child(&list, "amf-regional").1).await?;
    let topology = eventually("five in the deployed topology", || {
        let mut data = data.clone();
        let parent = parent.clone();
        async move { Ok(deployed(&mut data, &parent).await?.filter(|t| t.len() == 5)) }
    })
    .await?;
    let smf_entry = topology
        .iter()
        .find(|(id, _)| id == "smf-regional")
        .context("smf")?;
    assert_eq!(
        smf_entry.1,
        [
            "amf-regional",
            "upf-east-edge03",
            "upf-west-edge01",
            "upf-west-edge02"
        ]
    );

    // The NFTopology in the parent package carries the status.
    let status = eventually("status with five deployed", || {
        let mut data = data.clone();
        let parent = parent.clone();
        async move {
            let deployment = data
                .get_deployment(pb::GetRequest { id: parent })
                .await?
                .into_inner();
            let package = Package::from_yaml(&deployment.package_yaml)?;
            let gvk = Gvk::new("topology.nephio.org", "v1alpha1", "NFTopology");
            let status = package
                .get(&gvk, "free5gc")
                .and_then(|o| o.status().cloned())
                .unwrap_or_default();
            Ok((status["numNFDeployed"] == 5).then_some(status))
        }
    })
    .await?;
    let ready = status["conditions"]
        .as_array()
        .and_then(|cs| cs.iter().find(|c| c["type"] == "Ready"))
        .context("Ready")?;
    assert_eq!(ready["status"], "True");
    let packages = status["packages"].as_array().context("packages")?;
    assert!(
        packages.iter().all(|p| p["lifecycle"] == "Approved"),
        "{packages:?}"
    );

    // A deleted child leaves the deployed topology.
    data.delete_deployment(pb::DeleteRequest {
        id: child(&list, "upf-east-edge03").1.clone(),
    })
    .await?;
    eventually("upf-east gone", || {
        let mut data = data.clone();
        let parent = parent.clone();
        async move {
            Ok(deployed(&mut data, &parent).await?.filter(|t| {
                t.len() == 4
                    && !t
                        .iter()
                        .any(|(_, n)| n.iter().any(|x| x == "upf-east-edge03"))
            }))
        }
    })
    .await?;

    // Restart ntc and force the parent to be prepared again: the surviving children are found
    // by their instance keys, not duplicated; the deleted one is created again.
    ntc.stop().await?;
    let ntc = start_ntc(&endpoint).await?;
    let deployment = data
        .get_deployment(pb::GetRequest { id: parent.clone() })
        .await?
        .into_inner();
    let mut package = Package::from_yaml(&deployment.package_yaml)?;
    for object in package.iter_mut() {
        object.remove_annotation(keys::PREPARED);
    }
    // The tracker, started again, reconciles the parent under its lease: retried while busy.
    let mut attempts = 0;
    while let Err(status) = data
        .update_deployment(pb::UpdateDeploymentRequest {
            deployment_id: parent.clone(),
            package_yaml: package.to_yaml(),
            modification_token: String::new(),
        })
        .await
    {
        attempts += 1;
        anyhow::ensure!(
            status.code() == tonic::Code::Aborted && attempts < 100,
            "updating the parent: {status}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let again = eventually("five children again", || {
        let mut data = data.clone();
        let parent = parent.clone();
        async move {
            let list = children(&mut data, &parent).await?;
            Ok((list.len() == 5).then_some(list))
        }
    })
    .await?;
    for key in [
        "amf-regional",
        "smf-regional",
        "upf-west-edge01",
        "upf-west-edge02",
    ] {
        assert_eq!(
            child(&again, key).1,
            child(&list, key).1,
            "{key} kept its deployment"
        );
    }
    assert_ne!(
        child(&again, "upf-east-edge03").1,
        child(&list, "upf-east-edge03").1
    );

    ntc.stop().await?;
    preparer.stop().await?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unknown_class_is_the_preparation_error_and_creates_nothing() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let preparer = start(
        &preparer_command(format!("sqlite:{}", dir.path().join("p.db").display())),
        false,
    )
    .await?;
    let endpoint = preparer.endpoint.to_string();
    let mut data = DataClient::new(nephrite_runtime::dial(&preparer.endpoint).await?);
    register_fixtures(&mut data).await?;
    let classes = example("classes.yaml");
    let without_smf: Vec<&str> = classes
        .split("---\n")
        .filter(|d| !d.contains("name: free5gc-smf"))
        .collect();
    data.register_template(pb::RegisterTemplateRequest {
        id: "broken-topology".into(),
        metadata: Default::default(),
        package_yaml: format!(
            "{}---\n{}",
            example("topology.yaml"),
            without_smf.join("---\n")
        ),
    })
    .await?;
    let ntc = start_ntc(&endpoint).await?;
    let parent = data
        .create_deployment(pb::CreateDeploymentRequest {
            template_id: "broken-topology".into(),
            ..Default::default()
        })
        .await?
        .into_inner()
        .deployment_id;
    let error = eventually("the preparation error", || {
        let mut data = data.clone();
        let parent = parent.clone();
        async move {
            let info = data
                .get_deployment(pb::GetRequest { id: parent })
                .await?
                .into_inner()
                .info
                .context("info")?;
            Ok((!info.error.is_empty()).then_some(info.error))
        }
    })
    .await?;
    assert!(
        error.contains("class free5gc-smf not found (instance smf)"),
        "{error}"
    );
    assert!(children(&mut data, &parent).await?.is_empty());
    ntc.stop().await?;
    preparer.stop().await?;
    Ok(())
}

/// `ntc serve --backend tko` started before the preparer waits for it (with backoff) instead of
/// exiting with "connection refused", then registers once the preparer listens.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ntc_started_before_the_preparer_waits_and_registers() -> anyhow::Result<()> {
    let port = std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port();
    let listen = format!("127.0.0.1:{port}");
    let ntc = tokio::spawn({
        let endpoint = format!("http://{listen}");
        async move { start_ntc(&endpoint).await }
    });
    tokio::time::sleep(Duration::from_millis(800)).await;
    if ntc.is_finished() {
        let outcome = ntc.await?;
        bail!(
            "ntc gave up before the preparer started: {:?}",
            outcome.err()
        );
    }

    let dir = tempfile::tempdir()?;
    let command = preparer_command_on(
        format!("sqlite:{}", dir.path().join("p.db").display()),
        &listen,
    );
    let preparer = start(&command, false).await?;
    let ntc = tokio::time::timeout(Duration::from_secs(15), ntc)
        .await
        .context("ntc still waiting 15 s after the preparer started")???;

    let mut data = DataClient::new(nephrite_runtime::dial(&preparer.endpoint).await?);
    let mut plugins = data
        .list_plugins(pb::ListPluginsRequest::default())
        .await?
        .into_inner();
    let mut names = Vec::new();
    while let Some(plugin) = plugins.message().await? {
        names.push(plugin.name);
    }
    assert_eq!(names, ["ntc"]);
    ntc.stop().await?;
    preparer.stop().await?;
    Ok(())
}
