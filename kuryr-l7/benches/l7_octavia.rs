//! `cargo bench -p nephrite-kuryr-l7 --bench l7_octavia`: the `octavia` driver's sync against the
//! real Octavia 19 (`nephrite_test_services::OpenStack`, noauth, noop drivers).
//!
//! A load balancer with an HTTP listener starts with `L7_OCTAVIA_INGRESSES` (default 10)
//! Ingress-like policies (host rule, path rule, a pool with two members each); then
//! `L7_OCTAVIA_CHANGES` (default 100) changes, in a fixed pseudo-random order: a path edited, an
//! endpoint replaced, an Ingress added, an Ingress removed. Each change is one sync as the driver
//! does it (plan from the tree the last sync left, read in full only for the first sync or
//! after a failed call; execute call by call, each waited out to `ACTIVE`, performing each
//! accepted call on the kept tree), and the bench prints:
//!
//! - Octavia calls per change against the minimal number (`minimal_calls`, counted from what
//!   differs, independently of the planner): the goal is equal;
//! - the time from a change to the load balancer `ACTIVE` again, against Octavia's own settle
//!   time for one call (a member weight update, measured between every two changes, interleaved
//!   so both see the same machine): medians, and the change's time per call against one call;
//! - the full tree reads, and at the end a check that the kept tree is what Octavia holds (a
//!   fresh read plans no call).

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use anyhow::Context;
use nephrite_kuryr_l7::openstack::executor::execute_onto;
use nephrite_kuryr_l7::openstack::observe::read_tree;
use nephrite_kuryr_l7::openstack::octavia::{
    NewListener, NewLoadBalancer, NewMember, NewPool, Octavia,
};
use nephrite_l7::octavia::{Desired, HTTP_LISTENER, Ownership, Tree, minimal_calls, plan};
use nephrite_l7::{Action, CompareType, L7Config, Member, Policy, Pool, Rule, RuleType};
use nephrite_test_services::OpenStack;
use reqwest::Method;
use serde_json::json;

/// The project's clients, as the OpenStack tests make them.
#[path = "../tests/support/cloud.rs"]
mod cloud;
use cloud::project_clients;

fn env_number(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// One Ingress-like object: its path version and its two members' last octets.
#[derive(Clone)]
struct App {
    path: u32,
    members: [u8; 2],
}

fn config(apps: &BTreeMap<u32, App>) -> L7Config {
    let mut config = L7Config::default();
    for (id, app) in apps {
        let pool = format!("default/app{id}:80");
        let mut policy = Policy::new(
            format!("ingress/default/app{id}#1"),
            Action::RedirectToPool { pool: pool.clone() },
            vec![
                Rule::new(
                    RuleType::HostName,
                    CompareType::EqualTo,
                    format!("app{id}.example.com"),
                ),
                Rule::new(
                    RuleType::Path,
                    CompareType::StartsWith,
                    format!("/v{}", app.path),
                ),
            ],
        );
        policy.origin = format!("Ingress default/app{id}");
        config
            .http
            .insert_policy(policy, None)
            .expect("distinct policy names");
        config.pools.insert(
            pool.clone(),
            Pool {
                id: pool,
                members: app
                    .members
                    .iter()
                    .map(|octet| Member {
                        address: SocketAddr::from(([10, 0, (id % 250) as u8, *octet], 8080)),
                        weight: 1,
                    })
                    .collect(),
                ..Pool::default()
            },
        );
    }
    config
}

fn median(values: &mut [f64]) -> f64 {
    values.sort_by(f64::total_cmp);
    values.get(values.len() / 2).copied().unwrap_or(f64::NAN)
}

fn main() -> anyhow::Result<()> {
    let cloud = match OpenStack::shared() {
        Ok(cloud) => cloud,
        Err(e) => {
            eprintln!("l7_octavia: SKIPPED, the OpenStack services are unavailable: {e}");
            return Ok(());
        }
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    runtime.block_on(run(cloud))
}

async fn run(cloud: &OpenStack) -> anyhow::Result<()> {
    let ingresses = env_number("L7_OCTAVIA_INGRESSES", 10) as u32;
    let changes = env_number("L7_OCTAVIA_CHANGES", 100);
    let (project, octavia, neutron) = project_clients(cloud, Duration::from_millis(20))?;
    let network = neutron.create_network("bench", None).await?;
    let subnet = neutron
        .create_subnet("bench", &network.id, "10.0.0.0/16")
        .await?;
    let owner = Ownership::new(format!("bench-{}", &project[..8]));
    let lb = octavia
        .create_load_balancer(&NewLoadBalancer {
            name: "kuryr-l7-bench".to_owned(),
            vip_subnet_id: Some(subnet.id.clone()),
            tags: vec![owner.cluster_tag()],
            ..NewLoadBalancer::default()
        })
        .await?;
    octavia
        .create_listener(&NewListener {
            name: HTTP_LISTENER.to_owned(),
            loadbalancer_id: lb.id.clone(),
            protocol: "HTTP".to_owned(),
            protocol_port: 80,
            default_pool_id: None,
            tags: owner.tags("Router"),
        })
        .await?;
    // The one-call yardstick: a member of a pool nobody routes to, its weight flipped.
    let probe_pool = octavia
        .create_pool(&NewPool {
            name: "probe".to_owned(),
            loadbalancer_id: lb.id.clone(),
            protocol: "HTTP".to_owned(),
            lb_algorithm: "ROUND_ROBIN".to_owned(),
            tags: vec![],
        })
        .await?;
    let probe = octavia
        .create_member(
            &lb.id,
            &probe_pool.id,
            &NewMember {
                name: "probe".to_owned(),
                address: "10.0.255.1".to_owned(),
                protocol_port: 80,
                weight: Some(1),
                subnet_id: None,
                tags: vec![],
            },
        )
        .await?;

    let mut apps: BTreeMap<u32, App> = (0..ingresses)
        .map(|id| {
            (
                id,
                App {
                    path: 0,
                    members: [10, 11],
                },
            )
        })
        .collect();
    let mut next_id = ingresses;
    let began = Instant::now();
    let mut kept: Option<Tree> = None;
    let mut reads = 0usize;
    let first = sync(
        &octavia,
        &lb.id,
        &owner,
        &config(&apps),
        &mut kept,
        &mut reads,
    )
    .await?;
    println!(
        "first sync of {ingresses} Ingresses: {} calls (minimal {}), {:.1} s",
        first.0,
        first.1,
        began.elapsed().as_secs_f64()
    );

    let (mut calls_total, mut minimal_total) = (0usize, 0usize);
    let mut change_times = Vec::new();
    let mut per_call_times = Vec::new();
    let mut one_call_times = Vec::new();
    let mut seed: u64 = 0x2545_f491_4f6c_dd1d;
    let mut kinds: BTreeMap<&str, usize> = BTreeMap::new();
    for change in 0..changes {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        let ids: Vec<u32> = apps.keys().copied().collect();
        let pick = ids[(seed as usize / 7) % ids.len()];
        let kind = match seed % 4 {
            0 => {
                apps.get_mut(&pick).context("picked")?.path += 1;
                "path edited"
            }
            1 => {
                let app = apps.get_mut(&pick).context("picked")?;
                app.members[1] = app.members[1].wrapping_add(1).max(12);
                "endpoint replaced"
            }
            2 => {
                apps.insert(
                    next_id,
                    App {
                        path: 0,
                        members: [10, 11],
                    },
                );
                next_id += 1;
                "Ingress added"
            }
            _ if apps.len() > 1 => {
                apps.remove(&pick);
                "Ingress removed"
            }
            _ => continue,
        };
        *kinds.entry(kind).or_default() += 1;
        let started = Instant::now();
        let (calls, minimal) = sync(
            &octavia,
            &lb.id,
            &owner,
            &config(&apps),
            &mut kept,
            &mut reads,
        )
        .await?;
        let took = started.elapsed().as_secs_f64();
        calls_total += calls;
        minimal_total += minimal;
        change_times.push(took);
        if calls > 0 {
            per_call_times.push(took / calls as f64);
        }
        // Interleaved: one call and its settle.
        let weight = if change % 2 == 0 { 2 } else { 1 };
        let started = Instant::now();
        octavia
            .execute(
                &lb.id,
                Method::PUT,
                &format!("pools/{}/members/{}", probe_pool.id, probe.id),
                Some(&json!({"member": {"weight": weight}})),
            )
            .await?;
        one_call_times.push(started.elapsed().as_secs_f64());
    }
    let one_call = median(&mut one_call_times);
    let change_median = median(&mut change_times);
    let per_call = median(&mut per_call_times);
    println!("{changes} changes: {kinds:?}");
    println!(
        "Octavia calls: {calls_total} for {minimal_total} minimal ({:.2} per change against {:.2}; ratio {:.3})",
        calls_total as f64 / changes as f64,
        minimal_total as f64 / changes as f64,
        calls_total as f64 / minimal_total.max(1) as f64
    );
    println!(
        "change -> ACTIVE: median {:.0} ms; per call {:.0} ms; Octavia's one-call settle median {:.0} ms (ratio per call / one call {:.2})",
        change_median * 1e3,
        per_call * 1e3,
        one_call * 1e3,
        per_call / one_call
    );
    // The kept tree is what Octavia holds: a fresh read plans nothing for the last config.
    let fresh = read_tree(&octavia, &lb.id).await?;
    let desired = Desired::from_config(&config(&apps));
    let left = plan(&desired, &fresh, &owner)?;
    anyhow::ensure!(
        left.is_empty() && minimal_calls(&desired, &fresh, &owner) == 0,
        "after {changes} changes planned from the kept tree, Octavia still needs {left:#?}"
    );
    println!(
        "full tree reads: {} over {changes} changes and the first sync; a fresh read at the end plans no call",
        reads
    );
    octavia.delete_load_balancer(&lb.id, true).await?;
    Ok(())
}

/// One sync as the driver does it (`OctaviaDriver::sync`): plan from `kept` (read in full when
/// empty, counted in `reads`), execute onto it. Returns (calls made, minimal calls).
async fn sync(
    octavia: &Octavia,
    lb_id: &str,
    owner: &Ownership,
    config: &L7Config,
    kept: &mut Option<Tree>,
    reads: &mut usize,
) -> anyhow::Result<(usize, usize)> {
    let mut tree = match kept.take() {
        Some(tree) => tree,
        None => {
            *reads += 1;
            read_tree(octavia, lb_id).await?
        }
    };
    let desired = Desired::from_config(config);
    let minimal = minimal_calls(&desired, &tree, owner);
    let calls = plan(&desired, &tree, owner)?;
    let (executed, exact) = execute_onto(octavia, lb_id, &calls, &mut tree).await;
    anyhow::ensure!(
        executed.is_complete(),
        "a sync failed: {:?}",
        executed.failures
    );
    if exact {
        *kept = Some(tree);
    }
    Ok((executed.done, minimal))
}
