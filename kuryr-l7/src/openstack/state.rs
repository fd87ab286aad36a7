//! The annotations the `octavia` driver keeps on Kubernetes objects, in Kuryr's versioned-object
//! envelope (`versioned_object.name`, `.namespace`, `.version`, `.data`):
//!
//! - [`ROUTER_STATE`] on the controller's Node: the Router LB and its floating IP, in the seed's
//!   shape (`L7RouterState` 1.0 with `fip` and a `LBaaSLoadBalancer` 1.0 `router_lb`).
//! - [`INGRESS_STATE`] / [`ROUTE_STATE`] on each Ingress / Route: the ids of its L7 policies,
//!   their rules and its pools ([`ObjectState`], version [`OBJECT_STATE_VERSION`]).
//!
//! A reader of version N accepts N-1: `1.0` is Kuryr's own `K8sRouteState` shape (one
//! `l7_policy`, a host rule `h_l7_rule`, a path rule `p_l7_rule`, one `router_pool`), read into
//! the current one. Anything else is an error naming the version found.

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

/// The Node annotation with the Router LB.
pub const ROUTER_STATE: &str = "openstack.org/kuryr-l7-router-state";
/// The Ingress annotation with its Octavia objects.
pub const INGRESS_STATE: &str = "openstack.org/kuryr-ingress-state";
/// The Route annotation with its Octavia objects.
pub const ROUTE_STATE: &str = "openstack.org/kuryr-route-state";
/// The versioned objects' namespace.
pub const NAMESPACE: &str = "kuryr_kubernetes";
/// The version [`ObjectState::to_annotation`] writes.
pub const OBJECT_STATE_VERSION: &str = "1.1";
/// The version before it, still read.
pub const OBJECT_STATE_PREVIOUS: &str = "1.0";

/// An annotation that cannot be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StateError {
    /// Not JSON, or not the shape of its version.
    #[error("{annotation}: {detail}")]
    Malformed {
        /// The annotation.
        annotation: &'static str,
        /// What is wrong.
        detail: String,
    },
    /// Another object's envelope, or a version this reader does not know.
    #[error("{annotation}: {name} version {version} is not readable (expected {expected})")]
    Version {
        /// The annotation.
        annotation: &'static str,
        /// `versioned_object.name` found.
        name: String,
        /// `versioned_object.version` found.
        version: String,
        /// What this reader accepts.
        expected: String,
    },
}

fn envelope(name: &str, version: &str, data: Value) -> Value {
    json!({
        "versioned_object.name": name,
        "versioned_object.namespace": NAMESPACE,
        "versioned_object.version": version,
        "versioned_object.data": data,
    })
}

/// (name, version, data) of an envelope.
fn open(annotation: &'static str, value: &Value) -> Result<(String, String, Value), StateError> {
    let field = |key: &str| {
        value.get(key).ok_or_else(|| StateError::Malformed {
            annotation,
            detail: format!("no {key:?}"),
        })
    };
    let text = |key: &str| -> Result<String, StateError> {
        field(key)?
            .as_str()
            .map(str::to_owned)
            .ok_or_else(|| StateError::Malformed {
                annotation,
                detail: format!("{key:?} is not a string"),
            })
    };
    Ok((
        text("versioned_object.name")?,
        text("versioned_object.version")?,
        field("versioned_object.data")?.clone(),
    ))
}

fn parse_json(annotation: &'static str, text: &str) -> Result<Value, StateError> {
    serde_json::from_str(text).map_err(|e| StateError::Malformed {
        annotation,
        detail: e.to_string(),
    })
}

/// The Router LB as the seed's `LBaaSLoadBalancer` 1.0.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RouterLb {
    /// The load balancer's id.
    pub id: String,
    /// Its VIP address.
    pub ip: String,
    /// Its name.
    pub name: String,
    /// The VIP port.
    pub port_id: String,
    /// Its project.
    pub project_id: String,
    /// The VIP's subnet.
    pub subnet_id: String,
}

/// `L7RouterState` 1.0: the Router LB and its floating IP address.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RouterState {
    /// The floating IP address (the seed keeps the address, not the id).
    pub fip: String,
    /// The load balancer.
    pub router_lb: RouterLb,
}

impl RouterState {
    /// The annotation's value.
    pub fn to_annotation(&self) -> String {
        let lb = serde_json::to_value(&self.router_lb).unwrap_or_default();
        envelope(
            "L7RouterState",
            "1.0",
            json!({"fip": self.fip, "router_lb": envelope("LBaaSLoadBalancer", "1.0", lb)}),
        )
        .to_string()
    }

    /// Reads the annotation's value.
    pub fn from_annotation(text: &str) -> Result<RouterState, StateError> {
        let annotation = ROUTER_STATE;
        let value = parse_json(annotation, text)?;
        let (name, version, data) = open(annotation, &value)?;
        if name != "L7RouterState" || version != "1.0" {
            return Err(StateError::Version {
                annotation,
                name,
                version,
                expected: "L7RouterState 1.0".to_owned(),
            });
        }
        let malformed = |detail: String| StateError::Malformed { annotation, detail };
        let fip = data
            .get("fip")
            .and_then(Value::as_str)
            .ok_or_else(|| malformed("no \"fip\" address".to_owned()))?
            .to_owned();
        let lb = data
            .get("router_lb")
            .ok_or_else(|| malformed("no \"router_lb\"".to_owned()))?;
        let (_, _, lb) = open(annotation, lb)?;
        let router_lb =
            serde_json::from_value(lb).map_err(|e| malformed(format!("router_lb: {e}")))?;
        Ok(RouterState { fip, router_lb })
    }
}

/// An Octavia object named by id and name.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Named {
    /// Its id.
    pub id: String,
    /// Its name.
    #[serde(default)]
    pub name: String,
}

/// An L7 policy and its rules' ids.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PolicyState {
    /// Its id.
    pub id: String,
    /// Its name.
    pub name: String,
    /// Its rules' ids.
    pub rules: Vec<String>,
}

/// What an Ingress or Route has on the Router LB (`IngressState` / `RouteState` 1.1).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ObjectState {
    /// The load balancer.
    pub load_balancer: String,
    /// Its L7 policies, in position order.
    pub l7_policies: Vec<PolicyState>,
    /// The pools its policies forward to.
    pub pools: Vec<Named>,
}

/// The envelope name of `kind`'s state.
fn object_name(kind: &str) -> &'static str {
    if kind == "Route" {
        "RouteState"
    } else {
        "IngressState"
    }
}

/// The annotation holding `kind`'s state.
pub fn annotation_of(kind: &str) -> &'static str {
    if kind == "Route" {
        ROUTE_STATE
    } else {
        INGRESS_STATE
    }
}

/// Kuryr's `K8sRouteState` 1.0 data: one policy, a host rule, an optional path rule, one pool
/// (each possibly a versioned object itself).
#[derive(Deserialize)]
struct KuryrRouteState {
    #[serde(default)]
    router_pool: Option<Value>,
    #[serde(default)]
    l7_policy: Option<Value>,
    #[serde(default)]
    h_l7_rule: Option<Value>,
    #[serde(default)]
    p_l7_rule: Option<Value>,
}

/// A nested object's fields: the envelope's data, or the object itself.
fn inner(value: &Value) -> &Value {
    value.get("versioned_object.data").unwrap_or(value)
}

impl ObjectState {
    /// The annotation's value for a `kind` (`Ingress` or `Route`).
    pub fn to_annotation(&self, kind: &str) -> String {
        envelope(
            object_name(kind),
            OBJECT_STATE_VERSION,
            serde_json::to_value(self).unwrap_or_default(),
        )
        .to_string()
    }

    /// Reads a `kind`'s annotation: version 1.1, or 1.0 (Kuryr's route state) upgraded.
    pub fn from_annotation(kind: &str, text: &str) -> Result<ObjectState, StateError> {
        let annotation = annotation_of(kind);
        let value = parse_json(annotation, text)?;
        let (name, version, data) = open(annotation, &value)?;
        let malformed = |detail: String| StateError::Malformed { annotation, detail };
        let accepted = name == object_name(kind) || (kind == "Route" && name == "K8sRouteState");
        match version.as_str() {
            OBJECT_STATE_VERSION if accepted => {
                serde_json::from_value(data).map_err(|e| malformed(e.to_string()))
            }
            OBJECT_STATE_PREVIOUS if accepted => {
                let old: KuryrRouteState =
                    serde_json::from_value(data).map_err(|e| malformed(e.to_string()))?;
                let named = |v: &Value| -> Result<Named, StateError> {
                    serde_json::from_value(inner(v).clone()).map_err(|e| malformed(e.to_string()))
                };
                let mut state = ObjectState::default();
                if let Some(policy) = &old.l7_policy {
                    let policy = named(policy)?;
                    let rules = [&old.h_l7_rule, &old.p_l7_rule]
                        .into_iter()
                        .flatten()
                        .filter(|r| !r.is_null())
                        .map(|r| named(r).map(|n| n.id))
                        .collect::<Result<Vec<_>, _>>()?;
                    state.l7_policies.push(PolicyState {
                        id: policy.id,
                        name: policy.name,
                        rules,
                    });
                }
                if let Some(pool) = &old.router_pool {
                    let pool_fields = inner(pool);
                    if let Some(lb) = pool_fields.get("loadbalancer_id").and_then(Value::as_str) {
                        state.load_balancer = lb.to_owned();
                    }
                    state.pools.push(named(pool)?);
                }
                Ok(state)
            }
            _ => Err(StateError::Version {
                annotation,
                name,
                version,
                expected: format!(
                    "{} {OBJECT_STATE_VERSION} or {OBJECT_STATE_PREVIOUS}",
                    object_name(kind)
                ),
            }),
        }
    }
}

#[cfg(test)]
mod tests;
