use std::collections::BTreeMap;

use proptest::prelude::*;
use serde_json::json;

use super::*;

const ID: &str = "5a7e0000-0000-4000-8000-000000000001";

fn spec() -> serde_json::Value {
    json!({
        "apiVersion": API_VERSION, "kind": PROVIDER_SPEC_KIND,
        "siteId": ID, "tenantId": ID, "vpcId": ID, "subnetId": ID, "instanceTypeId": ID,
        "userDataSecret": {"name": "worker-user-data"},
        "credentialsSecret": {"name": "bmm-credentials", "namespace": "openshift-machine-api"},
    })
}

fn instance(status: &str) -> CloudInstance {
    CloudInstance {
        id: "i-1".into(),
        name: "m".into(),
        vpc_id: ID.into(),
        status: status.into(),
        labels: BTreeMap::new(),
        machine_id: None,
        addresses: vec![],
    }
}

#[test]
fn a_complete_provider_spec_is_read() {
    let s = read_provider_spec(Some(&spec())).expect("valid");
    assert_eq!(s.site_id, ID);
    assert_eq!(
        s.user_data_secret.expect("user data").name,
        "worker-user-data"
    );
    assert_eq!(
        s.credentials_secret.namespace.as_deref(),
        Some("openshift-machine-api")
    );
}

#[test]
fn every_problem_of_a_provider_spec_is_named() {
    let mut bad = spec();
    bad["kind"] = json!("AWSMachineProviderConfig");
    bad["vpcId"] = json!("vpc-1");
    bad.as_object_mut().expect("object").remove("subnetId");
    bad["credentialsSecret"] = json!({});
    let problems = read_provider_spec(Some(&bad)).expect_err("invalid");
    for expected in [
        "kind must be",
        "vpcId \"vpc-1\" is not a UUID",
        "subnetId is required",
        "credentialsSecret.name is required",
    ] {
        assert!(
            problems.iter().any(|p| p.contains(expected)),
            "{expected}: {problems:?}"
        );
    }
    assert_eq!(
        read_provider_spec(None).expect_err("missing"),
        vec!["spec.providerSpec.value is missing".to_string()]
    );
}

#[test]
fn steps_follow_the_machine_and_its_instance() {
    assert_eq!(
        decide_machine_api(false, false, None, true),
        MachineApiStep::AddFinalizer
    );
    assert_eq!(
        decide_machine_api(false, true, None, true),
        MachineApiStep::Create
    );
    assert_eq!(
        decide_machine_api(false, true, Some(&instance("Provisioning")), true),
        MachineApiStep::Report {
            instance_id: "i-1".into(),
            phase: "Provisioned"
        }
    );
    assert_eq!(
        decide_machine_api(false, true, Some(&instance("Ready")), true),
        MachineApiStep::Report {
            instance_id: "i-1".into(),
            phase: "Running"
        }
    );
    // Ready without a Node yet: the instance exists, the host has not joined.
    assert_eq!(
        decide_machine_api(false, true, Some(&instance("Ready")), false),
        MachineApiStep::Report {
            instance_id: "i-1".into(),
            phase: "Provisioned"
        }
    );
    assert_eq!(
        decide_machine_api(true, true, Some(&instance("Ready")), true),
        MachineApiStep::DeleteInstance("i-1".into())
    );
    assert_eq!(
        decide_machine_api(true, true, Some(&instance("Terminating")), true),
        MachineApiStep::AwaitDeletion
    );
    assert_eq!(
        decide_machine_api(true, true, None, true),
        MachineApiStep::RemoveFinalizer
    );
    assert_eq!(
        decide_machine_api(true, false, None, true),
        MachineApiStep::Nothing
    );
}

proptest! {
    /// Nothing is created without the finalizer, nor while deleting, nor when an instance
    /// exists; the finalizer goes only when no instance is left.
    #[test]
    fn creates_only_with_the_finalizer_and_no_instance(
        deleting in any::<bool>(),
        finalizer in any::<bool>(),
        linked in any::<bool>(),
        status in proptest::option::of(prop_oneof![
            Just("Pending".to_string()), Just("Ready".to_string()),
            Just("Terminating".to_string()), Just("Error".to_string()), "[A-Za-z]{0,8}"
        ]),
    ) {
        let i = status.as_deref().map(instance);
        let step = decide_machine_api(deleting, finalizer, i.as_ref(), linked);
        if step == MachineApiStep::Create {
            prop_assert!(finalizer && !deleting && i.is_none());
        }
        if step == MachineApiStep::RemoveFinalizer {
            prop_assert!(i.is_none());
        }
        // `Running` needs a linked Node (the Machine API's meaning of the phase).
        if let MachineApiStep::Report { phase: "Running", .. } = step {
            prop_assert!(linked);
        }
    }
}
