//! `kuryr-l7 rules --explain`: for each HTTPRoute rule on each Gateway listener, which drivers
//! serve it fully, partly or not, and why (the route field and what the driver does instead),
//! from [`capabilities::explain`]. Each driver is judged as kuryr-l7 runs it, fed the rules
//! service's model, which carries every feature of the compiled form
//! ([`DriverCapabilities::through_rules`]): what a driver lacks is its own.

use std::fmt::Write as _;

use nephrite_l7::gateway::Model;
use nephrite_l7::gateway::capabilities::{self, Driver, DriverCapabilities, Served};
use serde_json::{Value, json};

const DRIVERS: [(Driver, &str); 3] = [
    (Driver::Router, "router"),
    (Driver::Haproxy, "haproxy"),
    (Driver::Octavia, "octavia"),
];

fn served(served: Served) -> &'static str {
    match served {
        Served::Fully => "fully",
        Served::Partly => "partly",
        Served::Not => "not",
    }
}

/// One rule on one listener, with each driver's verdict.
struct Explained {
    gateway: String,
    listener: String,
    route: String,
    rule: usize,
    drivers: Vec<(&'static str, capabilities::RuleSupport)>,
}

fn explained(model: &Model) -> Vec<Explained> {
    let mut out = Vec::new();
    for gateway in &model.compiled {
        for listener in &gateway.listeners {
            let per_driver: Vec<_> = DRIVERS
                .iter()
                .map(|(driver, name)| {
                    (
                        *name,
                        capabilities::explain(
                            listener,
                            &DriverCapabilities::through_rules(*driver),
                        ),
                    )
                })
                .collect();
            for (index, action) in listener.actions.iter().enumerate() {
                out.push(Explained {
                    gateway: gateway.gateway.to_string(),
                    listener: listener.name.clone(),
                    route: action.route.to_string(),
                    rule: action.rule,
                    drivers: per_driver
                        .iter()
                        .map(|(name, supports)| (*name, supports[index].clone()))
                        .collect(),
                });
            }
        }
    }
    out
}

/// The explanation as text.
pub fn table(model: &Model) -> String {
    let mut out = String::new();
    let explained = explained(model);
    if explained.is_empty() {
        let _ = writeln!(out, "no HTTPRoute rule is attached to a Gateway of ours");
    }
    for e in explained {
        let _ = writeln!(
            out,
            "HTTPRoute {} spec.rules[{}] on Gateway {} listener {}",
            e.route, e.rule, e.gateway, e.listener
        );
        for (name, support) in &e.drivers {
            let _ = writeln!(out, "  {name:<8} {}", served(support.served));
            for gap in &support.gaps {
                let _ = writeln!(out, "           {}: {}", gap.field, gap.note);
            }
        }
    }
    out
}

/// The explanation as JSON: a list of rules, each with `drivers.<name>.{served, gaps}`.
pub fn json(model: &Model) -> Value {
    Value::Array(
        explained(model)
            .into_iter()
            .map(|e| {
                let drivers: serde_json::Map<String, Value> = e
                    .drivers
                    .iter()
                    .map(|(name, support)| {
                        let gaps: Vec<Value> = support
                            .gaps
                            .iter()
                            .map(|g| json!({"field": g.field, "note": g.note}))
                            .collect();
                        (
                            (*name).to_owned(),
                            json!({"served": served(support.served), "gaps": gaps}),
                        )
                    })
                    .collect();
                json!({
                    "route": e.route,
                    "rule": e.rule,
                    "gateway": e.gateway,
                    "listener": e.listener,
                    "drivers": drivers,
                })
            })
            .collect(),
    )
}
