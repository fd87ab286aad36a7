use std::collections::BTreeMap;
use std::net::SocketAddr;

use proptest::prelude::*;

use super::*;
use crate::model::{CompareType, Member, Rule, RuleType};

const CLUSTER: &str = "prod";
const POOLS: [&str; 5] = ["p0", "p1", "p2", "p3", "p4"];
const POLICIES: [&str; 5] = ["a", "b", "c", "d", "e"];

fn owner() -> Ownership {
    Ownership::new(CLUSTER)
}

fn address(i: usize) -> SocketAddr {
    format!("10.0.0.{}:80", i + 1).parse().unwrap()
}

fn rule(i: usize) -> Rule {
    match i % 4 {
        0 => Rule::new(RuleType::HostName, CompareType::EqualTo, "shop.example.com"),
        1 => Rule::new(RuleType::Path, CompareType::StartsWith, "/cart"),
        2 => Rule::new(RuleType::Header, CompareType::EqualTo, "1").with_key("X-Beta"),
        _ => Rule::new(RuleType::Path, CompareType::EqualTo, "/").inverted(),
    }
}

fn tags(owned: bool) -> Vec<String> {
    if owned {
        owner().tags("Ingress shop/web")
    } else {
        vec!["someone-else".to_owned()]
    }
}

fn status() -> impl Strategy<Value = ProvisioningStatus> {
    prop_oneof![
        6 => Just(ProvisioningStatus::Active),
        1 => Just(ProvisioningStatus::PendingCreate),
        1 => Just(ProvisioningStatus::PendingUpdate),
        1 => Just(ProvisioningStatus::PendingDelete),
        1 => Just(ProvisioningStatus::Error),
    ]
}

fn owned() -> impl Strategy<Value = bool> {
    prop::bool::weighted(0.75)
}

fn protocol(https: bool) -> PoolProtocol {
    if https {
        PoolProtocol::Https
    } else {
        PoolProtocol::Http
    }
}

prop_compose! {
    fn desired()(
        pools in prop::collection::btree_map(
            0..4usize,
            (any::<bool>(), prop::collection::btree_map(0..4usize, 0..3u32, 0..4)),
            0..4,
        ),
        names in prop::sample::subsequence(POLICIES.to_vec(), 0..=5).prop_shuffle(),
        actions in prop::collection::vec(
            (prop::option::weighted(0.8, 0..8usize), prop::collection::vec(0..4usize, 0..3)),
            5,
        ),
        default_pool in prop::option::of(0..8usize),
    ) -> Desired {
        let pools: Vec<DesiredPool> = pools
            .into_iter()
            .map(|(name, (https, members))| DesiredPool {
                name: POOLS[name].to_owned(),
                protocol: protocol(https),
                members: members
                    .into_iter()
                    .map(|(a, weight)| Member { address: address(a), weight })
                    .collect(),
                object: "Service shop/web".to_owned(),
            })
            .collect();
        let pick = |i: Option<usize>| -> Option<String> {
            i.filter(|_| !pools.is_empty()).map(|i| pools[i % pools.len()].name.clone())
        };
        let policies = names
            .iter()
            .zip(actions)
            .map(|(name, (pool, rules))| DesiredPolicy {
                name: (*name).to_owned(),
                action: pick(pool).map_or(PolicyAction::Reject, PolicyAction::RedirectToPool),
                rules: rules.into_iter().map(rule).collect(),
                object: format!("Ingress shop/{name}"),
            })
            .collect();
        Desired {
            listeners: vec![DesiredListener {
                name: HTTP_LISTENER.to_owned(),
                protocol: ListenerProtocol::Http,
                port: 80,
                default_pool: pick(default_pool),
                tls: None,
                policies,
            }],
            pools,
        }
    }
}

type GenMember = (usize, u32, bool, ProvisioningStatus);
type GenPool = (usize, bool, ProvisioningStatus, bool, Vec<GenMember>);
type GenRule = (usize, bool, ProvisioningStatus);
type GenPolicy = (usize, bool, ProvisioningStatus, Option<usize>, Vec<GenRule>);
type GenListener = (
    bool,
    bool,
    ProvisioningStatus,
    bool,
    Option<usize>,
    Vec<GenPolicy>,
);

fn gen_pool() -> impl Strategy<Value = GenPool> {
    (
        0..5usize,
        owned(),
        status(),
        any::<bool>(),
        prop::collection::vec((0..4usize, 0..3u32, owned(), status()), 0..4),
    )
}

fn gen_policy() -> impl Strategy<Value = GenPolicy> {
    (
        0..5usize,
        owned(),
        status(),
        prop::option::weighted(0.8, 0..8usize),
        prop::collection::vec((0..4usize, owned(), status()), 0..3),
    )
}

fn gen_listener() -> impl Strategy<Value = GenListener> {
    (
        prop::bool::weighted(0.8),
        owned(),
        status(),
        prop::bool::weighted(0.9),
        prop::option::of(0..8usize),
        prop::collection::vec(gen_policy(), 0..6),
    )
}

/// An observed tree: owned and foreign objects in every status, duplicates, strays.
fn tree() -> impl Strategy<Value = Tree> {
    (
        prop::collection::vec(gen_pool(), 0..6),
        prop::collection::vec(gen_listener(), 0..3),
    )
        .prop_map(|(pools, listeners)| {
            let mut next = 0;
            let mut id = || {
                next += 1;
                format!("old-{next}")
            };
            let pools: Vec<ObservedPool> = pools
                .into_iter()
                .map(|(name, owned, status, https, members)| ObservedPool {
                    id: id(),
                    name: POOLS[name].to_owned(),
                    tags: tags(owned),
                    status,
                    protocol: protocol(https),
                    members: members
                        .into_iter()
                        .map(|(a, weight, owned, status)| ObservedMember {
                            id: id(),
                            tags: tags(owned),
                            status,
                            address: address(a),
                            weight,
                        })
                        .collect(),
                })
                .collect();
            let pool_id = |i: Option<usize>| -> Option<String> {
                i.filter(|_| !pools.is_empty())
                    .map(|i| pools[i % pools.len()].id.clone())
            };
            let listeners = listeners
                .into_iter()
                .map(
                    |(ours_name, owned, status, port_80, default, policies)| ObservedListener {
                        id: id(),
                        name: if ours_name { HTTP_LISTENER } else { "other" }.to_owned(),
                        tags: tags(owned),
                        status,
                        protocol: ListenerProtocol::Http,
                        port: if port_80 { 80 } else { 8080 },
                        default_pool: pool_id(default),
                        tls: None,
                        policies: policies
                            .into_iter()
                            .map(|(name, owned, status, pool, rules)| ObservedPolicy {
                                id: id(),
                                name: POLICIES[name].to_owned(),
                                tags: tags(owned),
                                status,
                                action: pool_id(pool)
                                    .map_or(PolicyAction::Reject, PolicyAction::RedirectToPool),
                                rules: rules
                                    .into_iter()
                                    .map(|(r, owned, status)| ObservedRule {
                                        id: id(),
                                        tags: tags(owned),
                                        status,
                                        rule: rule(r),
                                    })
                                    .collect(),
                            })
                            .collect(),
                    },
                )
                .collect();
            Tree { listeners, pools }
        })
}

fn apply(tree: &Tree, plan: &[Call]) -> Tree {
    static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let mut applied = tree.clone();
    applied.settle();
    let mut new_id = || {
        let next = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        format!("new-{next}")
    };
    if let Err(err) = applied.apply_all(plan, &mut new_id) {
        panic!("Octavia refuses the plan: {err}\nplan: {plan:#?}\ntree: {tree:#?}");
    }
    applied
}

/// Says what in `tree` differs from `desired` (owned objects), or `Ok`.
fn check_desired(desired: &Desired, tree: &Tree) -> Result<(), String> {
    let own = owner();
    let pool_name = |id: &str| {
        tree.pools
            .iter()
            .find(|p| p.id == id)
            .filter(|p| own.owns(&p.tags))
            .map(|p| p.name.clone())
    };
    // An owned duplicate may stay only while something foreign holds it.
    let held_pool = |id: &str| {
        tree.listeners.iter().any(|l| {
            let foreign_policies = l.policies.iter().any(|p| !own.owns(&p.tags));
            ((!own.owns(&l.tags) || foreign_policies) && l.default_pool.as_deref() == Some(id))
                || l.policies
                    .iter()
                    .any(|p| !own.owns(&p.tags) && p.action.pool().map(String::as_str) == Some(id))
        })
    };
    for wanted in &desired.pools {
        let mut expected: Vec<(SocketAddr, u32)> = wanted
            .members
            .iter()
            .map(|m| (m.address, m.weight))
            .collect();
        expected.sort();
        let members = |pool: &ObservedPool| {
            let mut members: Vec<(SocketAddr, u32)> = pool
                .members
                .iter()
                .filter(|m| own.owns(&m.tags))
                .map(|m| (m.address, m.weight))
                .collect();
            members.sort();
            members
        };
        let found: Vec<&ObservedPool> = tree
            .pools
            .iter()
            .filter(|p| own.owns(&p.tags) && p.name == wanted.name && p.protocol == wanted.protocol)
            .collect();
        let right = found.iter().filter(|p| members(p) == expected).count();
        let held = found.iter().filter(|p| held_pool(&p.id)).count();
        if right == 0 || found.len() - right > held {
            return Err(format!("pool {}: {found:?}", wanted.name));
        }
    }
    for wanted in &desired.listeners {
        let found: Vec<&ObservedListener> = tree
            .listeners
            .iter()
            .filter(|l| {
                own.owns(&l.tags)
                    && l.name == wanted.name
                    && l.port == wanted.port
                    && l.status == ProvisioningStatus::Active
            })
            .collect();
        // The one holding our policies; an owned duplicate may stay only while foreign
        // policies hold it, and then holds none of ours.
        let ours = |l: &ObservedListener| l.policies.iter().any(|p| own.owns(&p.tags));
        let held = |l: &ObservedListener| l.policies.iter().any(|p| !own.owns(&p.tags));
        let Some(listener) = found.iter().find(|l| ours(l)).or(found.first()).copied() else {
            return Err(format!("listener {}: none", wanted.name));
        };
        let others = found.iter().filter(|l| l.id != listener.id);
        if others.clone().any(|l| !held(l) || ours(l)) {
            return Err(format!("listener {}: {found:?}", wanted.name));
        }
        if listener.default_pool.as_deref().and_then(pool_name) != wanted.default_pool {
            return Err(format!("listener default pool {:?}", listener.default_pool));
        }
        let ours: Vec<&ObservedPolicy> = listener
            .policies
            .iter()
            .filter(|p| own.owns(&p.tags))
            .collect();
        let names: Vec<&str> = ours.iter().map(|p| p.name.as_str()).collect();
        let expected: Vec<&str> = wanted.policies.iter().map(|p| p.name.as_str()).collect();
        if names != expected {
            return Err(format!("policies {names:?}, expected {expected:?}"));
        }
        for (policy, wanted) in ours.iter().zip(&wanted.policies) {
            let action = policy
                .action
                .try_map_pool(|id| pool_name(id).ok_or(()))
                .map_err(|()| format!("policy {} uses a pool not ours", policy.name))?;
            if action != wanted.action {
                return Err(format!("policy {}: action {action:?}", policy.name));
            }
            let mut rules: Vec<&Rule> = policy
                .rules
                .iter()
                .filter(|r| own.owns(&r.tags))
                .map(|r| &r.rule)
                .collect();
            rules.sort();
            let mut expected: Vec<&Rule> = wanted.rules.iter().collect();
            expected.sort();
            if rules != expected {
                return Err(format!("policy {}: rules {rules:?}", policy.name));
            }
        }
    }
    Ok(())
}

/// Every foreign object of `before` is in `after` as it was.
fn foreign_untouched(before: &Tree, after: &Tree) -> Result<(), String> {
    let own = owner();
    let mut settled = before.clone();
    settled.settle();
    for pool in settled.pools.iter().filter(|p| !own.owns(&p.tags)) {
        if !after.pools.contains(pool) {
            return Err(format!("foreign pool {} changed", pool.id));
        }
    }
    let policies = |tree: &Tree| -> BTreeMap<String, ObservedPolicy> {
        tree.listeners
            .iter()
            .flat_map(|l| &l.policies)
            .map(|p| (p.id.clone(), p.clone()))
            .collect()
    };
    let after_policies = policies(after);
    for (id, policy) in policies(&settled) {
        if !own.owns(&policy.tags) && after_policies.get(&id) != Some(&policy) {
            return Err(format!("foreign policy {id} changed"));
        }
    }
    for listener in settled.listeners.iter().filter(|l| !own.owns(&l.tags)) {
        let found = after.listeners.iter().find(|l| l.id == listener.id);
        if found.is_none_or(|l| l.default_pool != listener.default_pool) {
            return Err(format!("foreign listener {} changed", listener.id));
        }
    }
    Ok(())
}

/// The ids of owned objects in `tree`.
fn owned_ids(tree: &Tree) -> Vec<String> {
    let own = owner();
    let mut ids = Vec::new();
    for pool in &tree.pools {
        if own.owns(&pool.tags) {
            ids.push(pool.id.clone());
            ids.extend(
                pool.members
                    .iter()
                    .filter(|m| own.owns(&m.tags))
                    .map(|m| m.id.clone()),
            );
        }
    }
    for listener in &tree.listeners {
        if own.owns(&listener.tags) {
            ids.push(listener.id.clone());
        }
        for policy in listener.policies.iter().filter(|p| own.owns(&p.tags)) {
            ids.push(policy.id.clone());
            ids.extend(
                policy
                    .rules
                    .iter()
                    .filter(|r| own.owns(&r.tags))
                    .map(|r| r.id.clone()),
            );
        }
    }
    ids
}

fn id(r: &Ref) -> Option<&str> {
    match r {
        Ref::Id(id) => Some(id),
        Ref::Created(_) => None,
    }
}

/// Every existing id a call names.
fn named_ids(call: &Call) -> Vec<&str> {
    match call {
        Call::CreatePool { .. } => vec![],
        Call::DeletePool { pool } => vec![pool],
        Call::CreateMember { pool, .. } => id(pool).into_iter().collect(),
        Call::UpdateMember { pool, member, .. } | Call::DeleteMember { pool, member } => {
            vec![pool, member]
        }
        Call::CreateListener { default_pool, .. } => default_pool.iter().filter_map(id).collect(),
        Call::UpdateListener {
            listener,
            default_pool,
            ..
        } => {
            let mut ids = vec![listener.as_str()];
            ids.extend(default_pool.iter().filter_map(id));
            ids
        }
        Call::DeleteListener { listener } => vec![listener],
        Call::CreatePolicy {
            listener, action, ..
        } => id(listener)
            .into_iter()
            .chain(action.pool().and_then(id))
            .collect(),
        Call::UpdatePolicy { policy, action, .. } => std::iter::once(policy.as_str())
            .chain(action.pool().and_then(id))
            .collect(),
        Call::DeletePolicy { policy } => vec![policy],
        Call::CreateRule { policy, .. } => id(policy).into_iter().collect(),
        Call::UpdateRule { policy, rule, .. } | Call::DeleteRule { policy, rule } => {
            vec![policy, rule]
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(400))]

    /// The plan turns any observed tree into the desired one, Octavia accepting every call, with
    /// the least number of calls; planning again finds nothing to do.
    #[test]
    fn the_plan_reaches_the_desired_tree_minimally_and_a_second_plan_is_empty(
        desired in desired(),
        observed in tree(),
    ) {
        let plan = plan(&desired, &observed, &owner()).unwrap();
        let after = apply(&observed, &plan);
        prop_assert_eq!(check_desired(&desired, &after), Ok(()));
        prop_assert_eq!(foreign_untouched(&observed, &after), Ok(()));
        prop_assert_eq!(plan.len(), minimal_calls(&desired, &observed, &owner()));
        let again = super::plan(&desired, &after, &owner()).unwrap();
        prop_assert!(again.is_empty(), "second plan: {:#?}", again);
    }

    /// No call names a foreign object.
    #[test]
    fn foreign_objects_are_never_in_a_plan(desired in desired(), observed in tree()) {
        let owned = owned_ids(&observed);
        for call in plan(&desired, &observed, &owner()).unwrap() {
            for id in named_ids(&call) {
                prop_assert!(owned.iter().any(|o| o == id), "{:?} names {}", call, id);
            }
        }
    }

    /// Stopped after any call (a crash), planned again from what Octavia holds, the plan still
    /// reaches the desired tree with no duplicate.
    #[test]
    fn an_interrupted_plan_replanned_converges_without_duplicates(
        desired in desired(),
        observed in tree(),
        cut in any::<prop::sample::Index>(),
    ) {
        let plan = plan(&desired, &observed, &owner()).unwrap();
        let done = cut.index(plan.len() + 1);
        let partial = apply(&observed, &plan[..done]);
        let rest = super::plan(&desired, &partial, &owner()).unwrap();
        let after = apply(&partial, &rest);
        prop_assert_eq!(check_desired(&desired, &after), Ok(()));
        prop_assert!(super::plan(&desired, &after, &owner()).unwrap().is_empty());
    }
}

fn pool(id: &str, name: &str, owned: bool) -> ObservedPool {
    ObservedPool {
        id: id.into(),
        name: name.into(),
        tags: tags(owned),
        status: ProvisioningStatus::Active,
        protocol: PoolProtocol::Http,
        members: Vec::new(),
    }
}

fn policy(id: &str, name: &str, owned: bool, pool: &str) -> ObservedPolicy {
    ObservedPolicy {
        id: id.into(),
        name: name.into(),
        tags: tags(owned),
        status: ProvisioningStatus::Active,
        action: PolicyAction::RedirectToPool(pool.into()),
        rules: Vec::new(),
    }
}

fn listener(policies: Vec<ObservedPolicy>) -> ObservedListener {
    ObservedListener {
        id: "l".into(),
        name: HTTP_LISTENER.into(),
        tags: tags(true),
        status: ProvisioningStatus::Active,
        protocol: ListenerProtocol::Http,
        port: 80,
        default_pool: None,
        tls: None,
        policies,
    }
}

#[test]
fn a_pool_a_foreign_policy_uses_is_not_deleted() {
    let observed = Tree {
        listeners: vec![listener(vec![
            policy("x", "theirs", false, "old"),
            policy("y", "a", true, "old"),
        ])],
        pools: vec![pool("old", "p9", true)],
    };
    let desired = Desired {
        listeners: vec![DesiredListener {
            name: HTTP_LISTENER.into(),
            protocol: ListenerProtocol::Http,
            port: 80,
            default_pool: None,
            tls: None,
            policies: Vec::new(),
        }],
        pools: Vec::new(),
    };
    let plan = plan(&desired, &observed, &owner()).unwrap();
    assert_eq!(plan, [Call::DeletePolicy { policy: "y".into() }]);
}

#[test]
fn positions_move_the_fewest_policies_and_new_ones_go_right_after_their_predecessor() {
    let observed = Tree {
        listeners: vec![listener(vec![
            policy("1", "a", true, "p"),
            policy("2", "b", true, "p"),
            policy("3", "c", true, "p"),
            policy("4", "d", true, "p"),
        ])],
        pools: vec![pool("p", "p0", true)],
    };
    let wanted = |name: &str| DesiredPolicy {
        name: name.into(),
        action: PolicyAction::RedirectToPool("p0".into()),
        rules: Vec::new(),
        object: "Ingress shop/web".into(),
    };
    // d moves to the front, x is new between b and c.
    let desired = Desired {
        listeners: vec![DesiredListener {
            name: HTTP_LISTENER.into(),
            protocol: ListenerProtocol::Http,
            port: 80,
            default_pool: None,
            tls: None,
            policies: ["d", "a", "b", "x", "c"].into_iter().map(wanted).collect(),
        }],
        pools: vec![DesiredPool {
            name: "p0".into(),
            protocol: PoolProtocol::Http,
            members: Vec::new(),
            object: "Service shop/web".into(),
        }],
    };
    let plan = plan(&desired, &observed, &owner()).unwrap();
    let positions: Vec<(String, usize)> = plan
        .iter()
        .map(|call| match call {
            Call::UpdatePolicy {
                policy, position, ..
            } => (policy.clone(), *position),
            Call::CreatePolicy { name, position, .. } => (name.clone(), *position),
            other => panic!("unexpected {other:?}"),
        })
        .collect();
    assert_eq!(positions, [("4".into(), 1), ("x".into(), 4)]);
    let after = apply(&observed, &plan);
    let names: Vec<&str> = after.listeners[0]
        .policies
        .iter()
        .map(|p| p.name.as_str())
        .collect();
    assert_eq!(names, ["d", "a", "b", "x", "c"]);
}

#[test]
fn requests_name_objects_created_earlier_in_the_plan() {
    let desired = Desired::from_config(&{
        let mut config = crate::model::L7Config::default();
        config.pools.insert(
            "shop/web:80".into(),
            crate::model::Pool {
                id: "shop/web:80".into(),
                members: vec![Member {
                    address: address(0),
                    weight: 1,
                }],
                ..Default::default()
            },
        );
        let mut policy = crate::model::Policy::new(
            "shop-web",
            crate::model::Action::RedirectToPool {
                pool: "shop/web:80".into(),
            },
            vec![rule(0)],
        );
        policy.origin = "Ingress shop/web".into();
        config.http.insert_policy(policy, None).unwrap();
        config
    });
    let plan = plan(&desired, &Tree::default(), &owner()).unwrap();
    assert_eq!(plan.len(), 5, "{plan:#?}");
    let mut created = Vec::new();
    let mut bodies = Vec::new();
    for (i, call) in plan.iter().enumerate() {
        let request = call.request("lb-1", &created).unwrap();
        bodies.push((request.method, request.path, request.body));
        created.push(answer_key(call).map(|_| format!("id-{i}")));
    }
    assert_eq!(bodies[0].1, "pools");
    assert_eq!(
        bodies[0].2.as_ref().unwrap()["pool"]["tags"],
        serde_json::json!(["kuryr-l7-cluster:prod", "kuryr-l7-object:Service shop/web"])
    );
    assert_eq!(bodies[1].1, "pools/id-0/members");
    assert_eq!(bodies[2].1, "listeners");
    assert_eq!(
        bodies[2].2.as_ref().unwrap()["listener"]["loadbalancer_id"],
        "lb-1"
    );
    assert_eq!(bodies[3].1, "l7policies");
    let policy = &bodies[3].2.as_ref().unwrap()["l7policy"];
    assert_eq!(policy["listener_id"], "id-2");
    assert_eq!(policy["redirect_pool_id"], "id-0");
    assert_eq!(policy["action"], "REDIRECT_TO_POOL");
    assert_eq!(bodies[4].1, "l7policies/id-3/rules");
    assert_eq!(bodies[4].2.as_ref().unwrap()["rule"]["type"], "HOST_NAME");
    assert_eq!(bodies[4].0, Method::Post);
    // A reference to a call that created nothing is refused, not guessed.
    assert_eq!(
        plan[1].request("lb-1", &[None]),
        Err(ApplyError::Dangling(0))
    );
}

#[test]
fn a_redirect_to_a_fixed_host_is_octavias_and_one_keeping_the_request_host_is_left_out() {
    let mut config = crate::model::L7Config::default();
    let redirect = |name: &str, host: Option<&str>, path: Option<crate::model::PathChange>| {
        crate::model::Policy::new(
            name,
            crate::model::Action::Redirect {
                scheme: "https".into(),
                host: host.map(Into::into),
                port: Some(8443),
                path,
                code: 301,
            },
            vec![Rule::new(
                RuleType::Path,
                CompareType::EqualTo,
                format!("/{name}"),
            )],
        )
    };
    for policy in [
        redirect("prefix", Some("a.example.com"), None),
        redirect(
            "full",
            Some("a.example.com"),
            Some(crate::model::PathChange::Full("/new".into())),
        ),
        redirect("own-host", None, None),
    ] {
        config.http.insert_policy(policy, None).unwrap();
    }
    let desired = Desired::from_config(&config);
    let actions: Vec<(&str, &PolicyAction<String>)> = desired.listeners[0]
        .policies
        .iter()
        .map(|p| (p.name.as_str(), &p.action))
        .collect();
    assert_eq!(
        actions,
        [
            (
                "prefix",
                &PolicyAction::RedirectPrefix {
                    prefix: "https://a.example.com:8443".into(),
                    code: 301
                }
            ),
            (
                "full",
                &PolicyAction::RedirectToUrl {
                    url: "https://a.example.com:8443/new".into(),
                    code: 301
                }
            ),
        ]
    );
    let left_out = unexpressed_in(&config);
    assert_eq!(left_out.len(), 1, "{left_out:?}");
    assert!(left_out[0].refused && left_out[0].policy == "own-host");
    assert_eq!(left_out[0].field, "action REDIRECT host");
}
