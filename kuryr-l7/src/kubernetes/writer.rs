//! The leader's writes: status patches and Warning Events, as [`status::decide`] says.
//!
//! [`status::decide`]: super::status::decide

use std::collections::BTreeSet;

use k8s_openapi::api::core::v1::ObjectReference;
use kube::api::{Api, ApiResource, DynamicObject, Patch, PatchParams};
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use serde_json::json;

use super::status::{Decisions, WarningEvent};
use super::watch::{Store, kinds};

/// Writes statuses and Events; remembers the Events it published, so each is said once.
pub struct StatusWriter {
    client: kube::Client,
    recorder: Recorder,
    published: BTreeSet<WarningEvent>,
}

fn resource(kind: &str) -> Option<ApiResource> {
    kinds()
        .into_iter()
        .map(|k| k.resource)
        .find(|r| r.kind == kind)
}

impl StatusWriter {
    /// A writer reporting Events as `controller` / `instance`.
    pub fn new(client: kube::Client, controller: &str, instance: &str) -> Self {
        let reporter = Reporter {
            controller: controller.to_owned(),
            instance: Some(instance.to_owned()),
        };
        StatusWriter {
            recorder: Recorder::new(client.clone(), reporter),
            client,
            published: BTreeSet::new(),
        }
    }

    /// Performs `decisions`; failures are logged. Returns whether every write succeeded: the
    /// caller tries again after a pause when one failed (a 403 until RBAC grants the right, a
    /// conflict, the API server unreachable), since no watch event would bring it back.
    pub async fn write(&mut self, decisions: Decisions, store: &Store) -> bool {
        let mut complete = true;
        for update in decisions.statuses {
            let Some(resource) = resource(&update.kind) else {
                continue;
            };
            // GatewayClasses are cluster-scoped.
            let api: Api<DynamicObject> = if update.namespace.is_empty() {
                Api::all_with(self.client.clone(), &resource)
            } else {
                Api::namespaced_with(self.client.clone(), &update.namespace, &resource)
            };
            let patch = json!({"status": update.status});
            match api
                .patch_status(&update.name, &PatchParams::default(), &Patch::Merge(&patch))
                .await
            {
                Ok(_) => tracing::debug!(
                    "status of {} {}/{} written",
                    update.kind,
                    update.namespace,
                    update.name
                ),
                Err(err) => {
                    complete = false;
                    tracing::warn!(
                        "writing status of {} {}/{}: {err}",
                        update.kind,
                        update.namespace,
                        update.name
                    );
                }
            }
        }
        for event in decisions.events {
            if self.published.contains(&event) {
                continue;
            }
            let Some(object) = store.get(&event.kind, &event.namespace, &event.name) else {
                continue;
            };
            let reference = ObjectReference {
                api_version: object.types.as_ref().map(|t| t.api_version.clone()),
                kind: Some(event.kind.clone()),
                name: object.metadata.name.clone(),
                namespace: object.metadata.namespace.clone(),
                uid: object.metadata.uid.clone(),
                resource_version: object.metadata.resource_version.clone(),
                ..ObjectReference::default()
            };
            let published = self
                .recorder
                .publish(
                    &Event {
                        type_: EventType::Warning,
                        reason: event.reason.clone(),
                        note: Some(super::event_note(&event.message)),
                        action: "Translate".to_owned(),
                        secondary: None,
                    },
                    &reference,
                )
                .await;
            match published {
                Ok(()) => {
                    tracing::info!(
                        "Warning Event on {} {}/{}: {}: {}",
                        event.kind,
                        event.namespace,
                        event.name,
                        event.reason,
                        event.message
                    );
                    self.published.insert(event);
                }
                Err(err) => {
                    complete = false;
                    tracing::warn!(
                        "publishing an Event on {} {}/{}: {err}",
                        event.kind,
                        event.namespace,
                        event.name
                    );
                }
            }
        }
        complete
    }
}
