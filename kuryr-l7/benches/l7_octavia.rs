//! `cargo bench -p nephrite-kuryr-l7 --bench l7_octavia`: the `octavia` driver's sync against the
//! real Octavia 19 (`nephrite_test_services::OpenStack`, noauth, noop drivers).
//!
//! First, the time of each kind of call (create, update, delete of a listener, pool, member, L7
//! policy and L7 rule) from the call until the load balancer is `ACTIVE` again, made as the
//! driver makes it and by a bare client polling every 25 ms, interleaved
//! (`L7_OCTAVIA_KIND_ROUNDS`, default 3, rounds each way; [`kinds`]).
//!
//! Then two load balancers with an HTTP listener each, A synced by the driver and B, its twin,
//! by the bare client ([`bare`]), start with `L7_OCTAVIA_INGRESSES` (default 10) Ingress-like
//! policies (host rule, path rule, a pool with two members each); then `L7_OCTAVIA_CHANGES`
//! (default 100) changes, in a fixed pseudo-random order: a path edited, an endpoint replaced,
//! an Ingress added, an Ingress removed. Each change is one sync of A as the driver does it
//! (plan from the tree the last sync left, read in full only for the first sync or after a
//! failed call; execute call by call with the driver's own settle, performing each accepted
//! call on the kept tree) and the same minimal calls on B by the bare client, polling tightly:
//! what Octavia itself needs for the change, the yardstick. The two take turns going first.
//! The bench prints:
//!
//! - Octavia calls per change against the minimal number (`minimal_calls`, counted from what
//!   differs, independently of the planner): the goal is equal;
//! - the time from a change to the load balancer `ACTIVE` again, the driver's against the bare
//!   client's for the same calls (medians, and the median of the per-change ratios), and the
//!   bare client's time per call kind within the changes;
//! - Octavia's settle for one member weight update (bare client, between every two changes);
//! - the full tree reads, and at the end a check that the kept tree is what Octavia holds (a
//!   fresh read plans no call).

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::time::Instant;

use anyhow::Context;
use nephrite_kuryr_l7::openstack::executor::execute_onto;
use nephrite_kuryr_l7::openstack::observe::read_tree;
use nephrite_kuryr_l7::openstack::octavia::{
    NewListener, NewLoadBalancer, NewMember, NewPool, Octavia, Settle,
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

#[path = "l7_octavia/bare.rs"]
mod bare;
#[path = "l7_octavia/kinds.rs"]
mod kinds;

use bare::Bare;

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

/// A load balancer with the Router's HTTP listener, as `kuryr-l7` makes it.
async fn router_lb(
    octavia: &Octavia,
    subnet: &str,
    owner: &Ownership,
    name: &str,
) -> anyhow::Result<String> {
    let lb = octavia
        .create_load_balancer(&NewLoadBalancer {
            name: name.to_owned(),
            vip_subnet_id: Some(subnet.to_owned()),
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
    Ok(lb.id)
}

/// `values`' median, lowest and highest, formatted `median (low–high)` in the given unit.
fn spread(values: &mut [f64], scale: f64, decimals: usize) -> String {
    let m = median(values);
    let low = values.first().copied().unwrap_or(f64::NAN);
    let high = values.last().copied().unwrap_or(f64::NAN);
    format!(
        "{:.*} ({:.*}–{:.*})",
        decimals,
        m * scale,
        decimals,
        low * scale,
        decimals,
        high * scale
    )
}

async fn run(cloud: &OpenStack) -> anyhow::Result<()> {
    let ingresses = env_number("L7_OCTAVIA_INGRESSES", 10) as u32;
    let changes = env_number("L7_OCTAVIA_CHANGES", 100);
    let kind_rounds = env_number("L7_OCTAVIA_KIND_ROUNDS", 3);
    println!("load average before: {}", load_average());
    // The driver's client waits as the driver's does (its default settle).
    let (project, octavia, neutron) = project_clients(cloud, Settle::default().poll)?;
    let bare = Bare::new(&cloud.octavia_url(), &project)?;
    let network = neutron.create_network("bench", None).await?;
    let subnet = neutron
        .create_subnet("bench", &network.id, "10.0.0.0/16")
        .await?;
    let owner = Ownership::new(format!("bench-{}", &project[..8]));
    let lb = router_lb(&octavia, &subnet.id, &owner, "kuryr-l7-bench").await?;
    let twin = router_lb(&octavia, &subnet.id, &owner, "kuryr-l7-bench-twin").await?;

    if kind_rounds > 0 {
        kinds::measure(&octavia, &bare, &lb, kind_rounds).await?;
        println!("load average: {}", load_average());
    }

    // The one-call settle: a member of a pool nobody routes to, its weight flipped.
    let probe_pool = octavia
        .create_pool(&NewPool {
            name: "probe".to_owned(),
            loadbalancer_id: lb.clone(),
            protocol: "HTTP".to_owned(),
            lb_algorithm: "ROUND_ROBIN".to_owned(),
            tags: vec![],
        })
        .await?;
    let probe = octavia
        .create_member(
            &lb,
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
    let mut kept: Option<Tree> = None;
    let mut twin_tree = read_tree(&octavia, &twin).await?;
    let mut reads = 0usize;
    let began = Instant::now();
    let first = sync(&octavia, &lb, &owner, &config(&apps), &mut kept, &mut reads).await?;
    let driver_first = began.elapsed().as_secs_f64();
    let began = Instant::now();
    let twin_first = replay(&bare, &twin, &owner, &config(&apps), &mut twin_tree).await?;
    let bare_first = began.elapsed().as_secs_f64();
    anyhow::ensure!(
        twin_first.len() == first.0,
        "the twin's first sync made {} calls, the driver's {}",
        twin_first.len(),
        first.0
    );
    println!(
        "first sync of {ingresses} Ingresses: {} calls (minimal {}), driver {driver_first:.1} s, bare client {bare_first:.1} s (ratio {:.2})",
        first.0,
        first.1,
        driver_first / bare_first
    );

    let (mut calls_total, mut minimal_total) = (0usize, 0usize);
    let mut driver_times = Vec::new();
    let mut bare_times = Vec::new();
    let mut ratios = Vec::new();
    let mut per_call_times = Vec::new();
    let mut one_call_times = Vec::new();
    let mut bare_kinds: BTreeMap<&'static str, Vec<f64>> = BTreeMap::new();
    let mut loads = vec![load_average()];
    let mut seed: u64 = 0x2545_f491_4f6c_dd1d;
    let mut change_kinds: BTreeMap<&str, usize> = BTreeMap::new();
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
        *change_kinds.entry(kind).or_default() += 1;
        let desired = config(&apps);
        // The driver and the bare client take turns going first.
        let mut driver_took = 0.0;
        let mut bare_took = 0.0;
        let mut counted = (0, 0);
        let mut bare_calls = Vec::new();
        for turn in 0..2 {
            if (turn == 0) == (change % 2 == 0) {
                let started = Instant::now();
                counted = sync(&octavia, &lb, &owner, &desired, &mut kept, &mut reads).await?;
                driver_took = started.elapsed().as_secs_f64();
            } else {
                let started = Instant::now();
                bare_calls = replay(&bare, &twin, &owner, &desired, &mut twin_tree).await?;
                bare_took = started.elapsed().as_secs_f64();
            }
        }
        let (calls, minimal) = counted;
        anyhow::ensure!(
            bare_calls.len() == calls,
            "change {change}: the twin took {} calls, the driver {calls}",
            bare_calls.len()
        );
        for (kind, took) in bare_calls {
            bare_kinds.entry(kind).or_default().push(took);
        }
        calls_total += calls;
        minimal_total += minimal;
        if calls > 0 {
            driver_times.push(driver_took);
            bare_times.push(bare_took);
            ratios.push(driver_took / bare_took);
            per_call_times.push(driver_took / calls as f64);
        }
        // Interleaved: Octavia's settle for one member weight update.
        let weight = if change % 2 == 0 { 2 } else { 1 };
        let started = Instant::now();
        bare.call(
            &lb,
            Method::PUT,
            &format!("pools/{}/members/{}", probe_pool.id, probe.id),
            Some(&json!({"member": {"weight": weight}})),
        )
        .await?;
        one_call_times.push(started.elapsed().as_secs_f64());
        if change % 5 == 4 {
            loads.push(load_average());
        }
    }
    println!("{changes} changes: {change_kinds:?}");
    println!(
        "Octavia calls: {calls_total} for {minimal_total} minimal ({:.2} per change against {:.2}; ratio {:.3})",
        calls_total as f64 / changes as f64,
        minimal_total as f64 / changes as f64,
        calls_total as f64 / minimal_total.max(1) as f64
    );
    let driver_median = median(&mut driver_times);
    let bare_median = median(&mut bare_times);
    println!(
        "change -> ACTIVE, median (low–high): driver {} ms; bare client, same calls, {} ms; ratio of medians {:.2}; per-change ratio {}",
        spread(&mut driver_times, 1e3, 0),
        spread(&mut bare_times, 1e3, 0),
        driver_median / bare_median,
        spread(&mut ratios, 1.0, 2),
    );
    println!(
        "Octavia's one-call settle (member weight update, bare client): median {:.0} ms; the driver's change per call {:.0} ms, over it {:.2}",
        median(&mut one_call_times) * 1e3,
        median(&mut per_call_times) * 1e3,
        median(&mut per_call_times) / median(&mut one_call_times)
    );
    println!("bare client's time per call kind within the changes (median ms, calls):");
    for (kind, times) in &mut bare_kinds {
        println!(
            "  {kind:<18} {:>6.0} {:>4}",
            median(times) * 1e3,
            times.len()
        );
    }
    println!("load average during the changes: {}", loads.join(" | "));
    // The kept tree is what Octavia holds: a fresh read plans nothing for the last config.
    let fresh = read_tree(&octavia, &lb).await?;
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
    octavia.delete_load_balancer(&lb, true).await?;
    octavia.delete_load_balancer(&twin, true).await?;
    println!("load average after: {}", load_average());
    Ok(())
}

/// The three load averages of `/proc/loadavg`.
fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|text| {
            text.split_whitespace()
                .take(3)
                .collect::<Vec<_>>()
                .join(" ")
        })
        .unwrap_or_else(|e| format!("(unreadable: {e})"))
}

/// The same sync on the twin by the bare client: the plan for `config` from `tree` (the
/// twin's, kept call by call), each call to `ACTIVE` polling tightly. Returns each call's kind
/// and time.
async fn replay(
    bare: &Bare,
    lb: &str,
    owner: &Ownership,
    config: &L7Config,
    tree: &mut Tree,
) -> anyhow::Result<Vec<(&'static str, f64)>> {
    let desired = Desired::from_config(config);
    let calls = plan(&desired, tree, owner)?;
    bare.run_plan(lb, &calls, tree).await
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
