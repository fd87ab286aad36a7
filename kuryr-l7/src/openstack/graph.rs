//! Octavia's single-call create for a first sync: the whole L7 tree (the HTTP listener, its L7
//! policies with their rules, the pools with their members) as the `listeners` and `pools` of
//! one `POST /v2/lbaas/loadbalancers` body, instead of one call and one settle per object.
//!
//! The body is made from the plan against an empty load balancer (`nephrite_l7::octavia::plan`
//! of the desired tree and an empty [`Tree`]), so every object carries exactly the name, tags and
//! position the planner would give it one call at a time: the next plan against what Octavia
//! then holds is empty. Octavia creates the tree in one database transaction, so a controller
//! killed during the call finds either nothing or all of it.

use nephrite_l7::model::Rule;
use nephrite_l7::octavia::{
    Call, Desired, ListenerProtocol, Ownership, PlanError, PolicyAction, PoolProtocol, Ref, Tree,
    add_tls, plan,
};
use serde_json::{Map, Value, json};

/// Why a plan cannot be one single-call body.
#[derive(Debug, thiserror::Error)]
pub enum GraphError {
    /// The desired tree cannot be planned.
    #[error(transparent)]
    Plan(#[from] PlanError),
    /// A call names an object that is not created in the same body (a planner change this
    /// module does not follow yet).
    #[error("call {index} of the first-sync plan cannot be part of a single-call create: {what}")]
    NotInTree {
        /// The call's index.
        index: usize,
        /// What it is.
        what: String,
    },
}

/// The `listeners` and `pools` of a load balancer body that creates `desired` for `owner` in
/// one call (an object to merge into the load balancer's body).
pub fn tree_body(desired: &Desired, owner: &Ownership) -> Result<Map<String, Value>, GraphError> {
    let calls = plan(desired, &Tree::default(), owner)?;
    body_of(&calls)
}

/// What each plan index created, for later calls naming it.
enum Created {
    Pool(usize),
    Listener(usize),
    Policy(usize, usize),
}

fn not_in_tree(index: usize, call: &Call) -> GraphError {
    GraphError::NotInTree {
        index,
        what: format!("{call:?}"),
    }
}

/// The body of `calls`, a plan made against an empty load balancer (creates only).
fn body_of(calls: &[Call]) -> Result<Map<String, Value>, GraphError> {
    let mut pools: Vec<Map<String, Value>> = Vec::new();
    let mut pool_names: Vec<String> = Vec::new();
    let mut listeners: Vec<Map<String, Value>> = Vec::new();
    let mut created: Vec<Option<Created>> = Vec::with_capacity(calls.len());
    let pool_name = |reference: &Ref, created: &[Option<Created>], names: &[String]| match reference
    {
        Ref::Created(i) => match created.get(*i) {
            Some(Some(Created::Pool(p))) => Some(names[*p].clone()),
            _ => None,
        },
        Ref::Id(_) => None,
    };
    for (index, call) in calls.iter().enumerate() {
        let made = match call {
            Call::CreatePool {
                name,
                protocol,
                tags,
            } => {
                pools.push(object(json!({
                    "name": name,
                    "protocol": pool_protocol(*protocol),
                    "lb_algorithm": "ROUND_ROBIN",
                    "tags": tags,
                    "members": [],
                })));
                pool_names.push(name.clone());
                Created::Pool(pools.len() - 1)
            }
            Call::CreateMember {
                pool: Ref::Created(i),
                address,
                weight,
                tags,
            } => {
                let Some(Some(Created::Pool(p))) = created.get(*i) else {
                    return Err(not_in_tree(index, call));
                };
                if let Some(Value::Array(members)) = pools[*p].get_mut("members") {
                    members.push(json!({
                        "address": address.ip().to_string(),
                        "protocol_port": address.port(),
                        "weight": weight,
                        "tags": tags,
                    }));
                }
                created.push(None);
                continue;
            }
            Call::CreateListener {
                name,
                protocol,
                port,
                default_pool,
                tls,
                tags,
            } => {
                let mut body = json!({
                    "name": name,
                    "protocol": listener_protocol(*protocol),
                    "protocol_port": port,
                    "tags": tags,
                    "l7policies": [],
                });
                add_tls(&mut body, tls.as_ref());
                let mut listener = object(body);
                if let Some(reference) = default_pool {
                    let name = pool_name(reference, &created, &pool_names)
                        .ok_or_else(|| not_in_tree(index, call))?;
                    listener.insert("default_pool".into(), json!({ "name": name }));
                }
                listeners.push(listener);
                Created::Listener(listeners.len() - 1)
            }
            Call::CreatePolicy {
                listener: Ref::Created(i),
                name,
                position,
                action,
                tags,
            } => {
                let Some(Some(Created::Listener(l))) = created.get(*i) else {
                    return Err(not_in_tree(index, call));
                };
                let l = *l;
                let mut policy = object(json!({
                    "name": name,
                    "position": position,
                    "tags": tags,
                    "rules": [],
                }));
                match action {
                    PolicyAction::Reject => {
                        policy.insert("action".into(), "REJECT".into());
                    }
                    PolicyAction::RedirectToUrl { url, code } => {
                        policy.insert("action".into(), "REDIRECT_TO_URL".into());
                        policy.insert("redirect_url".into(), url.clone().into());
                        policy.insert("redirect_http_code".into(), (*code).into());
                    }
                    PolicyAction::RedirectPrefix { prefix, code } => {
                        policy.insert("action".into(), "REDIRECT_PREFIX".into());
                        policy.insert("redirect_prefix".into(), prefix.clone().into());
                        policy.insert("redirect_http_code".into(), (*code).into());
                    }
                    PolicyAction::RedirectToPool(reference) => {
                        let name = pool_name(reference, &created, &pool_names)
                            .ok_or_else(|| not_in_tree(index, call))?;
                        policy.insert("action".into(), "REDIRECT_TO_POOL".into());
                        policy.insert("redirect_pool".into(), json!({ "name": name }));
                    }
                }
                let Some(Value::Array(policies)) = listeners[l].get_mut("l7policies") else {
                    return Err(not_in_tree(index, call));
                };
                policies.push(Value::Object(policy));
                Created::Policy(l, policies.len() - 1)
            }
            Call::CreateRule {
                policy: Ref::Created(i),
                rule,
                tags,
            } => {
                let Some(Some(Created::Policy(l, p))) = created.get(*i) else {
                    return Err(not_in_tree(index, call));
                };
                let rules = listeners[*l]
                    .get_mut("l7policies")
                    .and_then(|policies| policies.get_mut(*p))
                    .and_then(|policy| policy.get_mut("rules"))
                    .and_then(Value::as_array_mut);
                let Some(rules) = rules else {
                    return Err(not_in_tree(index, call));
                };
                rules.push(rule_body(rule, tags));
                created.push(None);
                continue;
            }
            other => return Err(not_in_tree(index, other)),
        };
        created.push(Some(made));
    }
    let mut body = Map::new();
    body.insert(
        "listeners".into(),
        Value::Array(listeners.into_iter().map(Value::Object).collect()),
    );
    body.insert(
        "pools".into(),
        Value::Array(pools.into_iter().map(Value::Object).collect()),
    );
    Ok(body)
}

fn object(value: Value) -> Map<String, Value> {
    match value {
        Value::Object(map) => map,
        _ => Map::new(),
    }
}

fn rule_body(rule: &Rule, tags: &[String]) -> Value {
    let mut body = object(json!({
        "type": rule.rule_type.as_str(),
        "compare_type": rule.compare_type.as_str(),
        "value": rule.value,
        "invert": rule.invert,
        "tags": tags,
    }));
    if let Some(key) = &rule.key {
        body.insert("key".into(), key.clone().into());
    }
    Value::Object(body)
}

fn pool_protocol(protocol: PoolProtocol) -> &'static str {
    match protocol {
        PoolProtocol::Http => "HTTP",
        PoolProtocol::Https => "HTTPS",
    }
}

fn listener_protocol(protocol: ListenerProtocol) -> &'static str {
    match protocol {
        ListenerProtocol::Http => "HTTP",
        ListenerProtocol::TerminatedHttps => "TERMINATED_HTTPS",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use nephrite_l7::model::{Action, CompareType, L7Config, Member, Policy, Pool, RuleType};

    fn config() -> L7Config {
        let mut config = L7Config::default();
        for (i, path) in ["/api", "/shop"].iter().enumerate() {
            let pool = format!("default/app{i}:80");
            let mut policy = Policy::new(
                format!("ingress/default/app{i}#1"),
                Action::RedirectToPool { pool: pool.clone() },
                vec![
                    Rule::new(RuleType::HostName, CompareType::EqualTo, "a.example.com"),
                    Rule::new(RuleType::Path, CompareType::StartsWith, *path),
                ],
            );
            policy.origin = format!("Ingress default/app{i}");
            config.http.insert_policy(policy, None).unwrap();
            config.pools.insert(
                pool.clone(),
                Pool {
                    id: pool,
                    members: vec![Member {
                        address: ([10, 0, 0, i as u8 + 1], 8080).into(),
                        weight: 1,
                    }],
                    ..Pool::default()
                },
            );
        }
        let mut redirect = Policy::new(
            "ingress/default/old#1",
            Action::RedirectPrefix {
                prefix: "https://new.example.com".into(),
                code: 301,
            },
            vec![Rule::new(
                RuleType::HostName,
                CompareType::EqualTo,
                "old.example.com",
            )],
        );
        redirect.origin = "Ingress default/old".into();
        config.http.insert_policy(redirect, None).unwrap();
        config.http.default_pool = Some("default/app0:80".into());
        config
    }

    #[test]
    fn the_body_holds_every_object_of_the_plan_once() {
        let owner = Ownership::new("c");
        let desired = Desired::from_config(&config());
        let calls = plan(&desired, &Tree::default(), &owner).unwrap();
        let body = tree_body(&desired, &owner).unwrap();
        let pools = body["pools"].as_array().unwrap();
        let listeners = body["listeners"].as_array().unwrap();
        assert_eq!(listeners.len(), 1);
        let listener = &listeners[0];
        assert_eq!(listener["protocol_port"], 80);
        assert_eq!(listener["default_pool"], json!({"name": "default/app0:80"}));
        let policies = listener["l7policies"].as_array().unwrap();
        let rules: usize = policies
            .iter()
            .map(|p| p["rules"].as_array().unwrap().len())
            .sum();
        let members: usize = pools
            .iter()
            .map(|p| p["members"].as_array().unwrap().len())
            .sum();
        // Every create of the plan is in the body, nothing else.
        assert_eq!(
            pools.len() + members + listeners.len() + policies.len() + rules,
            calls.len()
        );
        for (i, policy) in policies.iter().enumerate() {
            assert_eq!(policy["position"], i + 1);
        }
        let redirect = policies
            .iter()
            .find(|p| p["action"] == "REDIRECT_PREFIX")
            .unwrap();
        assert_eq!(redirect["redirect_http_code"], 301);
        assert!(redirect.get("redirect_pool").is_none());
        let forward = policies
            .iter()
            .find(|p| p["action"] == "REDIRECT_TO_POOL")
            .unwrap();
        let pool = forward["redirect_pool"]["name"].as_str().unwrap();
        assert!(pools.iter().any(|p| p["name"] == pool), "{pool} is defined");
        assert!(
            forward["tags"]
                .as_array()
                .unwrap()
                .contains(&json!("kuryr-l7-cluster:c"))
        );
    }

    #[test]
    fn calls_on_existing_objects_are_refused() {
        let calls = vec![Call::DeletePool { pool: "p".into() }];
        assert!(matches!(
            body_of(&calls),
            Err(GraphError::NotInTree { index: 0, .. })
        ));
        let member = vec![Call::CreateMember {
            pool: Ref::Id("p".into()),
            address: ([10, 0, 0, 1], 80).into(),
            weight: 1,
            tags: vec![],
        }];
        assert!(body_of(&member).is_err());
    }
}
