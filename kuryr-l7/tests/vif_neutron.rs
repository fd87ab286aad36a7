//! `kuryr-l7 vif-handler` against the real Neutron 29 API (`nephrite_test_services::OpenStack`,
//! noauth) and, for the process scenarios, the built binary against `test-apiserver`.
//!
//! One `#[test]` runs the scenarios in turn: under nextest each test is a process, and each
//! would start its own services. Ports stay `DOWN` here (no agents), so activation ends in the
//! "still DOWN" condition after a one-second timeout.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::process::{Child, Command};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{Context, bail, ensure};
use events::event_note;
use futures::future::BoxFuture;
use k8s_openapi::api::core::v1::Pod as KubePod;
use k8s_openapi::api::events::v1::Event as KubeEvent;
use kube::api::{Api, DeleteParams, DynamicObject, PostParams};
use kube::core::{ApiResource, GroupVersionKind};
use nephrite_kuryr_l7::openstack::auth::Credentials;
use nephrite_kuryr_l7::openstack::neutron::Neutron;
use nephrite_kuryr_l7::openstack::{Endpoint, Session};
use nephrite_kuryr_l7::vif::handler::{Backend, Handler, HandlerError, NodeVfs};
use nephrite_kuryr_l7::vif::kube::attachment_resource;
use nephrite_kuryr_l7::vif::neutron::{
    Activation, BackendError, NeutronSettings, NeutronVifs, PodIdentity, pod_tag,
};
use nephrite_test_apiserver::TestApiServer;
use nephrite_test_services::{OpenStack, new_project_id};
use nephrite_vif::annotations::{ADDITIONAL_SUBNETS, SPEC_PORTS};
use nephrite_vif::vfs::Node;
use nephrite_vif::{
    AttachmentFlavor, Config, ContainerResources, Driver, EnabledDrivers, Failure, FailureKind,
    Pod, Target, VIF_ANNOTATION, VifRecord, VnicType,
};
use reqwest::Method;
use serde_json::{Value, json};

const TEST: &str = "vif_handler_against_the_real_neutron";
const BIN: &str = env!("CARGO_BIN_EXE_kuryr-l7");

#[test]
fn vif_handler_against_the_real_neutron() -> anyhow::Result<()> {
    let cloud = match OpenStack::shared() {
        Ok(cloud) => cloud,
        Err(e) => {
            e.skip(TEST);
            return Ok(());
        }
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    runtime.block_on(async {
        let env = Env::new(cloud).await.context("networks and ports")?;
        drivers_give_ports_on_the_right_subnets_with_the_right_vnic_types(&env)
            .await
            .context("additional subnets and specific ports")?;
        sriov_vfs_are_direct_ports_on_their_physnets_subnet(&env)
            .await
            .context("SR-IOV VFs")?;
        a_port_bound_to_another_pod_is_refused_untouched(&env)
            .await
            .context("a taken specific port")?;
        a_bad_request_leaves_nothing_allocated(&env)
            .await
            .context("an unknown subnet")?;
        a_killed_handler_leaves_no_duplicate_or_leaked_port(&env)
            .await
            .context("the binary killed and restarted")?;
        the_directory_source_records_in_files_and_releases_removed_pods(&env)
            .await
            .context("the directory source")?;
        vfs::the_directory_source_counts_vfs_on_its_nodes(&env)
            .await
            .context("the directory source's VFs")?;
        Ok(())
    })
}

struct Env {
    project: String,
    session: Arc<Session>,
    url: String,
    vifs: NeutronVifs,
    pod_subnet: String,
    subnet_a: String,
    subnet_b: String,
    normal_port: String,
    direct_port: String,
}

impl Env {
    async fn new(cloud: &OpenStack) -> anyhow::Result<Env> {
        let project = new_project_id();
        let session = Arc::new(Session::new(
            Credentials::NoAuth {
                project_id: project.clone(),
            },
            Duration::from_secs(60),
        )?);
        let url = cloud.neutron_url();
        let neutron = Neutron::new(session.clone(), Endpoint::Url(url.clone()));
        let mut subnets = Vec::new();
        for (name, cidr) in [
            ("pods", "10.10.0.0/24"),
            ("net-a", "10.11.0.0/24"),
            ("net-b", "10.12.0.0/24"),
        ] {
            let network = neutron.create_network(name, None).await?;
            subnets.push(neutron.create_subnet(name, &network.id, cidr).await?);
        }
        let vifs = NeutronVifs::new(
            session.clone(),
            Endpoint::Url(url.clone()),
            NeutronSettings {
                pod_subnet: Some(subnets[0].id.clone()),
                physnet_subnets: BTreeMap::new(),
                activation_timeout: Duration::from_secs(1),
            },
        );
        let mut env = Env {
            project,
            session,
            url,
            vifs,
            pod_subnet: subnets[0].id.clone(),
            subnet_a: subnets[1].id.clone(),
            subnet_b: subnets[2].id.clone(),
            normal_port: String::new(),
            direct_port: String::new(),
        };
        env.normal_port = env
            .user_port("user-normal", &subnets[1].network_id, "normal")
            .await?;
        env.direct_port = env
            .user_port("user-direct", &subnets[2].network_id, "direct")
            .await?;
        Ok(env)
    }

    /// A port a user made beforehand, with a tag of their own.
    async fn user_port(&self, name: &str, network: &str, vnic: &str) -> anyhow::Result<String> {
        let body = json!({"port": {"name": name, "network_id": network,
            "binding:vnic_type": vnic, "project_id": self.project}});
        let answer: Value = self
            .session
            .send(
                Method::POST,
                format!("{}/v2.0/ports", self.url),
                Some(&body),
            )
            .await?
            .success()?
            .json()?;
        let id = answer["port"]["id"].as_str().context("port id")?.to_owned();
        self.session
            .send(
                Method::PUT,
                format!("{}/v2.0/ports/{id}/tags", self.url),
                Some(&json!({"tags": ["owner:user"]})),
            )
            .await?
            .success()?;
        Ok(id)
    }

    fn handler(&self, drivers: &str) -> Handler {
        Handler::new(
            Config {
                drivers: EnabledDrivers::parse(drivers).unwrap(),
                attachments: AttachmentFlavor::Neutron,
                sriov_resources: BTreeMap::new(),
            },
            Backend::Neutron(self.vifs.clone()),
        )
    }
}

fn pod(name: &str, annotations: &[(&str, String)]) -> (PodIdentity, Pod) {
    let identity = PodIdentity {
        namespace: "shop".into(),
        name: name.into(),
        uid: format!("uid-{}", new_project_id()),
        node: Some("node-1".into()),
    };
    let view = Pod {
        namespace: "shop".into(),
        name: name.into(),
        annotations: annotations
            .iter()
            .map(|(k, v)| ((*k).to_owned(), v.clone()))
            .collect(),
        containers: Vec::new(),
    };
    (identity, view)
}

/// The node lookup of a pod that wants no VF (never asked) or is not scheduled.
fn unscheduled() -> BoxFuture<'static, Result<NodeVfs, String>> {
    Box::pin(async { Ok(NodeVfs::default()) })
}

type Written = Arc<Mutex<Vec<VifRecord>>>;
type PersistFn = Box<dyn Fn(VifRecord) -> BoxFuture<'static, Result<(), String>> + Send + Sync>;

/// A persist callback keeping every record written, in order.
fn recorder() -> (Written, PersistFn) {
    let written = Arc::new(Mutex::new(Vec::new()));
    let sink = written.clone();
    let persist: PersistFn = Box::new(move |record: VifRecord| {
        sink.lock().unwrap().push(record);
        Box::pin(async { Ok(()) })
    });
    (written, persist)
}

/// The ids of the ports whose `device_id` is the pod's, and of those tagged with its tag.
async fn held(
    env: &Env,
    pod: &PodIdentity,
) -> anyhow::Result<(BTreeSet<String>, BTreeSet<String>)> {
    let by_device = env.vifs.ports(&[("device_id", &pod.uid)]).await?;
    let by_tag = env.vifs.tagged_ports(&pod.uid).await?;
    Ok((
        by_device.into_iter().map(|p| p.id).collect(),
        by_tag.into_iter().map(|p| p.id).collect(),
    ))
}

/// additional_subnets and specific_ports (normal and direct): ports on the right subnets with
/// the right vnic types; recorded before activation; a second pass with the record lost finds
/// the same ports; an annotation change releases only what it removed; deleting the pod
/// leaves no port with its tag and the specific ports unbound but present.
async fn drivers_give_ports_on_the_right_subnets_with_the_right_vnic_types(
    env: &Env,
) -> anyhow::Result<()> {
    let handler = env.handler("additional_subnets");
    let subnets = format!(r#"["{}", "{}"]"#, env.subnet_a, env.subnet_b);
    let ports = format!(r#"["{}", "{}"]"#, env.normal_port, env.direct_port);
    let (identity, view) = pod(
        "multi",
        &[(ADDITIONAL_SUBNETS, subnets), (SPEC_PORTS, ports)],
    );
    let (written, persist) = recorder();
    let applied = handler
        .apply(
            &identity,
            &view,
            &[],
            &VifRecord::default(),
            &unscheduled,
            &persist,
        )
        .await?;
    let record = applied.record.clone();
    let names: Vec<&str> = record.vifs.iter().map(|v| v.ifname.as_str()).collect();
    ensure!(
        names == ["eth0", "eth1", "eth2", "eth3", "eth4"],
        "{names:?}"
    );
    ensure!(
        written
            .lock()
            .unwrap()
            .first()
            .is_some_and(|r| r.vifs.len() == 5 && !r.all_active()),
        "the record is written before activation"
    );
    ensure!(
        applied.still_down.len() == 5
            && applied.still_down.iter().all(|a| matches!(a, Activation::StillDown { status, vif_type, .. } if status == "DOWN" && vif_type == "binding_failed")),
        "without agents every port stays DOWN, binding failed: {:?}",
        applied.still_down
    );
    let expect = [
        (&env.pod_subnet, "normal", Driver::Generic),
        (&env.subnet_a, "normal", Driver::AdditionalSubnets),
        (&env.subnet_b, "normal", Driver::AdditionalSubnets),
        (&env.subnet_a, "normal", Driver::Generic),
        (&env.subnet_b, "direct", Driver::Sriov),
    ];
    for (vif, (subnet, vnic, driver)) in record.vifs.iter().zip(expect) {
        let port = env
            .vifs
            .port(&vif.backend_id)
            .await?
            .context("port exists")?;
        ensure!(
            port.fixed_ips.len() == 1 && port.fixed_ips[0].subnet_id == *subnet,
            "{} on {subnet}: {:?}",
            vif.ifname,
            port.fixed_ips
        );
        ensure!(
            port.vnic_type == vnic && vif.driver == driver,
            "{}: {} {:?}",
            vif.ifname,
            port.vnic_type,
            vif.driver
        );
        ensure!(
            port.device_id == identity.uid && port.host_id == "node-1",
            "{} bound to the pod on its node",
            vif.ifname
        );
        ensure!(
            port.tags.contains(&pod_tag(&identity.uid)),
            "{} tagged",
            vif.ifname
        );
        ensure!(
            vif.mac == port.mac_address
                && vif.addresses == [format!("{}/24", port.fixed_ips[0].ip_address)],
            "{} records MAC and address",
            vif.ifname
        );
    }
    ensure!(record.vifs[4].vnic_type == VnicType::Direct);

    // The handler died before recording: the same ports are found again, none is added.
    let again = handler
        .apply(
            &identity,
            &view,
            &[],
            &VifRecord::default(),
            &unscheduled,
            &persist,
        )
        .await?;
    let ids = |r: &VifRecord| {
        r.vifs
            .iter()
            .map(|v| v.backend_id.clone())
            .collect::<Vec<_>>()
    };
    ensure!(ids(&again.record) == ids(&record), "same ports found again");
    let (by_device, by_tag) = held(env, &identity).await?;
    ensure!(
        by_device.len() == 5 && by_tag.len() == 5,
        "no duplicate: {by_device:?}"
    );

    // Dropping subnet b from the annotation releases eth2 only.
    let mut fewer = view.clone();
    fewer.annotations.insert(
        ADDITIONAL_SUBNETS.to_owned(),
        format!(r#"["{}"]"#, env.subnet_a),
    );
    let updated = handler
        .apply(
            &identity,
            &fewer,
            &[],
            &again.record,
            &unscheduled,
            &persist,
        )
        .await?;
    let kept: Vec<(&str, &str)> = updated
        .record
        .vifs
        .iter()
        .map(|v| (v.ifname.as_str(), v.backend_id.as_str()))
        .collect();
    let before: Vec<(&str, &str)> = record
        .vifs
        .iter()
        .filter(|v| v.ifname != "eth2")
        .map(|v| (v.ifname.as_str(), v.backend_id.as_str()))
        .collect();
    ensure!(kept == before, "the others stay: {kept:?}");
    ensure!(
        env.vifs.port(&record.vifs[2].backend_id).await?.is_none(),
        "eth2's port deleted"
    );

    // The pod goes.
    handler.cleanup(&identity, &updated.record).await?;
    let (by_device, by_tag) = held(env, &identity).await?;
    ensure!(
        by_device.is_empty() && by_tag.is_empty(),
        "nothing left: {by_device:?} {by_tag:?}"
    );
    for id in [&env.normal_port, &env.direct_port] {
        let port = env
            .vifs
            .port(id)
            .await?
            .context("a specific port is never deleted")?;
        ensure!(
            port.device_id.is_empty() && port.device_owner.is_empty() && port.host_id.is_empty(),
            "{id} unbound: {port:?}"
        );
        ensure!(
            port.tags == ["owner:user"],
            "only the pod's tag removed: {:?}",
            port.tags
        );
    }
    ensure!(env.vifs.port(&env.direct_port).await?.unwrap().vnic_type == "direct");
    Ok(())
}

/// VFs requested in both resource forms become `direct` ports on the subnet configured for
/// their physical network.
async fn sriov_vfs_are_direct_ports_on_their_physnets_subnet(env: &Env) -> anyhow::Result<()> {
    let handler = Handler::new(
        Config {
            drivers: EnabledDrivers::parse("sriov")?,
            attachments: AttachmentFlavor::Neutron,
            sriov_resources: BTreeMap::from([(
                "intel.com/sriov_a".to_owned(),
                "physnet2".to_owned(),
            )]),
        },
        Backend::Neutron(NeutronVifs::new(
            env.session.clone(),
            Endpoint::Url(env.url.clone()),
            NeutronSettings {
                pod_subnet: Some(env.pod_subnet.clone()),
                physnet_subnets: BTreeMap::from([("physnet2".to_owned(), env.subnet_b.clone())]),
                activation_timeout: Duration::from_secs(1),
            },
        )),
    );
    let (identity, mut view) = pod("vfs", &[]);
    view.containers = vec![ContainerResources {
        name: "app".into(),
        requests: BTreeMap::from([(
            "pod.alpha.kubernetes.io/opaque-int-resource-sriov-vf-physnet2".into(),
            "1".into(),
        )]),
        limits: BTreeMap::from([("intel.com/sriov_a".into(), "1".into())]),
    }];
    let (_, persist) = recorder();
    let node = |vfs: &str| {
        let seen = NodeVfs {
            node: Some(Node {
                name: "node-1".into(),
                allocatable: BTreeMap::from([
                    ("intel.com/sriov_a".to_owned(), "1".to_owned()),
                    (
                        "pod.alpha.kubernetes.io/opaque-int-resource-sriov-vf-physnet2".to_owned(),
                        vfs.to_owned(),
                    ),
                ]),
            }),
            pods: Vec::new(),
        };
        move || -> BoxFuture<'static, Result<NodeVfs, String>> {
            let seen = seen.clone();
            Box::pin(async move { Ok(seen) })
        }
    };
    let short = handler
        .apply(
            &identity,
            &view,
            &[],
            &VifRecord::default(),
            &node("0"),
            &persist,
        )
        .await
        .err()
        .context("one VF advertised, two wanted")?;
    ensure!(
        short.to_string()
            == "node node-1 has 1 free VFs on physnet physnet2 (intel.com/sriov_a, pod.alpha.kubernetes.io/opaque-int-resource-sriov-vf-physnet2: 1 allocatable, 0 held by its pods); the pod wants 2 more",
        "{short}"
    );
    let (by_device, _) = held(env, &identity).await?;
    ensure!(by_device.is_empty(), "nothing allocated while short");
    let applied = handler
        .apply(
            &identity,
            &view,
            &[],
            &VifRecord::default(),
            &node("1"),
            &persist,
        )
        .await?;
    ensure!(applied.record.vifs.len() == 3, "{:?}", applied.record);
    for vif in &applied.record.vifs[1..] {
        let port = env.vifs.port(&vif.backend_id).await?.context("VF port")?;
        ensure!(
            port.vnic_type == "direct"
                && vif.driver == Driver::Sriov
                && port.fixed_ips[0].subnet_id == env.subnet_b,
            "{}: {port:?}",
            vif.ifname
        );
    }
    handler.cleanup(&identity, &applied.record).await?;
    let (by_device, by_tag) = held(env, &identity).await?;
    ensure!(by_device.is_empty() && by_tag.is_empty(), "released");

    // Two pods race for the node's one VF, and the source has seen neither's record: the
    // handler's decisions take turns and count what it recorded itself, so exactly one wins.
    let racer = |name: &str| {
        let (identity, mut view) = pod(name, &[]);
        view.containers = vec![ContainerResources {
            name: "app".into(),
            requests: BTreeMap::from([(
                "pod.alpha.kubernetes.io/opaque-int-resource-sriov-vf-physnet2".into(),
                "1".into(),
            )]),
            limits: BTreeMap::new(),
        }];
        (identity, view)
    };
    let (a, a_view) = racer("race-a");
    let (b, b_view) = racer("race-b");
    let (stale_a, stale_b) = (node("0"), node("0"));
    let none = VifRecord::default();
    let (won_a, won_b) = futures::join!(
        handler.apply(&a, &a_view, &[], &none, &stale_a, &persist),
        handler.apply(&b, &b_view, &[], &none, &stale_b, &persist),
    );
    let (winner, record, loser, refusal) = match (won_a, won_b) {
        (Ok(applied), Err(e)) => (&a, applied.record, &b, e),
        (Err(e), Ok(applied)) => (&b, applied.record, &a, e),
        other => bail!("exactly one pod gets the VF: {other:?}"),
    };
    ensure!(
        matches!(refusal, HandlerError::Vfs(_)) && refusal.to_string().contains("0 free VFs"),
        "{refusal}"
    );
    let (by_device, _) = held(env, loser).await?;
    ensure!(
        by_device.is_empty(),
        "the loser holds nothing: {by_device:?}"
    );
    handler.cleanup(winner, &record).await?;
    let (by_device, _) = held(env, winner).await?;
    ensure!(by_device.is_empty(), "released");
    Ok(())
}

async fn a_port_bound_to_another_pod_is_refused_untouched(env: &Env) -> anyhow::Result<()> {
    let handler = env.handler("");
    let ports = format!(r#"["{}"]"#, env.normal_port);
    let (owner, owner_view) = pod("owner", &[(SPEC_PORTS, ports.clone())]);
    let (_, persist) = recorder();
    let owned = handler
        .apply(
            &owner,
            &owner_view,
            &[],
            &VifRecord::default(),
            &unscheduled,
            &persist,
        )
        .await?;
    let before = env.vifs.port(&env.normal_port).await?.context("port")?;

    let (thief, thief_view) = pod("thief", &[(SPEC_PORTS, ports)]);
    match handler
        .apply(
            &thief,
            &thief_view,
            &[],
            &VifRecord::default(),
            &unscheduled,
            &persist,
        )
        .await
    {
        Err(HandlerError::Backend(BackendError::PortTaken { port, device_id })) => {
            ensure!(port == env.normal_port && device_id == owner.uid);
        }
        other => bail!("expected PortTaken, got {other:?}"),
    }
    ensure!(
        env.vifs.port(&env.normal_port).await?.as_ref() == Some(&before),
        "the port is untouched"
    );
    let (by_device, by_tag) = held(env, &thief).await?;
    ensure!(
        by_device.is_empty() && by_tag.is_empty(),
        "the refused pod holds nothing (its main VIF was released)"
    );
    handler.cleanup(&owner, &owned.record).await?;
    Ok(())
}

async fn a_bad_request_leaves_nothing_allocated(env: &Env) -> anyhow::Result<()> {
    let handler = env.handler("additional_subnets");
    let missing = "0f8fad5b-d9cb-469f-a165-70867728950e";
    let (identity, view) = pod(
        "lost",
        &[(
            ADDITIONAL_SUBNETS,
            format!(r#"["{}", "{missing}"]"#, env.subnet_a),
        )],
    );
    let (written, persist) = recorder();
    let error = handler
        .apply(
            &identity,
            &view,
            &[],
            &VifRecord::default(),
            &unscheduled,
            &persist,
        )
        .await
        .err()
        .context("an unknown subnet is refused")?;
    let expected = format!(
        "annotation openstack.org/kuryr-additional-subnets: subnet {missing} does not exist"
    );
    ensure!(error.to_string() == expected, "{error}");
    let recorded = written.lock().unwrap().clone();
    ensure!(
        recorded.len() == 1
            && recorded[0].vifs.is_empty()
            && recorded[0].failure
                == Some(Failure {
                    kind: FailureKind::Invalid,
                    message: expected,
                }),
        "only the failure recorded, no VIF: {recorded:?}"
    );
    let (by_device, by_tag) = held(env, &identity).await?;
    ensure!(
        by_device.is_empty() && by_tag.is_empty(),
        "nothing half-allocated"
    );

    // A specific port that does not exist: named, nothing allocated (the main VIF made in the
    // same pass is deleted again).
    let (identity, view) = pod("portless", &[(SPEC_PORTS, format!(r#"["{missing}"]"#))]);
    let (written, persist) = recorder();
    let error = handler
        .apply(
            &identity,
            &view,
            &[],
            &VifRecord::default(),
            &unscheduled,
            &persist,
        )
        .await
        .err()
        .context("an unknown port is refused")?;
    let expected = format!("annotation spec-ports: port {missing} does not exist");
    ensure!(error.to_string() == expected, "{error}");
    ensure!(
        written
            .lock()
            .unwrap()
            .iter()
            .all(|r| r.vifs.is_empty() && r.failure.as_ref().is_some_and(|f| f.message == expected)),
        "only the failure recorded"
    );
    let (by_device, by_tag) = held(env, &identity).await?;
    ensure!(
        by_device.is_empty() && by_tag.is_empty(),
        "nothing half-allocated: {by_device:?}"
    );
    Ok(())
}

#[path = "support/events.rs"]
mod events;
#[path = "vif_neutron/processes.rs"]
mod processes;
#[path = "vif_neutron/vfs.rs"]
mod vfs;
use processes::{
    a_killed_handler_leaves_no_duplicate_or_leaked_port,
    the_directory_source_records_in_files_and_releases_removed_pods,
};
