//! From objects to a [`Model`]: our GatewayClasses accepted, each of their Gateways' listeners
//! validated (protocol, hostname, TLS certificates, route kinds, conflicts), every HTTPRoute's
//! parentRefs attached to listeners, the attached rules compiled, and the outcome of each step
//! kept for status.
//!
//! Attachment follows the spec: a parentRef names a Gateway (and optionally a listener by
//! `sectionName` and/or `port`); of the listeners it names, those whose `allowedRoutes` admit
//! the route's namespace and kind, and whose hostname intersects the route's hostnames, take the
//! route. When none does, the reason is the first step that left no listener:
//! `NoMatchingParent`, `NotAllowedByListeners`, then `NoMatchingListenerHostname`.
//! A Gateway or GatewayClass that is not ours (another controller, or missing) is left alone,
//! and so are parentRefs to it.

use nephrite_krm::Object;

use super::api::{
    GROUP, Gateway, GatewayClass, HttpRoute, ParentReference, ReferenceGrant, is_gateway_kind,
};
use super::compiled::{CompiledGateway, CompiledListener, RouteEntry, RuleAction};
use super::hostname::{self, Hostname};
use super::listeners::{ListenerState, allows, mark_conflicts, validate_listener};
use super::outcome::{
    ClassOutcome, GatewayOutcome, ListenerOutcome, Model, ParentOutcome, RouteOutcome, Verdict,
};
use super::refs::RefIndex;
use super::rules::{CompiledRule, compile_rule};
use super::{GatewayError, ObjectKey};
use crate::backends::SERVICE_NAME_LABEL;
use crate::objects::{EndpointSliceBody, SecretBody, ServiceSpec};

/// The controller's settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Settings {
    /// The `controllerName` of the GatewayClasses we serve.
    pub controller_name: String,
    /// The driver serving the rules: what it cannot express of a route is reported (and left
    /// out when serving without it would send requests elsewhere).
    pub driver: super::capabilities::Driver,
}

/// The controller name kuryr-l7 answers to by default.
pub const DEFAULT_CONTROLLER_NAME: &str = "kuryr.nephrite.io/l7";

impl Default for Settings {
    fn default() -> Self {
        Settings {
            controller_name: DEFAULT_CONTROLLER_NAME.to_owned(),
            driver: super::capabilities::Driver::Router,
        }
    }
}

fn body<T: serde::de::DeserializeOwned>(object: &Object) -> Result<T, String> {
    serde_json::from_value(serde_json::Value::Object(
        object
            .body
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect(),
    ))
    .map_err(|err| err.to_string())
}

fn invalid(object: &Object, field: &str, message: String) -> GatewayError {
    GatewayError::Invalid {
        object: crate::translate::describe(object),
        field: field.to_owned(),
        message,
    }
}

/// The objects sorted into what references resolve against and the Gateway API kinds.
#[derive(Default)]
struct Sorted {
    refs: RefIndex,
    classes: Vec<GatewayClass>,
    gateways: Vec<Gateway>,
    routes: Vec<HttpRoute>,
    errors: Vec<GatewayError>,
}

fn sort(objects: &[Object]) -> Sorted {
    let mut sorted = Sorted::default();
    for object in objects {
        let namespace = object.namespace().unwrap_or("default");
        let name = object.name().unwrap_or_default();
        let result: Result<(), GatewayError> =
            match (object.api_version.as_str(), object.kind.as_str()) {
                ("v1", "Service") => object
                    .spec()
                    .map_or(Ok(ServiceSpec::default()), |s| {
                        serde_json::from_value(s.clone()).map_err(|e| e.to_string())
                    })
                    .map(|spec| sorted.refs.backends.add_service(namespace, name, spec))
                    .map_err(|e| invalid(object, "spec", e)),
                ("discovery.k8s.io/v1", "EndpointSlice") => body::<EndpointSliceBody>(object)
                    .map_err(|e| invalid(object, "endpoints", e))
                    .and_then(|slice| match object.label(SERVICE_NAME_LABEL) {
                        Some(service) => {
                            sorted.refs.backends.add_slice(namespace, service, slice);
                            Ok(())
                        }
                        None => Err(invalid(
                            object,
                            &format!("metadata.labels.{SERVICE_NAME_LABEL}"),
                            "missing".into(),
                        )),
                    }),
                ("v1", "Secret") => body::<SecretBody>(object)
                    .map(|secret| sorted.refs.backends.add_secret(namespace, name, secret))
                    .map_err(|e| invalid(object, "data", e)),
                ("v1", "Namespace") => {
                    let labels = object
                        .labels()
                        .iter()
                        .map(|(k, v)| (k.clone(), v.clone()))
                        .collect();
                    sorted.refs.namespaces.insert(name.to_owned(), labels);
                    Ok(())
                }
                _ if is_gateway_kind(object, "GatewayClass") => {
                    GatewayClass::from_object(object).map(|c| sorted.classes.push(c))
                }
                _ if is_gateway_kind(object, "Gateway") => {
                    Gateway::from_object(object).map(|g| sorted.gateways.push(g))
                }
                _ if is_gateway_kind(object, "HTTPRoute") => {
                    HttpRoute::from_object(object).map(|r| sorted.routes.push(r))
                }
                _ if is_gateway_kind(object, "ReferenceGrant") => {
                    ReferenceGrant::from_object(object).map(|g| sorted.refs.grants.push(g))
                }
                _ => Ok(()),
            };
        if let Err(err) = result {
            sorted.errors.push(err);
        }
    }
    sorted.gateways.sort_by(|a, b| a.key.cmp(&b.key));
    sorted.routes.sort_by(|a, b| a.key.cmp(&b.key));
    sorted
}

/// A listener (by index) and the hostnames a route serves on it.
type Attachment = (usize, Vec<Option<Hostname>>);

/// Attaches one parentRef; `Ok` with the listeners and their hostnames, or the refusal.
fn attach(
    parent: &ParentReference,
    listeners: &[ListenerState],
    gateway: &ObjectKey,
    route: &HttpRoute,
    hostnames: &[Hostname],
    refs: &RefIndex,
) -> Result<Vec<Attachment>, Verdict> {
    let named: Vec<usize> = (0..listeners.len())
        .filter(|&i| {
            parent
                .section_name
                .as_ref()
                .is_none_or(|s| *s == listeners[i].spec.name)
        })
        .filter(|&i| parent.port.is_none_or(|p| p == listeners[i].spec.port))
        .collect();
    if named.is_empty() {
        return Err(Verdict::no(
            "NoMatchingParent",
            format!(
                "Gateway {gateway} has no listener{}{}",
                parent
                    .section_name
                    .as_ref()
                    .map_or(String::new(), |s| format!(" named {s}")),
                parent
                    .port
                    .map_or(String::new(), |p| format!(" on port {p}")),
            ),
        ));
    }
    let allowed: Vec<usize> = named
        .into_iter()
        .filter(|&i| allows(&listeners[i], gateway, &route.key, refs))
        .collect();
    if allowed.is_empty() {
        return Err(Verdict::no(
            "NotAllowedByListeners",
            format!(
                "no listener of Gateway {gateway} named by the parentRef allows HTTPRoutes from namespace {}",
                route.key.namespace
            ),
        ));
    }
    let hosted: Vec<Attachment> = allowed
        .into_iter()
        .filter_map(|i| {
            hostname::effective(listeners[i].hostname.as_ref(), hostnames).map(|h| (i, h))
        })
        .collect();
    if hosted.is_empty() {
        return Err(Verdict::no(
            "NoMatchingListenerHostname",
            format!(
                "no listener of Gateway {gateway} named by the parentRef shares a hostname with the route"
            ),
        ));
    }
    Ok(hosted)
}

/// Builds the model from the objects of one source (any order; the result does not depend on
/// it).
pub fn build(objects: &[Object], settings: &Settings) -> Model {
    let Sorted {
        refs,
        classes,
        gateways,
        routes,
        errors,
    } = sort(objects);
    let mut model = Model {
        errors,
        ..Model::default()
    };
    let mut ours: Vec<&GatewayClass> = classes
        .iter()
        .filter(|c| c.controller_name == settings.controller_name)
        .collect();
    ours.sort_by(|a, b| a.name.cmp(&b.name));
    model.classes = ours
        .iter()
        .map(|class| ClassOutcome {
            name: class.name.clone(),
            accepted: Verdict::yes(
                "Accepted",
                format!("served by {}", settings.controller_name),
            ),
        })
        .collect();
    let gateways: Vec<&Gateway> = gateways
        .iter()
        .filter(|g| ours.iter().any(|c| c.name == g.class_name))
        .collect();
    let mut states: Vec<Vec<ListenerState>> = gateways
        .iter()
        .map(|gateway| {
            let mut listeners: Vec<ListenerState> = gateway
                .listeners
                .iter()
                .enumerate()
                .map(|(i, spec)| validate_listener(gateway, i, spec, &refs))
                .collect();
            mark_conflicts(&mut listeners);
            listeners
        })
        .collect();

    let mut compiled_rules: Vec<Vec<Option<CompiledRule>>> = Vec::new();
    for (route_index, route) in routes.iter().enumerate() {
        let rules: Vec<Result<CompiledRule, String>> = route
            .rules
            .iter()
            .enumerate()
            .map(|(i, rule)| match rule {
                Ok(rule) => compile_rule(rule, i, &route.key.namespace, &refs),
                Err(err) => Err(err.to_string()),
            })
            .collect();
        let refused: Vec<&String> = rules.iter().filter_map(|r| r.as_ref().err()).collect();
        let failures: Vec<_> = rules
            .iter()
            .flatten()
            .flat_map(|r| r.ref_failures.iter())
            .collect();
        let resolved_refs = match failures.first() {
            None => Verdict::yes("ResolvedRefs", "all references resolved"),
            Some(first) => Verdict::no(
                first.reason,
                failures
                    .iter()
                    .map(|f| f.message.as_str())
                    .collect::<Vec<_>>()
                    .join("; "),
            ),
        };
        let parsed: Result<Vec<Hostname>, String> = route
            .hostnames
            .iter()
            .enumerate()
            .map(|(i, h)| Hostname::parse(h).map_err(|e| format!("spec.hostnames[{i}]: {e}")))
            .collect();
        let (hostnames, hostname_error) = match parsed {
            Ok(hostnames) => (hostnames, None),
            Err(err) => (Vec::new(), Some(err)),
        };
        let unsupported = hostname_error.or_else(|| {
            (!rules.is_empty() && refused.len() == rules.len()).then(|| {
                refused
                    .iter()
                    .map(|s| s.as_str())
                    .collect::<Vec<_>>()
                    .join("; ")
            })
        });
        let partially_invalid = (!refused.is_empty() && unsupported.is_none()).then(|| {
            Verdict::yes(
                "UnsupportedValue",
                refused
                    .iter()
                    .map(|s| s.as_str())
                    .collect::<Vec<_>>()
                    .join("; "),
            )
        });
        let mut parents = Vec::new();
        for parent in &route.parent_refs {
            if parent.group != GROUP || parent.kind != "Gateway" {
                continue;
            }
            let key = ObjectKey::new(
                parent.namespace.as_deref().unwrap_or(&route.key.namespace),
                &parent.name,
            );
            let Some(g) = gateways.iter().position(|g| g.key == key) else {
                continue;
            };
            let accepted = match &unsupported {
                Some(why) => Verdict::no("UnsupportedValue", why.clone()),
                None => match attach(parent, &states[g], &key, route, &hostnames, &refs) {
                    Err(refusal) => refusal,
                    Ok(listeners) => {
                        for (l, served) in listeners {
                            let attached = &mut states[g][l].attached;
                            if !attached.iter().any(|(r, _)| *r == route_index) {
                                attached.push((route_index, served));
                            }
                        }
                        Verdict::yes("Accepted", format!("attached to Gateway {key}"))
                    }
                },
            };
            parents.push(ParentOutcome {
                parent_ref: parent.clone(),
                accepted,
                resolved_refs: resolved_refs.clone(),
                partially_invalid: partially_invalid.clone(),
                served: None,
            });
        }
        if !parents.is_empty() {
            model.routes.push(RouteOutcome {
                route: route.key.clone(),
                parents,
            });
        }
        compiled_rules.push(rules.into_iter().map(Result::ok).collect());
    }

    for (gateway, listeners) in gateways.iter().zip(states.iter_mut()) {
        let mut compiled = CompiledGateway {
            gateway: gateway.key.clone(),
            listeners: Vec::new(),
        };
        for listener in listeners.iter_mut() {
            listener.outcome.attached_routes =
                u32::try_from(listener.attached.len()).unwrap_or(u32::MAX);
            let (Some(protocol), true) = (listener.protocol, listener.outcome.programmed.holds)
            else {
                continue;
            };
            let mut out = CompiledListener {
                name: listener.spec.name.clone(),
                port: listener.spec.port,
                protocol,
                hostname: listener.hostname.clone(),
                certificates: listener.certificates.clone(),
                entries: Vec::new(),
                actions: Vec::new(),
            };
            for (route_index, served) in &listener.attached {
                let route = &routes[*route_index];
                for (rule_index, rule) in compiled_rules[*route_index].iter().enumerate() {
                    let Some(rule) = rule else { continue };
                    let action = out.actions.len();
                    out.actions.push(RuleAction {
                        route: route.key.clone(),
                        rule: rule_index,
                        created: route.created.clone(),
                        filters: rule.filters.clone(),
                        backends: rule.backends.clone(),
                    });
                    for host in served {
                        for (match_index, matcher) in rule.matchers.iter().enumerate() {
                            out.entries.push(RouteEntry {
                                hostname: host.clone(),
                                matcher: matcher.clone(),
                                match_index,
                                action,
                            });
                        }
                    }
                }
            }
            out.sort_entries();
            compiled.listeners.push(out);
        }
        let outcomes: Vec<ListenerOutcome> = listeners.iter().map(|l| l.outcome.clone()).collect();
        let valid = outcomes.iter().filter(|l| l.programmed.holds).count();
        let accepted = if outcomes.is_empty() || valid == 0 {
            Verdict::no("ListenersNotValid", "no listener is valid")
        } else if valid < outcomes.len() {
            Verdict::yes(
                "ListenersNotValid",
                format!(
                    "{} of {} listeners are not valid",
                    outcomes.len() - valid,
                    outcomes.len()
                ),
            )
        } else {
            Verdict::yes("Accepted", "Gateway accepted")
        };
        model.gateways.push(GatewayOutcome {
            gateway: gateway.key.clone(),
            accepted,
            listeners: outcomes,
        });
        model.compiled.push(compiled);
    }
    model
}
