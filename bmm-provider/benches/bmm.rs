//! `cargo xtask bench bmm`: 10 clusters × 100 machines provisioned by `bmm-provider serve`'s
//! controllers against bmm-sim (100 ms latency, 5% injected 5xx/429, network objects 2 s,
//! instances 60 s) and the in-memory API server; then everything deleted.
//!
//! Prints: time until every machine is Ready against the critical path the simulator imposes
//! (network delay + instance delay) and the latency budget; instances created (the simulator's
//! counter; duplicates = created − machines); API calls per machine against the budget (the
//! create, the polls the instance delay needs, retries of injected faults); what is left in
//! the simulator after deleting all clusters.
//!
//! Scale it down while iterating: `BMM_BENCH_CLUSTERS`, `BMM_BENCH_MACHINES`,
//! `BMM_BENCH_INSTANCE_DELAY`, `BMM_BENCH_NETWORK_DELAY`, `BMM_BENCH_LATENCY`,
//! `BMM_BENCH_FAULT_RATE`, `BMM_BENCH_POLL` (durations like `60s`, `500ms`).

use std::process::ExitCode;
use std::time::{Duration, Instant};

use futures::{StreamExt, stream};
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{
    Api, ApiResource, DeleteParams, DynamicObject, GroupVersionKind, ListParams, PostParams,
};
use nephrite_bmm::crd::{NvidiaBMMCluster, NvidiaBMMMachine, all_crds};
use nephrite_bmm_provider::controller::{ControllerConfig, run_controllers};
use nephrite_bmm_provider::metrics::ProviderMetrics;
use nephrite_bmm_sim::{INSTANCE_TYPE_ID, Kind, Sim, SimConfig, auth};
use nephrite_test_apiserver::TestApiServer;
use nephrite_test_services::machine::{CpuTimes, load_average};
use serde_json::json;

const NS: &str = "default";
const ORG: &str = "bench";
const SECRET: &str = "bench-secret";

fn env_number<T: std::str::FromStr>(name: &str, default: T) -> T {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn env_duration(name: &str, default: Duration) -> Duration {
    std::env::var(name)
        .ok()
        .and_then(|v| humantime::parse_duration(&v).ok())
        .unwrap_or(default)
}

fn secret(name: &str, data: &[(&str, &str)]) -> Secret {
    Secret {
        metadata: kube::api::ObjectMeta {
            name: Some(name.to_string()),
            ..Default::default()
        },
        data: Some(
            data.iter()
                .map(|(k, v)| (k.to_string(), ByteString(v.as_bytes().to_vec())))
                .collect(),
        ),
        ..Default::default()
    }
}

fn capi(client: &kube::Client, kind: &str, plural: &str) -> Api<DynamicObject> {
    Api::namespaced_with(
        client.clone(),
        NS,
        &ApiResource::from_gvk_with_plural(
            &GroupVersionKind::gvk("cluster.x-k8s.io", "v1beta2", kind),
            plural,
        ),
    )
}

async fn install_crds(client: &kube::Client) -> anyhow::Result<()> {
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let mut all = all_crds();
    for (kind, plural) in [("Cluster", "clusters"), ("Machine", "machines")] {
        all.push(serde_json::from_value(json!({
            "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": format!("{plural}.cluster.x-k8s.io")},
            "spec": {"group": "cluster.x-k8s.io", "scope": "Namespaced",
                     "names": {"plural": plural, "singular": kind.to_lowercase(), "kind": kind, "listKind": format!("{kind}List")},
                     "versions": [{"name": "v1beta2", "served": true, "storage": true,
                                   "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}]}
        }))?);
    }
    for crd in all {
        crds.create(&PostParams::default(), &crd).await?;
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    Ok(())
}

async fn create_cluster(client: &kube::Client, c: usize) -> anyhow::Result<()> {
    let name = format!("bench-{c}");
    let owner: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Cluster",
        "metadata": {"name": name, "namespace": NS}, "spec": {}
    }))?;
    let owner = capi(client, "Cluster", "clusters")
        .create(&PostParams::default(), &owner)
        .await?;
    let infra: NvidiaBMMCluster = serde_json::from_value(json!({
        "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1", "kind": "NvidiaBMMCluster",
        "metadata": {"name": name, "namespace": NS,
                     "ownerReferences": [{"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Cluster", "name": name, "uid": owner.metadata.uid}]},
        "spec": {
            "siteRef": {"name": "sim-site"},
            "vpc": {"name": format!("{name}-vpc"), "networkSecurityGroup": {"name": format!("{name}-nsg"), "rules": [
                {"name": "api", "direction": "INGRESS", "protocol": "TCP", "action": "PERMIT", "portRange": "6443"}]}},
            "subnets": [{"name": "nodes", "cidr": format!("10.{c}.0.0/22"), "role": "worker"}],
            "controlPlaneEndpoint": {"host": format!("api.{name}.test"), "port": 6443},
            "authentication": {"secretRef": {"name": "bmm-credentials"}}
        }
    }))?;
    Api::<NvidiaBMMCluster>::namespaced(client.clone(), NS)
        .create(&PostParams::default(), &infra)
        .await?;
    Ok(())
}

async fn create_machine(client: &kube::Client, c: usize, m: usize) -> anyhow::Result<()> {
    let (cluster, name) = (format!("bench-{c}"), format!("bench-{c}-m{m}"));
    let bootstrap = secret(
        &format!("{name}-bootstrap"),
        &[
            (
                "value",
                "#cloud-config
",
            ),
            ("format", "cloud-config"),
        ],
    );
    Api::<Secret>::namespaced(client.clone(), NS)
        .create(&PostParams::default(), &bootstrap)
        .await?;
    let machine: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Machine", "metadata": {"name": name, "namespace": NS},
        "spec": {"clusterName": cluster, "bootstrap": {"dataSecretName": format!("{name}-bootstrap")}}
    }))?;
    let machine = capi(client, "Machine", "machines")
        .create(&PostParams::default(), &machine)
        .await?;
    let infra: NvidiaBMMMachine = serde_json::from_value(json!({
        "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1", "kind": "NvidiaBMMMachine",
        "metadata": {"name": name, "namespace": NS,
                     "labels": {"cluster.x-k8s.io/cluster-name": cluster},
                     "ownerReferences": [{"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Machine", "name": name, "uid": machine.metadata.uid}]},
        "spec": {"instanceType": {"id": INSTANCE_TYPE_ID}, "network": {"subnetName": "nodes"}}
    }))?;
    Api::<NvidiaBMMMachine>::namespaced(client.clone(), NS)
        .create(&PostParams::default(), &infra)
        .await?;
    Ok(())
}

async fn run() -> anyhow::Result<bool> {
    let clusters: usize = env_number("BMM_BENCH_CLUSTERS", 10);
    let per_cluster: usize = env_number("BMM_BENCH_MACHINES", 100);
    let instance_delay = env_duration("BMM_BENCH_INSTANCE_DELAY", Duration::from_secs(60));
    let network_delay = env_duration("BMM_BENCH_NETWORK_DELAY", Duration::from_secs(2));
    let latency = env_duration("BMM_BENCH_LATENCY", Duration::from_millis(100));
    let fault_rate: f64 = env_number("BMM_BENCH_FAULT_RATE", 0.05);
    let poll = env_duration("BMM_BENCH_POLL", Duration::from_secs(5));
    let machines = clusters * per_cluster;
    println!(
        "bmm bench: {clusters} clusters x {per_cluster} machines, latency {latency:?}, faults {:.0}%, network {network_delay:?}, instances {instance_delay:?}, poll {poll:?}",
        fault_rate * 100.0
    );

    let sim = Sim::new(SimConfig {
        jwt_secret: SECRET.into(),
        provision_delay: instance_delay,
        network_delay,
        fault_rate,
        latency,
        machines: machines + 16,
        ..SimConfig::default()
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let endpoint = format!("http://{}", listener.local_addr()?);
    tokio::spawn(sim.clone().serve(listener, std::future::pending()));
    let server = TestApiServer::start().await?;
    let client = server.client()?;
    install_crds(&client).await?;
    let now = jiff::Timestamp::now().as_second().max(0) as u64;
    let token = auth::issue(SECRET, ORG, now, Duration::from_secs(6 * 3600))?;
    let credentials = secret(
        "bmm-credentials",
        &[("endpoint", &endpoint), ("orgName", ORG), ("token", &token)],
    );
    Api::<Secret>::namespaced(client.clone(), NS)
        .create(&PostParams::default(), &credentials)
        .await?;
    let metrics = ProviderMetrics::default();
    let sampler = Sampler::start(sim.clone(), metrics.clone(), server.requests().clone());
    let controllers = tokio::spawn(run_controllers(
        client.clone(),
        ControllerConfig {
            namespace: Some(NS.into()),
            metrics: metrics.clone(),
            poll,
            dependency_poll: poll.min(Duration::from_secs(2)),
            resync: Duration::from_secs(3600),
            ..ControllerConfig::default()
        },
    ));

    let start = Instant::now();
    let times = CpuTimes::now();
    for c in 0..clusters {
        create_cluster(&client, c).await?;
    }
    let created: Vec<anyhow::Result<()>> =
        stream::iter((0..clusters).flat_map(|c| (0..per_cluster).map(move |m| (c, m))))
            .map(|(c, m)| {
                let client = client.clone();
                async move { create_machine(&client, c, m).await }
            })
            .buffer_unordered(32)
            .collect()
            .await;
    created.into_iter().collect::<anyhow::Result<Vec<()>>>()?;
    println!(
        "objects created in the API server after {:.1?} (load average {})",
        start.elapsed(),
        load_average()
    );

    let infra_machines: Api<NvidiaBMMMachine> = Api::namespaced(client.clone(), NS);
    let limit = (network_delay + instance_delay) * 3 + Duration::from_secs(120);
    let mut clusters_ready_at = None;
    let mut next_progress = Duration::from_secs(10);
    let mut last_created = None;
    let all_ready = loop {
        let list = infra_machines.list(&ListParams::default()).await?;
        let ready = list
            .items
            .iter()
            .filter(|m| m.status.as_ref().is_some_and(|s| s.ready))
            .count();
        if clusters_ready_at.is_none() {
            let infra = Api::<NvidiaBMMCluster>::namespaced(client.clone(), NS)
                .list(&ListParams::default())
                .await?;
            if infra
                .items
                .iter()
                .all(|c| c.status.as_ref().is_some_and(|s| s.ready))
            {
                clusters_ready_at = Some(start.elapsed());
            }
        }
        if ready == machines {
            break start.elapsed();
        }
        if start.elapsed() > limit {
            println!(
                "NOT READY: {ready}/{machines} machines Ready after {:.1?} ({} API calls, load average {})",
                start.elapsed(),
                sim.requests_answered(),
                load_average()
            );
            for (route, n) in sim.requests_by_path() {
                println!("  {route:<45} {n:>7}");
            }
            return Ok(false);
        }
        if start.elapsed() >= next_progress {
            println!(
                "  {:>5.1?}: {ready}/{machines} Ready, {} instances created, {} API calls, load average {}; {}",
                start.elapsed(),
                sim.created(Kind::Instance),
                sim.requests_answered(),
                load_average(),
                sampler.window()
            );
            next_progress += Duration::from_secs(10);
        }
        if last_created.is_none() && sim.created(Kind::Instance) >= machines as u64 {
            last_created = Some(start.elapsed());
        }
        // Listing 1,000 objects is itself work for the API server: once a second.
        tokio::time::sleep(Duration::from_secs(1)).await;
    };
    let calls = sim.requests_answered();
    let faults = sim.faults_injected();
    let instances = sim.created(Kind::Instance);
    let by_path = sim.requests_by_path();
    let instance_calls: u64 = by_path
        .iter()
        .filter(|(route, _)| {
            route
                .split(' ')
                .nth(1)
                .is_some_and(|r| r.starts_with("instance"))
        })
        .map(|(_, n)| n)
        .sum();

    let critical = network_delay + instance_delay;
    // Sequential calls on the way: site, tenant, lookups and creates of the network chain
    // (about 10), then the machine's lookup and create.
    let latency_budget = latency * 14;
    let time_bound = critical.mul_f64(1.5) + latency_budget;
    let polls = (instance_delay.as_secs_f64() / poll.as_secs_f64()).ceil();
    let per_machine = calls as f64 / machines as f64;
    // The issue's budget: the create, the polls the provisioning delay requires at the poll
    // interval, the retries of the injected faults. The clusters' own calls count against it.
    let call_budget = 1.0 + polls + faults as f64 / machines as f64;
    println!("API calls by route (faults included):");
    for (route, n) in &by_path {
        println!(
            "  {route:<45} {n:>7}  {:>6.2} per machine",
            *n as f64 / machines as f64
        );
    }
    println!(
        "  instance routes {:.2} per machine, the clusters' routes {:.2} per machine",
        instance_calls as f64 / machines as f64,
        (calls - instance_calls) as f64 / machines as f64
    );
    println!(
        "load average {}; steal {:.1}% of the CPU time during the run (the hypervisor running other guests)",
        load_average(),
        CpuTimes::now().since(&times).steal_pct
    );
    println!(
        "all {machines} machines Ready after {all_ready:.1?} (clusters Ready after {:.1?}, every instance created by {:.1?}); critical path {critical:?}, bound 1.5x + latency budget {:.1?}: ratio {:.2} -> {}",
        clusters_ready_at.unwrap_or_default(),
        last_created.unwrap_or(all_ready),
        time_bound,
        all_ready.as_secs_f64() / time_bound.as_secs_f64(),
        if all_ready <= time_bound {
            "OK"
        } else {
            "OVER"
        }
    );
    println!(
        "instances created {instances} for {machines} machines: duplicates {} -> {}",
        instances.saturating_sub(machines as u64),
        if instances == machines as u64 {
            "OK"
        } else {
            "DUPLICATES"
        }
    );
    println!(
        "API calls {calls} ({faults} faults injected): {per_machine:.2} per machine (clusters' calls included); budget 1 create + {polls} polls + {:.2} fault retries = {call_budget:.2} -> {}",
        faults as f64 / machines as f64,
        if per_machine <= call_budget {
            "OK"
        } else {
            "OVER"
        }
    );

    // Delete everything: machines first (as Cluster API does), then the clusters.
    let delete_start = Instant::now();
    let names: Vec<String> = infra_machines
        .list(&ListParams::default())
        .await?
        .items
        .iter()
        .filter_map(|m| m.metadata.name.clone())
        .collect();
    for name in names {
        infra_machines
            .delete(&name, &DeleteParams::default())
            .await?;
    }
    let infra_clusters: Api<NvidiaBMMCluster> = Api::namespaced(client.clone(), NS);
    for c in 0..clusters {
        infra_clusters
            .delete(&format!("bench-{c}"), &DeleteParams::default())
            .await?;
    }
    let gone = loop {
        let m = infra_machines
            .list(&ListParams::default())
            .await?
            .items
            .len();
        let c = infra_clusters
            .list(&ListParams::default())
            .await?
            .items
            .len();
        if m == 0 && c == 0 {
            break delete_start.elapsed();
        }
        if delete_start.elapsed() > limit {
            println!(
                "NOT DELETED: {m} machines and {c} clusters left after {:.1?}",
                delete_start.elapsed()
            );
            return Ok(false);
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    };
    let left: Vec<(Kind, usize)> = Kind::ALL.iter().map(|k| (*k, sim.live(*k))).collect();
    let leaked: usize = left.iter().map(|(_, n)| n).sum();
    println!(
        "deleted all {clusters} clusters in {gone:.1?}; objects left in the simulator: {leaked} {left:?} -> {}",
        if leaked == 0 { "OK" } else { "LEAKED" }
    );
    controllers.abort();
    Ok(all_ready <= time_bound
        && instances == machines as u64
        && per_machine <= call_budget
        && leaked == 0)
}

/// Samples, every 50 ms, what is in progress: BMM requests inside the simulator, BMM calls the
/// provider awaits, reconciles running; and counts the requests of both servers. `window()`
/// summarises the samples since its last call.
struct Sampler {
    state: std::sync::Arc<std::sync::Mutex<Window>>,
}

#[derive(Default)]
struct Window {
    samples: u64,
    sim_in_flight: i64,
    sim_max: i64,
    calls_in_flight: i64,
    machine_reconciles: i64,
    machine_max: i64,
    cluster_reconciles: i64,
    started: Option<Instant>,
    sim_answered: u64,
    kube_requests: u64,
    sim_base: u64,
    kube_base: u64,
}

impl Sampler {
    fn start(
        sim: Sim,
        metrics: ProviderMetrics,
        kube: nephrite_test_apiserver::Requests,
    ) -> Sampler {
        let state = std::sync::Arc::new(std::sync::Mutex::new(Window {
            started: Some(Instant::now()),
            ..Window::default()
        }));
        let shared = state.clone();
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(Duration::from_millis(50)).await;
                let sim_now = sim.requests_in_flight();
                let machine = metrics.reconciles_running("machine");
                let Ok(mut w) = shared.lock() else { return };
                w.samples += 1;
                w.sim_in_flight += sim_now;
                w.sim_max = w.sim_max.max(sim_now);
                w.calls_in_flight += metrics.api_calls_in_flight.get();
                w.machine_reconciles += machine;
                w.machine_max = w.machine_max.max(machine);
                w.cluster_reconciles += metrics.reconciles_running("cluster");
                w.sim_answered = sim.requests_answered();
                w.kube_requests = kube.snapshot().values().sum();
            }
        });
        Sampler { state }
    }

    /// Means (and maxima) of the samples since the last call, and request rates.
    fn window(&self) -> String {
        let Ok(mut w) = self.state.lock() else {
            return String::new();
        };
        let n = w.samples.max(1) as f64;
        let secs = w
            .started
            .map(|s| s.elapsed().as_secs_f64())
            .unwrap_or(1.0)
            .max(0.001);
        let text = format!(
            "in flight: sim {:.1} (max {}), provider BMM calls {:.1}, machine reconciles {:.1} (max {}), cluster reconciles {:.1}; requests: kube {:.0}/s, BMM {:.0}/s",
            w.sim_in_flight as f64 / n,
            w.sim_max,
            w.calls_in_flight as f64 / n,
            w.machine_reconciles as f64 / n,
            w.machine_max,
            w.cluster_reconciles as f64 / n,
            w.kube_requests.saturating_sub(w.kube_base) as f64 / secs,
            w.sim_answered.saturating_sub(w.sim_base) as f64 / secs,
        );
        *w = Window {
            started: Some(Instant::now()),
            sim_base: w.sim_answered.max(w.sim_base),
            kube_base: w.kube_requests.max(w.kube_base),
            sim_answered: w.sim_answered,
            kube_requests: w.kube_requests,
            ..Window::default()
        };
        text
    }
}

fn main() -> ExitCode {
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            eprintln!("tokio runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(run()) {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(e) => {
            eprintln!("bench failed: {e:#}");
            ExitCode::FAILURE
        }
    }
}
