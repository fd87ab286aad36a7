//! Each [`Call`] as the Octavia v2 request that performs it: method, path under `/v2/lbaas`,
//! and JSON body, with the ids of objects created earlier in the plan filled in.

use serde_json::{Value, json};

use super::{
    ApplyError, Call, ListenerProtocol, ListenerTls, PolicyAction, PoolProtocol, Ref, Tree,
};

/// An HTTP method of the Octavia API.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Method {
    /// Create.
    Post,
    /// Update.
    Put,
    /// Delete.
    Delete,
}

/// One request to the Octavia v2 API.
#[derive(Debug, Clone, PartialEq)]
pub struct Request {
    /// The method.
    pub method: Method,
    /// The path, from `/v2/lbaas/`.
    pub path: String,
    /// The JSON body (none for a deletion).
    pub body: Option<Value>,
}

/// The name of the key in a create's answer that holds the object (`pool`, `member`, …),
/// whose `id` the executor records for later calls.
pub fn answer_key(call: &Call) -> Option<&'static str> {
    match call {
        Call::CreatePool { .. } => Some("pool"),
        Call::CreateMember { .. } => Some("member"),
        Call::CreateListener { .. } => Some("listener"),
        Call::CreatePolicy { .. } => Some("l7policy"),
        Call::CreateRule { .. } => Some("rule"),
        _ => None,
    }
}

fn pool_protocol(protocol: PoolProtocol) -> &'static str {
    match protocol {
        PoolProtocol::Http => "HTTP",
        PoolProtocol::Https => "HTTPS",
    }
}

/// A listener body's `default_tls_container_ref` and `sni_container_refs`.
pub fn add_tls(body: &mut Value, tls: Option<&ListenerTls>) {
    if let (Some(tls), Some(fields)) = (tls, body.as_object_mut()) {
        fields.insert(
            "default_tls_container_ref".to_owned(),
            Value::String(tls.default_container.clone()),
        );
        fields.insert(
            "sni_container_refs".to_owned(),
            Value::Array(
                tls.sni_containers
                    .iter()
                    .map(|r| Value::String(r.clone()))
                    .collect(),
            ),
        );
    }
}

fn listener_protocol(protocol: ListenerProtocol) -> &'static str {
    match protocol {
        ListenerProtocol::Http => "HTTP",
        ListenerProtocol::TerminatedHttps => "TERMINATED_HTTPS",
    }
}

fn rule_body(rule: &crate::model::Rule) -> serde_json::Map<String, Value> {
    let mut body = serde_json::Map::new();
    body.insert("type".into(), rule.rule_type.as_str().into());
    body.insert("compare_type".into(), rule.compare_type.as_str().into());
    body.insert("key".into(), rule.key.clone().into());
    body.insert("value".into(), rule.value.clone().into());
    body.insert("invert".into(), rule.invert.into());
    body
}

impl Call {
    /// The request performing this call on load balancer `loadbalancer`, given the id each
    /// earlier call of the plan created.
    pub fn request(
        &self,
        loadbalancer: &str,
        created: &[Option<String>],
    ) -> Result<Request, ApplyError> {
        let id = |reference: &Ref| Tree::resolve(reference, created).map(str::to_owned);
        let post = |path: String, body: Value| Request {
            method: Method::Post,
            path,
            body: Some(body),
        };
        let put = |path: String, body: Value| Request {
            method: Method::Put,
            path,
            body: Some(body),
        };
        let delete = |path: String| Request {
            method: Method::Delete,
            path,
            body: None,
        };
        let action = |action: &PolicyAction<Ref>| -> Result<Value, ApplyError> {
            let (name, pool, url, prefix, code) = match action {
                PolicyAction::Reject => ("REJECT", None, None, None, None),
                PolicyAction::RedirectToUrl { url, code } => (
                    "REDIRECT_TO_URL",
                    None,
                    Some(url.clone()),
                    None,
                    Some(*code),
                ),
                PolicyAction::RedirectPrefix { prefix, code } => (
                    "REDIRECT_PREFIX",
                    None,
                    None,
                    Some(prefix.clone()),
                    Some(*code),
                ),
                PolicyAction::RedirectToPool(pool) => {
                    ("REDIRECT_TO_POOL", Some(id(pool)?), None, None, None)
                }
            };
            Ok(json!({
                "action": name,
                "redirect_pool_id": pool,
                "redirect_url": url,
                "redirect_prefix": prefix,
                "redirect_http_code": code,
            }))
        };
        let merge = |mut base: Value, extra: Value| {
            if let (Some(base), Value::Object(extra)) = (base.as_object_mut(), extra) {
                base.extend(extra);
            }
            base
        };
        Ok(match self {
            Call::CreatePool {
                name,
                protocol,
                tags,
            } => post(
                "pools".into(),
                json!({"pool": {
                    "name": name,
                    "protocol": pool_protocol(*protocol),
                    "lb_algorithm": "ROUND_ROBIN",
                    "loadbalancer_id": loadbalancer,
                    "tags": tags,
                }}),
            ),
            Call::DeletePool { pool } => delete(format!("pools/{pool}")),
            Call::CreateMember {
                pool,
                address,
                weight,
                tags,
            } => post(
                format!("pools/{}/members", id(pool)?),
                json!({"member": {
                    "address": address.ip().to_string(),
                    "protocol_port": address.port(),
                    "weight": weight,
                    "tags": tags,
                }}),
            ),
            Call::UpdateMember {
                pool,
                member,
                weight,
            } => put(
                format!("pools/{pool}/members/{member}"),
                json!({"member": {"weight": weight}}),
            ),
            Call::DeleteMember { pool, member } => delete(format!("pools/{pool}/members/{member}")),
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
                    "loadbalancer_id": loadbalancer,
                    "default_pool_id": default_pool.as_ref().map(id).transpose()?,
                    "tags": tags,
                });
                add_tls(&mut body, tls.as_ref());
                post("listeners".into(), json!({ "listener": body }))
            }
            Call::UpdateListener {
                listener,
                default_pool,
                tls,
            } => {
                let mut body = json!({
                    "default_pool_id": default_pool.as_ref().map(id).transpose()?,
                });
                add_tls(&mut body, tls.as_ref());
                put(format!("listeners/{listener}"), json!({ "listener": body }))
            }
            Call::DeleteListener { listener } => delete(format!("listeners/{listener}")),
            Call::CreatePolicy {
                listener,
                name,
                position,
                action: what,
                tags,
            } => {
                let fields = json!({
                    "listener_id": id(listener)?,
                    "name": name,
                    "position": position,
                    "tags": tags,
                });
                post(
                    "l7policies".into(),
                    json!({ "l7policy": merge(fields, action(what)?) }),
                )
            }
            Call::UpdatePolicy {
                policy,
                position,
                action: what,
            } => put(
                format!("l7policies/{policy}"),
                json!({ "l7policy": merge(json!({"position": position}), action(what)?) }),
            ),
            Call::DeletePolicy { policy } => delete(format!("l7policies/{policy}")),
            Call::CreateRule { policy, rule, tags } => {
                let mut body = rule_body(rule);
                body.insert("tags".into(), json!(tags));
                post(
                    format!("l7policies/{}/rules", id(policy)?),
                    json!({ "rule": body }),
                )
            }
            Call::UpdateRule { policy, rule, to } => put(
                format!("l7policies/{policy}/rules/{rule}"),
                json!({ "rule": rule_body(to) }),
            ),
            Call::DeleteRule { policy, rule } => {
                delete(format!("l7policies/{policy}/rules/{rule}"))
            }
        })
    }
}
