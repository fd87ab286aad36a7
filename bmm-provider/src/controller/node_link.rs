//! Machine ↔ Node links for the Machine API controller, as OpenShift's nodelink controller
//! makes them: a Node whose `spec.providerID` is a Machine's becomes its `status.nodeRef`, and
//! the Node is annotated `machine.openshift.io/machine: <namespace>/<name>`.
//!
//! The Node watch records each Node's provider ID here and wakes the Machine of that provider
//! ID (known once a reconcile reported it), so a Node that joins after its Machine was
//! reported is linked at once, whichever of the two the controller saw first.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use k8s_openapi::api::core::v1::Node;
use kube::api::{Api, DynamicObject, Patch, PatchParams};
use kube::runtime::reflector::ObjectRef;
use nephrite_bmm::machine_api::NODE_MACHINE_ANNOTATION;
use serde_json::{Value, json};

use super::machine_api_controller::machine_resource;

#[derive(Default)]
struct Links {
    /// Node name per provider ID, as the watch last delivered it.
    nodes: HashMap<String, String>,
    /// The Machine per provider ID, as its last reconcile reported it.
    machines: HashMap<String, ObjectRef<DynamicObject>>,
}

/// Nodes and Machines by provider ID. Cheap to clone; clones share the maps.
#[derive(Clone, Default)]
pub(super) struct NodeLinks(Arc<Mutex<Links>>);

impl NodeLinks {
    fn links(&self) -> std::sync::MutexGuard<'_, Links> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The Node watch's mapper: records the Node and names the Machine to reconcile.
    pub(super) fn node_seen(&self, node: &Node) -> Option<ObjectRef<DynamicObject>> {
        let provider_id = node.spec.as_ref()?.provider_id.clone()?;
        let name = node.metadata.name.clone()?;
        let mut links = self.links();
        let machine = links.machines.get(&provider_id).cloned();
        links.nodes.insert(provider_id, name);
        machine
    }

    /// Records that the Machine `namespace/name` has `provider_id`; the name of the Node the
    /// watch saw with it, if any.
    pub(super) fn machine_reported(
        &self,
        namespace: &str,
        name: &str,
        provider_id: &str,
    ) -> Option<String> {
        let mut links = self.links();
        links.machines.insert(
            provider_id.to_string(),
            ObjectRef::new_with(name, machine_resource()).within(namespace),
        );
        links.nodes.get(provider_id).cloned()
    }

    /// Forgets a Machine that is gone.
    pub(super) fn machine_gone(&self, provider_id: &str) {
        self.links().machines.remove(provider_id);
    }
}

/// The `status.nodeRef` of the Node `candidate` (from [`NodeLinks::machine_reported`]) when
/// it still exists with `provider_id`, after annotating it with its Machine; `None` otherwise.
pub(super) async fn link(
    nodes: &Api<Node>,
    candidate: Option<String>,
    provider_id: &str,
    machine: (&str, &str),
) -> Result<Option<Value>, kube::Error> {
    let Some(name) = candidate else {
        return Ok(None);
    };
    let Some(node) = nodes.get_opt(&name).await? else {
        return Ok(None);
    };
    if node.spec.as_ref().and_then(|s| s.provider_id.as_deref()) != Some(provider_id) {
        return Ok(None);
    }
    let owner = format!("{}/{}", machine.0, machine.1);
    let annotated = node
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(NODE_MACHINE_ANNOTATION))
        == Some(&owner);
    if !annotated {
        nodes
            .patch(
                &name,
                &PatchParams::default(),
                &Patch::Merge(
                    json!({"metadata": {"annotations": {NODE_MACHINE_ANNOTATION: owner}}}),
                ),
            )
            .await?;
    }
    Ok(Some(json!({
        "kind": "Node",
        "name": name,
        "uid": node.metadata.uid,
    })))
}
