//! The status the Gateway API asks a controller to write, decided without IO from a [`Model`]:
//!
//! - GatewayClass: `Accepted`.
//! - Gateway: `addresses` (passed in: the driver knows them), `Accepted`, `Programmed`
//!   (`AddressNotAssigned` until an address is known) and per listener `supportedKinds`,
//!   `attachedRoutes` and `Accepted`, `ResolvedRefs`, `Conflicted`, `Programmed`.
//! - HTTPRoute: one `status.parents[]` entry per parentRef to a Gateway of ours, with our
//!   `controllerName` and `Accepted`, `ResolvedRefs` and, when some rules were refused,
//!   `PartiallyInvalid`, and `l7.kuryr.nephrite.io/Served` (False) when the data plane serves
//!   a rule only partly or not at all, naming the field; entries written by other controllers
//!   are kept as they are.
//!
//! Conditions carry `observedGeneration` and keep their `lastTransitionTime` while their status
//! does not change (`set_condition(…, now)`), so deciding twice from the same objects writes
//! nothing the second time.

use std::collections::BTreeMap;

use nephrite_krm::condition::set_condition;
use nephrite_krm::{Condition, ConditionStatus, Object};
use serde::Serialize;
use serde_json::{Map, Value, json};

use super::ObjectKey;
use super::api::{ParentReference, is_gateway_kind};
use super::build::Settings;
use super::outcome::{ClassOutcome, GatewayOutcome, ListenerOutcome, Model, RouteOutcome, Verdict};
use crate::status::StatusUpdate;

/// An address of a Gateway, as `status.addresses[]` holds it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct GatewayAddress {
    /// `IPAddress` or `Hostname`.
    #[serde(rename = "type")]
    pub address_type: String,
    /// The address.
    pub value: String,
}

impl GatewayAddress {
    /// An `IPAddress` or, when `value` is not an IP, a `Hostname` address.
    pub fn new(value: &str) -> Self {
        let address_type = if value.parse::<std::net::IpAddr>().is_ok() {
            "IPAddress"
        } else {
            "Hostname"
        };
        GatewayAddress {
            address_type: address_type.to_owned(),
            value: value.to_owned(),
        }
    }
}

fn stored_conditions(value: Option<&Value>) -> Vec<Condition> {
    value
        .and_then(|v| serde_json::from_value(v.clone()).ok())
        .unwrap_or_default()
}

fn apply(
    conditions: &mut Vec<Condition>,
    type_: &str,
    verdict: &Verdict,
    generation: Option<i64>,
    now: &str,
) {
    let mut condition = Condition::new(type_, ConditionStatus::from(verdict.holds))
        .with_reason(verdict.reason)
        .with_message(verdict.message.clone());
    condition.observed_generation = generation;
    set_condition(conditions, condition, now);
}

fn conditions_value(conditions: &[Condition]) -> Value {
    serde_json::to_value(conditions).unwrap_or(Value::Array(Vec::new()))
}

fn stored_status(object: &Object) -> Map<String, Value> {
    object
        .status()
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default()
}

fn generation(object: &Object) -> Option<i64> {
    object.metadata.details().generation
}

/// The new `status` of a GatewayClass of ours.
pub fn gateway_class_status(stored: &Object, outcome: &ClassOutcome, now: &str) -> Value {
    let mut status = stored_status(stored);
    let mut conditions = stored_conditions(status.get("conditions"));
    apply(
        &mut conditions,
        "Accepted",
        &outcome.accepted,
        generation(stored),
        now,
    );
    status.insert("conditions".into(), conditions_value(&conditions));
    Value::Object(status)
}

fn listener_status(
    stored: Option<&Value>,
    outcome: &ListenerOutcome,
    generation: Option<i64>,
    now: &str,
) -> Value {
    let mut conditions = stored_conditions(stored.and_then(|l| l.get("conditions")));
    apply(
        &mut conditions,
        "Accepted",
        &outcome.accepted,
        generation,
        now,
    );
    apply(
        &mut conditions,
        "ResolvedRefs",
        &outcome.resolved_refs,
        generation,
        now,
    );
    apply(
        &mut conditions,
        "Conflicted",
        &outcome.conflicted,
        generation,
        now,
    );
    apply(
        &mut conditions,
        "Programmed",
        &outcome.programmed,
        generation,
        now,
    );
    json!({
        "name": outcome.name,
        "supportedKinds": outcome.supported_kinds.iter()
            .map(|k| json!({"group": k.group, "kind": k.kind})).collect::<Vec<_>>(),
        "attachedRoutes": outcome.attached_routes,
        "conditions": conditions_value(&conditions),
    })
}

/// The new `status` of a Gateway of ours served at `addresses`.
pub fn gateway_status(
    stored: &Object,
    outcome: &GatewayOutcome,
    addresses: &[GatewayAddress],
    now: &str,
) -> Value {
    let mut status = stored_status(stored);
    let generation = generation(stored);
    let mut conditions = stored_conditions(status.get("conditions"));
    apply(
        &mut conditions,
        "Accepted",
        &outcome.accepted,
        generation,
        now,
    );
    let programmed = if !outcome.accepted.holds {
        Verdict::no("Invalid", outcome.accepted.message.clone())
    } else if addresses.is_empty() {
        Verdict::no(
            "AddressNotAssigned",
            "no address is assigned to the Gateway yet",
        )
    } else {
        Verdict::yes("Programmed", "Gateway programmed")
    };
    apply(&mut conditions, "Programmed", &programmed, generation, now);
    let stored_listeners: Vec<Value> = status
        .get("listeners")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let listeners: Vec<Value> = outcome
        .listeners
        .iter()
        .map(|listener| {
            let stored = stored_listeners
                .iter()
                .find(|l| l.get("name").and_then(Value::as_str) == Some(listener.name.as_str()));
            listener_status(stored, listener, generation, now)
        })
        .collect();
    status.insert(
        "addresses".into(),
        serde_json::to_value(addresses).unwrap_or(Value::Array(Vec::new())),
    );
    status.insert("conditions".into(), conditions_value(&conditions));
    status.insert("listeners".into(), Value::Array(listeners));
    Value::Object(status)
}

fn parent_ref_value(parent: &ParentReference) -> Value {
    let mut out = Map::new();
    out.insert("group".into(), json!(parent.group));
    out.insert("kind".into(), json!(parent.kind));
    if let Some(namespace) = &parent.namespace {
        out.insert("namespace".into(), json!(namespace));
    }
    out.insert("name".into(), json!(parent.name));
    if let Some(section) = &parent.section_name {
        out.insert("sectionName".into(), json!(section));
    }
    if let Some(port) = parent.port {
        out.insert("port".into(), json!(port));
    }
    Value::Object(out)
}

/// The new `status` of an HTTPRoute with parents of ours.
pub fn http_route_status(
    stored: &Object,
    outcome: &RouteOutcome,
    controller_name: &str,
    now: &str,
) -> Value {
    let mut status = stored_status(stored);
    let generation = generation(stored);
    let stored_parents: Vec<Value> = status
        .get("parents")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let mut parents: Vec<Value> = stored_parents
        .iter()
        .filter(|p| p.get("controllerName").and_then(Value::as_str) != Some(controller_name))
        .cloned()
        .collect();
    for parent in &outcome.parents {
        let reference = parent_ref_value(&parent.parent_ref);
        let previous = stored_parents.iter().find(|p| {
            p.get("controllerName").and_then(Value::as_str) == Some(controller_name)
                && p.get("parentRef") == Some(&reference)
        });
        let mut conditions = stored_conditions(previous.and_then(|p| p.get("conditions")));
        apply(
            &mut conditions,
            "Accepted",
            &parent.accepted,
            generation,
            now,
        );
        apply(
            &mut conditions,
            "ResolvedRefs",
            &parent.resolved_refs,
            generation,
            now,
        );
        match &parent.partially_invalid {
            Some(verdict) => apply(
                &mut conditions,
                "PartiallyInvalid",
                verdict,
                generation,
                now,
            ),
            None => conditions.retain(|c| c.type_ != "PartiallyInvalid"),
        }
        match &parent.served {
            Some(verdict) => apply(
                &mut conditions,
                super::lower::SERVED_CONDITION,
                verdict,
                generation,
                now,
            ),
            None => conditions.retain(|c| c.type_ != super::lower::SERVED_CONDITION),
        }
        parents.push(json!({
            "parentRef": reference,
            "controllerName": controller_name,
            "conditions": conditions_value(&conditions),
        }));
    }
    status.insert("parents".into(), Value::Array(parents));
    Value::Object(status)
}

/// The status writes the model calls for: one per GatewayClass, Gateway and HTTPRoute of ours
/// whose status differs from the stored one. `addresses` are each Gateway's (none = not yet).
pub fn decide(
    objects: &[Object],
    model: &Model,
    settings: &Settings,
    addresses: &BTreeMap<ObjectKey, Vec<GatewayAddress>>,
    now: &str,
) -> Vec<StatusUpdate> {
    let mut updates = Vec::new();
    for object in objects {
        let Some(name) = object.name() else { continue };
        let key = ObjectKey::new(object.namespace().unwrap_or("default"), name);
        let status = if is_gateway_kind(object, "GatewayClass") {
            model
                .classes
                .iter()
                .find(|c| c.name == name)
                .map(|c| gateway_class_status(object, c, now))
        } else if is_gateway_kind(object, "Gateway") {
            model.gateways.iter().find(|g| g.gateway == key).map(|g| {
                gateway_status(
                    object,
                    g,
                    addresses.get(&key).map_or(&[], Vec::as_slice),
                    now,
                )
            })
        } else if is_gateway_kind(object, "HTTPRoute") {
            model
                .routes
                .iter()
                .find(|r| r.route == key)
                .map(|r| http_route_status(object, r, &settings.controller_name, now))
        } else {
            None
        };
        let Some(status) = status else { continue };
        if object.status() != Some(&status) {
            updates.push(StatusUpdate {
                kind: object.kind.clone(),
                namespace: object.namespace().unwrap_or_default().to_owned(),
                name: name.to_owned(),
                status,
            });
        }
    }
    updates
}
