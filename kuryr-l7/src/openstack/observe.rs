//! Reading a load balancer's L7 tree from Octavia into `nephrite_l7::octavia::Tree`, the
//! observed side of the plan.
//!
//! Reads are: the load balancer (which names its listeners and pools), the project's listeners,
//! pools and L7 policies (one list each, kept to those of this load balancer), and per pool its
//! members, per policy its rules. Every object keeps its id, name, tags and provisioning status,
//! so the planner can tell ours from foreign ones and replace what is in `ERROR`.

use std::collections::BTreeSet;
use std::net::{IpAddr, SocketAddr};

use nephrite_l7::model::{CompareType, DEFAULT_REDIRECT_CODE, Rule, RuleType};
use nephrite_l7::octavia::{
    ListenerProtocol, ListenerTls, ObservedListener, ObservedMember, ObservedPolicy, ObservedPool,
    ObservedRule, PolicyAction, PoolProtocol, ProvisioningStatus, Tree,
};
use reqwest::Method;

use super::ApiError;
use super::octavia::{self as api, L7Policy, L7Rule, Listener, Member, Octavia, Pool};

/// The L7 tree of load balancer `lb_id`, policies in position order.
pub async fn read_tree(octavia: &Octavia, lb_id: &str) -> Result<Tree, ApiError> {
    let lb = octavia
        .load_balancer(lb_id)
        .await?
        .ok_or_else(|| ApiError::Status {
            method: Method::GET,
            url: format!("loadbalancers/{lb_id}"),
            status: 404,
            message: format!("load balancer {lb_id} is gone"),
        })?;
    let listener_ids: BTreeSet<&str> = lb.listeners.iter().map(|l| l.id.as_str()).collect();
    let pool_ids: BTreeSet<&str> = lb.pools.iter().map(|p| p.id.as_str()).collect();
    let listeners: Vec<Listener> = if listener_ids.is_empty() {
        Vec::new()
    } else {
        octavia
            .listeners(&[("loadbalancer_id", lb_id)])
            .await?
            .into_iter()
            .filter(|l| listener_ids.contains(l.id.as_str()))
            .collect()
    };
    let pools: Vec<Pool> = if pool_ids.is_empty() {
        Vec::new()
    } else {
        octavia
            .pools(&[("loadbalancer_id", lb_id)])
            .await?
            .into_iter()
            .filter(|p| pool_ids.contains(p.id.as_str()))
            .collect()
    };
    let mut policies: Vec<L7Policy> = Vec::new();
    for listener in listeners.iter().filter(|l| !l.l7policies.is_empty()) {
        policies.extend(
            octavia
                .l7policies(&[("listener_id", listener.id.as_str())])
                .await?,
        );
    }
    let mut tree = Tree::default();
    // An object deleted between its list and the read of its children (by another client, or
    // the controller while a test reads) is gone: 404 leaves it out.
    for pool in pools {
        let members = if pool.members.is_empty() {
            Vec::new()
        } else {
            match octavia.members(&pool.id).await {
                Ok(members) => members,
                Err(e) if e.is_not_found() => continue,
                Err(e) => return Err(e),
            }
        };
        tree.pools.push(observed_pool(pool, members)?);
    }
    for listener in listeners {
        let mut mine: Vec<&L7Policy> = policies
            .iter()
            .filter(|p| p.listener_id == listener.id)
            .collect();
        mine.sort_by_key(|p| p.position);
        let mut observed = Vec::with_capacity(mine.len());
        for policy in mine {
            let rules = if policy.rules.is_empty() {
                Vec::new()
            } else {
                match octavia.l7rules(&policy.id).await {
                    Ok(rules) => rules,
                    Err(e) if e.is_not_found() => continue,
                    Err(e) => return Err(e),
                }
            };
            observed.push(observed_policy(policy, rules)?);
        }
        tree.listeners.push(ObservedListener {
            id: listener.id,
            name: listener.name,
            tags: listener.tags,
            status: status(&listener.provisioning_status),
            protocol: match listener.protocol.as_str() {
                "TERMINATED_HTTPS" => ListenerProtocol::TerminatedHttps,
                // Other protocols (TCP, UDP, HTTPS passthrough) are never ours; as foreign
                // listeners only their default pool matters to the plan.
                _ => ListenerProtocol::Http,
            },
            port: listener.protocol_port,
            default_pool: listener.default_pool_id,
            tls: listener
                .default_tls_container_ref
                .map(|default_container| ListenerTls {
                    default_container,
                    sni_containers: listener.sni_container_refs,
                }),
            policies: observed,
        });
    }
    Ok(tree)
}

/// Octavia's status as the planner's (`DELETED` counts as being deleted).
pub fn status(status: &api::ProvisioningStatus) -> ProvisioningStatus {
    match status {
        api::ProvisioningStatus::Active => ProvisioningStatus::Active,
        api::ProvisioningStatus::PendingCreate => ProvisioningStatus::PendingCreate,
        api::ProvisioningStatus::PendingUpdate => ProvisioningStatus::PendingUpdate,
        api::ProvisioningStatus::PendingDelete | api::ProvisioningStatus::Deleted => {
            ProvisioningStatus::PendingDelete
        }
        api::ProvisioningStatus::Error => ProvisioningStatus::Error,
    }
}

fn undecodable(what: &str, id: &str, detail: String) -> ApiError {
    ApiError::Decode {
        method: Method::GET,
        url: format!("{what}/{id}"),
        detail,
    }
}

/// A pool with its members.
pub fn observed_pool(pool: Pool, members: Vec<Member>) -> Result<ObservedPool, ApiError> {
    let members = members
        .into_iter()
        .map(|m| {
            let ip: IpAddr = m.address.parse().map_err(|_| {
                undecodable(
                    "members",
                    &m.id,
                    format!("member address {:?} is not an IP", m.address),
                )
            })?;
            Ok(ObservedMember {
                id: m.id,
                tags: m.tags,
                status: status(&m.provisioning_status),
                address: SocketAddr::new(ip, m.protocol_port),
                weight: m.weight,
            })
        })
        .collect::<Result<Vec<_>, ApiError>>()?;
    Ok(ObservedPool {
        id: pool.id,
        name: pool.name,
        tags: pool.tags,
        status: status(&pool.provisioning_status),
        protocol: if pool.protocol == "HTTPS" {
            PoolProtocol::Https
        } else {
            PoolProtocol::Http
        },
        members,
    })
}

/// A policy with its rules.
pub fn observed_policy(policy: &L7Policy, rules: Vec<L7Rule>) -> Result<ObservedPolicy, ApiError> {
    let code = policy.redirect_http_code.unwrap_or(DEFAULT_REDIRECT_CODE);
    let missing = |field: &str| {
        undecodable(
            "l7policies",
            &policy.id,
            format!("{} without {field}", policy.action),
        )
    };
    let action = match policy.action.as_str() {
        "REJECT" => PolicyAction::Reject,
        "REDIRECT_TO_URL" => PolicyAction::RedirectToUrl {
            url: policy
                .redirect_url
                .clone()
                .ok_or_else(|| missing("redirect_url"))?,
            code,
        },
        "REDIRECT_PREFIX" => PolicyAction::RedirectPrefix {
            prefix: policy
                .redirect_prefix
                .clone()
                .ok_or_else(|| missing("redirect_prefix"))?,
            code,
        },
        "REDIRECT_TO_POOL" => PolicyAction::RedirectToPool(
            policy
                .redirect_pool_id
                .clone()
                .ok_or_else(|| missing("redirect_pool_id"))?,
        ),
        other => {
            return Err(undecodable(
                "l7policies",
                &policy.id,
                format!("unknown action {other:?}"),
            ));
        }
    };
    let rules = rules
        .into_iter()
        .map(|r| {
            let rule_type: RuleType = r
                .rule_type
                .parse()
                .map_err(|e| undecodable("l7rules", &r.id, format!("{e}")))?;
            let compare_type: CompareType = r
                .compare_type
                .parse()
                .map_err(|e| undecodable("l7rules", &r.id, format!("{e}")))?;
            Ok(ObservedRule {
                id: r.id,
                tags: r.tags,
                status: status(&r.provisioning_status),
                rule: Rule {
                    rule_type,
                    compare_type,
                    key: r.key.filter(|k| !k.is_empty()),
                    value: r.value,
                    invert: r.invert,
                },
            })
        })
        .collect::<Result<Vec<_>, ApiError>>()?;
    Ok(ObservedPolicy {
        id: policy.id.clone(),
        name: policy.name.clone(),
        tags: policy.tags.clone(),
        status: status(&policy.provisioning_status),
        action,
        rules,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_policy_and_its_rules_read_as_the_planner_sees_them() {
        let policy: L7Policy = serde_json::from_value(json!({
            "id": "p1", "name": "Ingress shop/web 0", "listener_id": "l1",
            "action": "REDIRECT_TO_POOL", "position": 2, "redirect_pool_id": "pool1",
            "redirect_url": null, "redirect_prefix": null, "redirect_http_code": null,
            "rules": [{"id": "r1"}], "provisioning_status": "PENDING_UPDATE",
            "tags": ["kuryr-l7-cluster:c"],
        }))
        .unwrap();
        let rule: L7Rule = serde_json::from_value(json!({
            "id": "r1", "type": "HEADER", "compare_type": "REGEX", "key": "X-A",
            "value": "^b$", "invert": true, "provisioning_status": "ACTIVE", "tags": [],
        }))
        .unwrap();
        let observed = observed_policy(&policy, vec![rule]).unwrap();
        assert_eq!(
            observed.action,
            PolicyAction::RedirectToPool("pool1".to_owned())
        );
        assert_eq!(observed.status, ProvisioningStatus::PendingUpdate);
        assert_eq!(
            observed.rules[0].rule,
            Rule::new(RuleType::Header, CompareType::Regex, "^b$")
                .with_key("X-A")
                .inverted()
        );
    }

    #[test]
    fn a_redirect_without_its_target_is_named() {
        let policy: L7Policy = serde_json::from_value(json!({
            "id": "p9", "listener_id": "l1", "action": "REDIRECT_TO_URL", "position": 1,
            "provisioning_status": "ACTIVE",
        }))
        .unwrap();
        let error = observed_policy(&policy, vec![]).unwrap_err().to_string();
        assert!(
            error.contains("l7policies/p9") && error.contains("redirect_url"),
            "{error}"
        );
    }
}
