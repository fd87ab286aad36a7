//! `kill -9` of `kuryr-l7 controller --driver octavia` during syncs of 50 Ingresses, against the
//! real Octavia 19 and Neutron 29 and the in-memory Kubernetes API server, then a restart: the
//! tree read back from Octavia is exactly the desired one (the plan from it is empty, and no
//! owned policy, rule, pool or member is there twice), with one load balancer.
//!
//! The controller reaches Octavia through a recording proxy ([`support::proxy`]) that holds one
//! chosen mutating call; the test kills the controller while that call is in flight, then either
//! forwards it (Octavia does it, the answer is lost) or drops it (it never arrived). The calls
//! chosen come from a seed (`KURYR_CRASH_SEED`, printed; the default is fixed), so a failure
//! is replayed with the same seed:
//!
//! 1. Two controllers start together on 50 Ingresses with no Router LB: only the Lease holder
//!    looks for it and creates it, with the whole L7 tree in one call
//!    (`POST /v2/lbaas/loadbalancers`). The holder is killed during that call, the call is
//!    forwarded; the standby takes the Lease and finds the load balancer by name and tags:
//!    one create call ever, one load balancer, the tree complete.
//! 2. A batch of changes (paths edited, endpoints replaced, Ingresses deleted and added) is
//!    synced call by call; the controller is killed during a seeded call of that sync and of
//!    the sync after its restart, one call forwarded and the other dropped (which first, the
//!    seed says); the third start converges.
//!
//! No timing assumption: every wait polls (generously) for what it needs. One `#[test]`: the
//! services start once per binary.

mod support;

use std::collections::BTreeMap;

use anyhow::{Context, ensure};
use kube::api::DeleteParams;
use nephrite_kuryr_l7::openstack::observe::read_tree;
use nephrite_kuryr_l7::openstack::octavia::ProvisioningStatus;
use nephrite_l7::octavia::{Desired, Ownership, Tree, plan};
use nephrite_test_services::OpenStack;
use support::daemon::Daemon;
use support::openstack::{PATIENCE, World, eventually, log_text};
use support::proxy::Proxy;

const TEST: &str = "kill_nine_during_syncs_leaves_exactly_the_desired_tree";
const INGRESSES: usize = 50;
const SERVICES: usize = 5;
const DEFAULT_SEED: u64 = 0x2424_5eed_0050_0009;
const LEASE: &str = "kuryr-l7-controller";
const CREATE_LB: &str = "POST /v2/lbaas/loadbalancers";

#[test]
fn kill_nine_during_syncs_leaves_exactly_the_desired_tree() -> anyhow::Result<()> {
    let cloud = match OpenStack::shared() {
        Ok(cloud) => cloud,
        Err(e) => {
            e.skip(TEST);
            return Ok(());
        }
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    runtime.block_on(scenario(cloud))
}

/// xorshift64: the kill points from the seed.
struct Seeded(u64);

impl Seeded {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    /// A number in 1..=n.
    fn one_to(&mut self, n: usize) -> usize {
        1 + (self.next() % n.max(1) as u64) as usize
    }
}

/// Service `svc<s>` with two endpoints (last octets `members`).
fn service(s: usize, members: [u8; 2]) -> String {
    format!(
        "apiVersion: v1\nkind: Service\nmetadata: {{name: svc{s}, namespace: default}}\nspec:\n  ports: [{{name: http, port: 80}}]\n\
---\n\
apiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\nmetadata:\n  name: svc{s}-1\n  namespace: default\n  labels: {{kubernetes.io/service-name: svc{s}}}\naddressType: IPv4\nports: [{{name: http, port: 8080}}]\nendpoints:\n- addresses: [\"10.1.{s}.{}\"]\n- addresses: [\"10.1.{s}.{}\"]\n",
        members[0], members[1]
    )
}

/// Ingress `app<i>`: `app<i>.example.com` under `/v<version>` to Service `svc<i % SERVICES>`
/// (Ingresses share their Services' pools, as many Ingresses on a few Services do: Octavia
/// 19's worker takes seconds per pool on every change of the load balancer).
fn ingress(i: usize, version: u32) -> String {
    format!(
        "apiVersion: networking.k8s.io/v1\nkind: Ingress\nmetadata: {{name: app{i}, namespace: default}}\nspec:\n  rules:\n  - host: app{i}.example.com\n    http:\n      paths:\n      - {{path: /v{version}, pathType: Prefix, backend: {{service: {{name: svc{}, port: {{number: 80}}}}}}}}\n",
        i % SERVICES
    )
}

/// What is there twice among the owned objects (by the identities the planner uses: names,
/// member addresses, rule contents).
fn duplicates(tree: &Tree, owner: &Ownership) -> Vec<String> {
    fn twice<T: Ord + std::fmt::Debug>(what: &str, items: Vec<T>, found: &mut Vec<String>) {
        let mut counts: BTreeMap<T, usize> = BTreeMap::new();
        for item in items {
            *counts.entry(item).or_default() += 1;
        }
        found.extend(
            counts
                .into_iter()
                .filter(|(_, n)| *n > 1)
                .map(|(item, n)| format!("{what} {item:?} ×{n}")),
        );
    }
    let mut found = Vec::new();
    let listeners: Vec<_> = tree
        .listeners
        .iter()
        .filter(|l| owner.owns(&l.tags))
        .collect();
    twice(
        "listener",
        listeners.iter().map(|l| l.name.clone()).collect(),
        &mut found,
    );
    for listener in &listeners {
        let policies: Vec<_> = listener
            .policies
            .iter()
            .filter(|p| owner.owns(&p.tags))
            .collect();
        twice(
            "policy",
            policies.iter().map(|p| p.name.clone()).collect(),
            &mut found,
        );
        for policy in policies {
            twice(
                &format!("rule of {}", policy.name),
                policy.rules.iter().map(|r| r.rule.clone()).collect(),
                &mut found,
            );
        }
    }
    let pools: Vec<_> = tree.pools.iter().filter(|p| owner.owns(&p.tags)).collect();
    twice(
        "pool",
        pools.iter().map(|p| p.name.clone()).collect(),
        &mut found,
    );
    for pool in pools {
        twice(
            &format!("member of {}", pool.name),
            pool.members.iter().map(|m| m.address).collect(),
            &mut found,
        );
    }
    found
}

/// The plan still to do from what Octavia holds now.
async fn remaining(world: &World, lb_id: &str) -> anyhow::Result<usize> {
    let translation = world.translation().await?;
    let tree = read_tree(&world.octavia, lb_id).await?;
    let owner = Ownership::new(world.cluster.clone());
    Ok(plan(&Desired::from_config(&translation.config), &tree, &owner)?.len())
}

/// Waits until the load balancer is `ACTIVE` (a forwarded call settled).
async fn settled(world: &World, lb_id: &str) -> anyhow::Result<()> {
    eventually("the load balancer ACTIVE", async || {
        let lb = world.octavia.load_balancer(lb_id).await?;
        Ok(lb
            .filter(|lb| lb.provisioning_status == ProvisioningStatus::Active)
            .map(drop))
    })
    .await
}

/// The exact-tree check: converged, nothing twice, one of each router object.
async fn exactly_desired(world: &World, lb_id: &str, what: &str) -> anyhow::Result<()> {
    let (tree, _) = world.converged(lb_id, what).await?;
    let owner = Ownership::new(world.cluster.clone());
    let twice = duplicates(&tree, &owner);
    ensure!(twice.is_empty(), "{what}: duplicates {twice:?}");
    let counts = world.counts().await?;
    ensure!(
        counts == (1, 1, 1, 1),
        "{what}: one load balancer, VIP port, floating IP and listener: {counts:?}"
    );
    Ok(())
}

async fn scenario(cloud: &OpenStack) -> anyhow::Result<()> {
    let seed = std::env::var("KURYR_CRASH_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(DEFAULT_SEED);
    println!("{TEST}: seed {seed} (KURYR_CRASH_SEED to replay)");
    let mut seeded = Seeded(seed.max(1));
    let world = World::setup(cloud).await?;
    let mut proxy = Proxy::start(cloud.octavia_url()).await?;
    world.write_conf(&proxy.url)?;
    let objects: Vec<String> = (0..SERVICES)
        .map(|s| service(s, [10, 11]))
        .chain((0..INGRESSES).map(|i| ingress(i, 0)))
        .collect();
    world.apply(&objects.join("---\n")).await?;

    // 1. Two controllers; the Lease holder is killed during the one-call create.
    proxy.hold_after(1);
    let mut controllers: BTreeMap<String, (Daemon, std::path::PathBuf)> = BTreeMap::new();
    for name in ["c1", "c2"] {
        controllers.insert(name.to_owned(), world.controller(name)?);
    }
    let logs = |controllers: &BTreeMap<String, (Daemon, std::path::PathBuf)>| {
        controllers
            .iter()
            .map(|(name, (_, log))| format!("--- {name}\n{}", log_text(log)))
            .collect::<Vec<_>>()
            .join("\n")
    };
    let held = proxy
        .held(PATIENCE)
        .await
        .with_context(|| logs(&controllers))?;
    ensure!(
        held.call == CREATE_LB,
        "the first Octavia change is the Router LB with its tree: {}",
        held.call
    );
    let lease = world.get("Lease", LEASE).await?;
    let leader = lease["spec"]["holderIdentity"]
        .as_str()
        .context("the Lease has a holder")?
        .to_owned();
    let (daemon, _) = controllers
        .remove(&leader)
        .with_context(|| format!("the holder {leader} is one of ours"))?;
    daemon.kill();
    held.forward().await?;
    let (survivor, (daemon, log)) = controllers.pop_first().context("the standby is running")?;
    let state = eventually("the standby records the router", async || {
        world.router_state().await
    })
    .await
    .with_context(|| log_text(&log))?;
    let text = log_text(&log);
    ensure!(
        text.contains("Router LB found by name and tag"),
        "{survivor} found the killed leader's load balancer: {text}"
    );
    let lb_id = state.router_lb.id.clone();
    exactly_desired(
        &world,
        &lb_id,
        "the leader killed during the one-call create",
    )
    .await?;
    let creates = proxy.mutations().iter().filter(|c| *c == CREATE_LB).count();
    ensure!(
        creates == 1,
        "one create call ever: {:?}",
        proxy.mutations()
    );
    let one_call = proxy.mutations().len();
    println!("{TEST}: first sync of {INGRESSES} Ingresses: {one_call} Octavia change call(s)");
    daemon.terminate();

    // 2. A batch of changes, synced call by call, killed twice at seeded calls.
    let mut batch: Vec<String> = (0..4).map(|i| ingress(i, 1)).collect();
    batch.push(service(1, [10, 12]));
    batch.extend((INGRESSES..INGRESSES + 2).map(|i| ingress(i, 0)));
    world.apply(&batch.join("---\n")).await?;
    for i in 45..47 {
        world
            .api("Ingress")
            .delete(&format!("app{i}"), &DeleteParams::default())
            .await?;
    }
    let mut first_forward = false;
    for start in 1..=2 {
        let left = remaining(&world, &lb_id).await?;
        ensure!(left > 0, "start {start}: the batch leaves calls to make");
        let kill_at = seeded.one_to(left.min(8));
        // The seed picks the first fate, the second is the other: both are seen.
        let forward = match start {
            1 => {
                first_forward = seeded.next().is_multiple_of(2);
                first_forward
            }
            _ => !first_forward,
        };
        proxy.hold_after(kill_at);
        let (daemon, log) = world.controller_logging(&survivor, &format!("{survivor}-{start}"))?;
        let held = proxy.held(PATIENCE).await.with_context(|| log_text(&log))?;
        daemon.kill();
        println!(
            "{TEST}: start {start}: {left} calls to make; killed during call {kill_at} ({}), {}",
            held.call,
            if forward { "forwarded" } else { "dropped" }
        );
        if forward {
            held.forward().await?;
        } else {
            held.drop_it();
        }
        settled(&world, &lb_id).await?;
    }
    let (daemon, log) = world.controller_logging(&survivor, &format!("{survivor}-3"))?;
    exactly_desired(&world, &lb_id, "after two kills during the batch")
        .await
        .with_context(|| log_text(&log))?;
    // The desired tree is the batch's: the edited paths, the new Ingresses, the deleted gone.
    let tree = read_tree(&world.octavia, &lb_id).await?;
    let policies: Vec<&str> = tree.listeners[0]
        .policies
        .iter()
        .map(|p| p.name.as_str())
        .collect();
    ensure!(
        policies.len() == INGRESSES,
        "50 - 2 + 2 policies: {policies:?}"
    );
    let creates = proxy.mutations().iter().filter(|c| *c == CREATE_LB).count();
    ensure!(creates == 1, "still one create call ever");
    // The Node annotation was kept through the kills.
    ensure!(world.router_state().await? == Some(state));
    daemon.terminate();
    Ok(())
}
