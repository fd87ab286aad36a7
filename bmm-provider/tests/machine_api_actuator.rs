//! The OpenShift Machine API actuator against bmm-sim: Create adopts instead of duplicating,
//! Update reports the provider ID and addresses, Exists is false once the instance is
//! Terminating, Delete is idempotent.

mod support;

use std::time::Duration;

use nephrite_bmm::crd::NvidiaBMMMachineSpec;
use nephrite_bmm_provider::machine_api_actuator::{
    Actuator, ActuatorError, BmmActuator, MachineApiMachine,
};
use nephrite_bmm_provider::observe::{ClusterRecord, network_ready, reconcile_cluster};
use nephrite_bmm_sim::Kind;
use serde_json::json;
use support::{Harness, eventually, fast_config};

async fn provisioned_cluster(h: &Harness) -> ClusterRecord {
    let client = h.client();
    let mut record = ClusterRecord {
        namespace: "openshift-machine-api".into(),
        name: "ocp".into(),
        spec: serde_json::from_value(json!({
            "siteRef": {"name": "sim-site"},
            "vpc": {"name": "ocp-vpc"},
            "subnets": [{"name": "workers", "cidr": "10.9.0.0/24", "role": "worker"}]
        }))
        .expect("spec"),
        status: Default::default(),
        finalizer: true,
        control_plane_endpoint: None,
        labels: Default::default(),
    };
    for _ in 0..200 {
        reconcile_cluster(&client, &mut record, false, None)
            .await
            .expect("cluster reconcile");
        if network_ready(&record.status) {
            return record;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("the network never became Ready: {:?}", record.status);
}

fn machine(name: &str) -> MachineApiMachine {
    let spec: NvidiaBMMMachineSpec = serde_json::from_value(json!({
        "instanceType": {"id": nephrite_bmm_sim::INSTANCE_TYPE_ID},
        "network": {"subnetName": "workers"}
    }))
    .expect("provider spec");
    MachineApiMachine {
        namespace: "openshift-machine-api".into(),
        name: name.into(),
        provider_spec: spec,
        user_data: Some("#cloud-config\n".into()),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_actuator_creates_updates_and_deletes_without_duplicates() {
    let h = Harness::start(fast_config()).await;
    let not_yet = BmmActuator::new(
        h.client(),
        ClusterRecord {
            status: Default::default(),
            ..provisioned_cluster(&h).await
        },
    );
    let m = machine("worker-0");
    assert!(matches!(
        not_yet.create(&m).await,
        Err(ActuatorError::NetworkNotReady(_))
    ));
    let cluster = provisioned_cluster(&h).await;
    let actuator = BmmActuator::new(h.client(), cluster);

    assert!(!actuator.exists(&m).await.expect("exists"));
    let created = actuator.create(&m).await.expect("create");
    assert!(created.instance_id.is_some());
    assert!(actuator.exists(&m).await.expect("exists"));
    // A Create repeated (the Machine API retried after a crash) adopts.
    actuator.create(&m).await.expect("create again");
    assert_eq!(h.sim.created(Kind::Instance), 1);

    let ready = eventually(Duration::from_secs(20), || async {
        actuator.update(&m).await.ok().filter(|s| s.ready)
    })
    .await;
    let provider_id = ready.provider_id.expect("providerID");
    assert!(provider_id.starts_with(&format!("nvidia-bmm://{}/", h.sim.site_id())));
    assert!(
        ready
            .addresses
            .iter()
            .any(|a| a.address.starts_with("10.9.0.")),
        "{:?}",
        ready.addresses
    );

    actuator.delete(&m).await.expect("delete");
    assert!(
        !actuator.exists(&m).await.expect("exists"),
        "a Terminating instance does not exist for the Machine API"
    );
    actuator.delete(&m).await.expect("delete again");
    eventually(Duration::from_secs(20), || async {
        (h.sim.live(Kind::Instance) == 0).then_some(())
    })
    .await;
    actuator.delete(&m).await.expect("delete once gone");
    assert_eq!(h.sim.created(Kind::Instance), 1, "never created twice");
    h.assert_contract_held();
}
