//! `cargo bench -p nephrite-topology --bench plan` (wired as `cargo xtask bench topology`).
//!
//! Plans a synthetic topology of 10,000 NF instances over 1,000 clusters with 50,000
//! attachments (each selector matches 3 clusters; 10,000 network instances with 5 NF instances
//! each), then 100,000 instances (100,000 network instances), and prints the time to plan, the
//! counts of variants, gates and connectivities, and the cost of one published-package event at
//! both sizes with their ratio (the target: at most 2×). It also re-plans each size against
//! its own children after one instance's capacity changed (`replan::diff`), and prints the
//! cost per child at both sizes and their ratio (the target: at most 2×, the diff being
//! n log n).

use std::hint::black_box;
use std::time::{Duration, Instant};

use nephrite_krm::LabelSelector;
use nephrite_topology::api::{CapacitySpec, DeletionPolicy};
use nephrite_topology::api::{
    Cluster, NFClass, NFClassSpec, NFInstance, NFInterface, NFTemplate, NFTopology, NfType,
    PackageRevisionReference,
};
use nephrite_topology::replan::{ExistingChild, desired_children, diff};
use nephrite_topology::{DeployedTopologyBuilder, Plan, RolloutPolicy, plan};

const CLUSTERS: usize = 1_000;
const ATTACHMENTS_PER_INSTANCE: usize = 5;

fn topology(instances: usize) -> NFTopology {
    let networks = instances; // 5 attachments each → 5 NF instances per network
    let groups = CLUSTERS / 3;
    let nf_instances = (0..instances)
        .map(|i| {
            let nf_type = match i % 10 {
                0 => "smf",
                1 => "amf",
                _ => "upf",
            };
            NFInstance {
                name: format!("nf{i}"),
                cluster_selector: LabelSelector::new()
                    .with_label("group", format!("g{}", i % groups)),
                nf_template: NFTemplate {
                    nf_type: NfType::new(nf_type),
                    class_name: nf_type.to_owned(),
                    capacity: None,
                    nf_interfaces: (0..ATTACHMENTS_PER_INSTANCE)
                        .map(|k| NFInterface {
                            name: format!("if{k}"),
                            network_instance_name: format!("net{}", (i + k * 2003) % networks),
                        })
                        .collect(),
                },
            }
        })
        .collect();
    NFTopology::new("bench", nf_instances)
}

fn clusters() -> Vec<Cluster> {
    (0..CLUSTERS)
        .map(|c| Cluster::new(format!("c{c}"), [("group", format!("g{}", c / 3))]))
        .collect()
}

fn classes() -> Vec<NFClass> {
    ["smf", "amf", "upf"]
        .into_iter()
        .map(|t| {
            NFClass::new(
                t,
                NFClassSpec {
                    vendor: "v".into(),
                    version: "1".into(),
                    flavor: None,
                    package_ref: PackageRevisionReference {
                        repository: "catalog".into(),
                        package_name: t.into(),
                        ..Default::default()
                    },
                },
            )
        })
        .collect()
}

fn best_of<T>(runs: usize, mut f: impl FnMut() -> T) -> (Duration, T) {
    let mut best = Duration::MAX;
    let mut last = None;
    for _ in 0..runs {
        let start = Instant::now();
        let value = f();
        best = best.min(start.elapsed());
        last = Some(value);
    }
    (best, last.expect("at least one run"))
}

/// Average time of one publish event, over every variant, on a fresh builder.
fn per_event(plan: &Plan) -> Duration {
    let n = plan.variants().len();
    let (elapsed, _) = best_of(3, || {
        let mut builder = DeployedTopologyBuilder::new(plan);
        for v in 0..n {
            black_box(builder.publish(&plan.variants()[v].id));
        }
        builder.published_count()
    });
    elapsed / u32::try_from(n).unwrap_or(u32::MAX)
}

/// Time per child to re-plan `topology` after one instance's capacity changed, against the
/// children of the unchanged plan; checks that exactly that instance's children are updated.
fn per_child_replan(
    mut topology: NFTopology,
    classes: &[NFClass],
    clusters: &[Cluster],
    before: &Plan,
) -> Duration {
    let existing: Vec<ExistingChild> = desired_children(before)
        .into_iter()
        .enumerate()
        .map(|(i, c)| ExistingChild {
            id: format!("d{i}"),
            key: c.key,
            fingerprint: Some(c.fingerprint),
            prepared: true,
            approved: true,
        })
        .collect();
    topology.spec.nf_instances[0].nf_template.capacity = Some(CapacitySpec {
        max_sessions: Some(1),
        ..CapacitySpec::default()
    });
    let after = plan::plan(&topology, classes, clusters, before.policy()).expect("plans");
    let (elapsed, changes) = best_of(3, || {
        diff(&existing, &desired_children(&after), DeletionPolicy::Delete)
    });
    assert_eq!(changes.update.len(), after.variants_of(0).len());
    assert_eq!(changes.action_count(), changes.update.len());
    elapsed / u32::try_from(existing.len()).unwrap_or(u32::MAX)
}

fn run(instances: usize) -> (Duration, Duration, Duration) {
    let topology = topology(instances);
    let clusters = clusters();
    let classes = classes();
    let policy = RolloutPolicy::default();
    let (plan_time, plan) = best_of(3, || {
        plan::plan(&topology, &classes, &clusters, &policy).expect("plans")
    });
    let counts = plan.counts();
    let event = per_event(&plan);
    let replan = per_child_replan(topology.clone(), &classes, &clusters, &plan);
    println!(
        "plan {instances:>7} instances / {CLUSTERS} clusters / {} attachments / {} network instances: {:>8.1} ms  \
         → {} variants, {} gates, {} connectivities; one published event: {:>6.2} µs; \
         re-plan per child: {:>6.2} µs",
        instances * ATTACHMENTS_PER_INSTANCE,
        counts.network_instances,
        plan_time.as_secs_f64() * 1e3,
        counts.variants,
        counts.gates,
        counts.connectivities,
        event.as_secs_f64() * 1e6,
        replan.as_secs_f64() * 1e6,
    );
    (plan_time, event, replan)
}

fn main() {
    let (small_plan, small_event, small_replan) = run(10_000);
    let (large_plan, large_event, large_replan) = run(100_000);
    println!(
        "10k plan: {:.0}% of the 1 s budget; 100k plan: {:.0}% of 1 s",
        small_plan.as_secs_f64() * 100.0,
        large_plan.as_secs_f64() * 100.0
    );
    println!(
        "per-event cost ratio 100k/10k: {:.2}× (target ≤ 2×)",
        large_event.as_secs_f64() / small_event.as_secs_f64()
    );
    println!(
        "per-child re-plan cost ratio 100k/10k: {:.2}× (target ≤ 2×)",
        large_replan.as_secs_f64() / small_replan.as_secs_f64()
    );
}
