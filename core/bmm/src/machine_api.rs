//! The OpenShift Machine API (`machine.openshift.io/v1beta1`) on BMM, pure: reading a
//! Machine's `spec.providerSpec.value` (`NvidiaBMMMachineProviderSpec`) with every problem
//! named, and what the Machine controller does next for a Machine given what BMM showed.
//!
//! The order that keeps instances from leaking or doubling: the finalizer is persisted before
//! any create; an instance is looked for (by the id in `status.providerStatus`, else by the
//! Machine's name) before one is created, so a crash between the create and the status write
//! adopts; the finalizer goes only once the instance answers 404.

use serde::{Deserialize, Serialize};

use crate::cloud::{CloudInstance, Lifecycle};

/// The providerSpec's `apiVersion`.
pub const API_VERSION: &str = "machine.openshift.io/v1beta1";
/// The providerSpec's `kind`.
pub const PROVIDER_SPEC_KIND: &str = "NvidiaBMMMachineProviderSpec";
/// The providerStatus's `kind`.
pub const PROVIDER_STATUS_KIND: &str = "NvidiaBMMMachineProviderStatus";
/// The Machine API's finalizer on Machines.
pub const MACHINE_FINALIZER: &str = "machine.machine.openshift.io";
/// The annotation carrying the instance's state.
pub const INSTANCE_STATE_ANNOTATION: &str = "machine.openshift.io/instance-state";
/// The annotation on a Node naming its Machine (`namespace/name`), as OpenShift's nodelink
/// controller writes it.
pub const NODE_MACHINE_ANNOTATION: &str = "machine.openshift.io/machine";
/// `status.errorReason` of a Machine whose providerSpec cannot be used.
pub const INVALID_CONFIGURATION: &str = "InvalidConfiguration";

/// A Secret named by the providerSpec.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SecretName {
    /// Its name.
    pub name: String,
    /// Its namespace (the Machine's when absent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
}

/// `NvidiaBMMMachineProviderSpec`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ProviderSpec {
    /// The BMM site.
    pub site_id: String,
    /// The tenant the instance belongs to.
    pub tenant_id: String,
    /// The VPC of the instance.
    pub vpc_id: String,
    /// The subnet of its primary interface.
    pub subnet_id: String,
    /// Its instance type.
    pub instance_type_id: String,
    /// The Secret with the user data (key `userData`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user_data_secret: Option<SecretName>,
    /// The Secret with the BMM credentials (`endpoint`, `orgName`, `token`).
    pub credentials_secret: SecretName,
}

fn is_uuid(text: &str) -> bool {
    let groups: Vec<&str> = text.split('-').collect();
    groups.len() == 5
        && groups
            .iter()
            .zip([8, 4, 4, 4, 12])
            .all(|(g, n)| g.len() == n && g.chars().all(|c| c.is_ascii_hexdigit()))
}

/// Reads `spec.providerSpec.value`; every problem found, each naming its field.
pub fn read_provider_spec(value: Option<&serde_json::Value>) -> Result<ProviderSpec, Vec<String>> {
    let Some(value) = value else {
        return Err(vec!["spec.providerSpec.value is missing".into()]);
    };
    let mut problems = Vec::new();
    let field = |name: &str| value.get(name).and_then(serde_json::Value::as_str);
    if field("apiVersion") != Some(API_VERSION) {
        problems.push(format!(
            "spec.providerSpec.value.apiVersion must be {API_VERSION}"
        ));
    }
    if field("kind") != Some(PROVIDER_SPEC_KIND) {
        problems.push(format!(
            "spec.providerSpec.value.kind must be {PROVIDER_SPEC_KIND}"
        ));
    }
    for id in ["siteId", "tenantId", "vpcId", "subnetId", "instanceTypeId"] {
        match field(id) {
            Some(v) if is_uuid(v) => {}
            Some(v) => problems.push(format!("spec.providerSpec.value.{id} {v:?} is not a UUID")),
            None => problems.push(format!("spec.providerSpec.value.{id} is required")),
        }
    }
    let name_of = |key: &str| {
        value
            .get(key)
            .and_then(|s| s.get("name"))
            .and_then(serde_json::Value::as_str)
            .is_some_and(|n| !n.trim().is_empty())
    };
    if !name_of("credentialsSecret") {
        problems.push("spec.providerSpec.value.credentialsSecret.name is required".into());
    }
    if value.get("userDataSecret").is_some_and(|v| !v.is_null()) && !name_of("userDataSecret") {
        problems.push("spec.providerSpec.value.userDataSecret.name is required".into());
    }
    if !problems.is_empty() {
        return Err(problems);
    }
    serde_json::from_value(value.clone()).map_err(|e| vec![format!("spec.providerSpec.value: {e}")])
}

/// What the controller does next for one Machine.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MachineApiStep {
    /// Persist the finalizer (before anything is created).
    AddFinalizer,
    /// Create the instance (none exists under the Machine's id or name).
    Create,
    /// Report the instance (provider ID, addresses, providerStatus, phase).
    Report {
        /// The instance.
        instance_id: String,
        /// The Machine API phase: `Provisioned` until the instance is Ready and a Node is
        /// linked (`status.nodeRef`), then `Running`; `Failed` in Error.
        phase: &'static str,
    },
    /// Delete the instance.
    DeleteInstance(String),
    /// The instance is going: look again later.
    AwaitDeletion,
    /// The instance is gone: remove the finalizer.
    RemoveFinalizer,
    /// Nothing to do (deleted Machine without our finalizer).
    Nothing,
}

/// The Machine API phase of a Machine whose instance is in `status`: `Running` once the
/// instance is Ready and its Node is linked (as the Machine API's own controller says
/// `Running` only with a `nodeRef`), `Provisioned` while it exists without both.
pub fn phase_of(status: &str, node_linked: bool) -> &'static str {
    match Lifecycle::of(status) {
        Lifecycle::Ready if node_linked => "Running",
        Lifecycle::Ready => "Provisioned",
        Lifecycle::Error => "Failed",
        Lifecycle::Deleting => "Deleting",
        Lifecycle::InProgress => "Provisioned",
    }
}

/// Decides the next step from whether the Machine is being deleted, whether it carries the
/// finalizer, its instance (`None` when neither its recorded id nor its name found one) and
/// whether a Node with its provider ID is linked to it.
pub fn decide_machine_api(
    deleting: bool,
    has_finalizer: bool,
    instance: Option<&CloudInstance>,
    node_linked: bool,
) -> MachineApiStep {
    match (deleting, has_finalizer, instance) {
        (true, false, _) => MachineApiStep::Nothing,
        (true, true, None) => MachineApiStep::RemoveFinalizer,
        (true, true, Some(i)) if Lifecycle::of(&i.status) == Lifecycle::Deleting => {
            MachineApiStep::AwaitDeletion
        }
        (true, true, Some(i)) => MachineApiStep::DeleteInstance(i.id.clone()),
        (false, false, _) => MachineApiStep::AddFinalizer,
        (false, true, None) => MachineApiStep::Create,
        (false, true, Some(i)) => MachineApiStep::Report {
            instance_id: i.id.clone(),
            phase: phase_of(&i.status, node_linked),
        },
    }
}

#[cfg(test)]
mod tests;
