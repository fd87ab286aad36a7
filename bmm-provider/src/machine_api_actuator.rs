//! An OpenShift Machine API actuator: the four operations the Machine API's machine controller
//! calls (Create, Update, Exists, Delete) as a library trait, and its implementation on BMM
//! with the same decisions as the Cluster API controllers — so a Create repeated after a crash
//! adopts the instance instead of making a second one.
//!
//! `Exists` is true only for an instance of the machine's name that is not Terminating: the
//! Machine API calls Delete until Exists turns false, and a Terminating instance must not keep
//! a deleted Machine around, nor be "updated".

use std::future::Future;

use nephrite_bmm::cloud::Lifecycle;
use nephrite_bmm::crd::{MachineAddress, NvidiaBMMMachineSpec};

use crate::client::{ApiError, BmmClient};
use crate::observe::{
    ClusterRecord, MachineRecord, ReconcileError, network_ready, reconcile_machine,
};

/// A Machine API `Machine` as the actuator needs it.
#[derive(Debug, Clone, PartialEq)]
pub struct MachineApiMachine {
    /// Namespace of the Machine.
    pub namespace: String,
    /// Name of the Machine (and of the instance).
    pub name: String,
    /// `spec.providerSpec.value`: the same fields as an `NvidiaBMMMachine`'s spec.
    pub provider_spec: NvidiaBMMMachineSpec,
    /// The user data (from the Machine's user-data Secret).
    pub user_data: Option<String>,
}

/// What the actuator reports back for the Machine's `spec.providerID` and `status`.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct MachineState {
    /// `nvidia-bmm://<site>/<instance>`, once the instance exists.
    pub provider_id: Option<String>,
    /// The instance's id.
    pub instance_id: Option<String>,
    /// The instance's status (`Pending`, `Ready`, …).
    pub instance_state: Option<String>,
    /// InternalIP and Hostname addresses, once Ready.
    pub addresses: Vec<MachineAddress>,
    /// Whether the instance is Ready.
    pub ready: bool,
}

/// A failed actuator call.
#[derive(Debug, thiserror::Error)]
pub enum ActuatorError {
    /// The cluster's network is not Ready yet (retry later).
    #[error("cluster {0}: network is not Ready yet")]
    NetworkNotReady(String),
    /// The BMM reconcile failed.
    #[error(transparent)]
    Reconcile(#[from] ReconcileError),
    /// An API call failed.
    #[error("machine {machine}: {source}")]
    Api {
        /// The machine.
        machine: String,
        /// The failure.
        #[source]
        source: ApiError,
    },
}

/// The Machine API actuator operations.
pub trait Actuator {
    /// Creates the machine's instance (adopting one of its name); returns its state.
    fn create(
        &self,
        machine: &MachineApiMachine,
    ) -> impl Future<Output = Result<MachineState, ActuatorError>> + Send;
    /// Refreshes the machine's state (and finishes a create that was interrupted).
    fn update(
        &self,
        machine: &MachineApiMachine,
    ) -> impl Future<Output = Result<MachineState, ActuatorError>> + Send;
    /// Whether an instance of the machine's name exists and is not Terminating.
    fn exists(
        &self,
        machine: &MachineApiMachine,
    ) -> impl Future<Output = Result<bool, ActuatorError>> + Send;
    /// Starts deleting the machine's instance (a no-op once it is Terminating or gone).
    fn delete(
        &self,
        machine: &MachineApiMachine,
    ) -> impl Future<Output = Result<(), ActuatorError>> + Send;
}

/// The actuator on BMM, for machines of one provisioned cluster.
pub struct BmmActuator {
    client: BmmClient,
    cluster: ClusterRecord,
}

impl BmmActuator {
    /// An actuator for machines of `cluster` (its status carries the network's ids).
    pub fn new(client: BmmClient, cluster: ClusterRecord) -> BmmActuator {
        BmmActuator { client, cluster }
    }

    fn record(&self, machine: &MachineApiMachine) -> MachineRecord {
        MachineRecord {
            namespace: machine.namespace.clone(),
            name: machine.name.clone(),
            cluster: self.cluster.name.clone(),
            control_plane: false,
            spec: machine.provider_spec.clone(),
            status: Default::default(),
            finalizer: true,
            bootstrap: machine.user_data.clone(),
            bootstrap_required: false,
            failure_domain: None,
            provisioned_in: None,
        }
    }

    async fn reconcile(
        &self,
        machine: &MachineApiMachine,
        deleting: bool,
    ) -> Result<MachineState, ActuatorError> {
        if !deleting && !network_ready(&self.cluster.status) {
            return Err(ActuatorError::NetworkNotReady(self.cluster.name.clone()));
        }
        let mut record = self.record(machine);
        reconcile_machine(&self.client, &self.cluster, &mut record, deleting).await?;
        Ok(MachineState {
            provider_id: record.spec.provider_id,
            instance_id: record.status.instance_id,
            instance_state: record.status.instance_state,
            addresses: record.status.addresses,
            ready: record.status.ready,
        })
    }
}

impl Actuator for BmmActuator {
    async fn create(&self, machine: &MachineApiMachine) -> Result<MachineState, ActuatorError> {
        self.reconcile(machine, false).await
    }

    async fn update(&self, machine: &MachineApiMachine) -> Result<MachineState, ActuatorError> {
        self.reconcile(machine, false).await
    }

    async fn exists(&self, machine: &MachineApiMachine) -> Result<bool, ActuatorError> {
        let Some(site) = self.cluster.status.site_id.as_deref() else {
            return Ok(false);
        };
        let instances = self
            .client
            .instances_named(site, &machine.name)
            .await
            .map_err(|source| ActuatorError::Api {
                machine: machine.name.clone(),
                source,
            })?;
        Ok(instances.iter().any(|i| {
            i.name == machine.name
                && Lifecycle::of(i.status.as_deref().unwrap_or_default()) != Lifecycle::Deleting
        }))
    }

    async fn delete(&self, machine: &MachineApiMachine) -> Result<(), ActuatorError> {
        self.reconcile(machine, true).await.map(|_| ())
    }
}
