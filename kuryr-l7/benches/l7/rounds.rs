//! The throughput comparison, set by set: for each rule, the router and its yardsticks
//! (map-based HAProxy, nginx) measured back to back (the order rotating and flipping every
//! round), and a set retaken when the hypervisor stole more than the limit during any of its
//! wrk runs. The ACL chain is measured beside them, not compared against a floor, so its runs
//! are never retaken.

use std::fmt::Write as _;
use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use nephrite_test_services::machine::{CpuTimes, load_average};
use nephrite_test_services::stats::median;

use crate::load::{Figures, cpu_seconds, quiet_host, range, settle, wait_idle, wrk};

/// A proxy under test.
pub struct Target {
    pub name: &'static str,
    pub address: SocketAddr,
    pub pid: u32,
}

/// A request the load sends: its `Host` and path, and its name in the report.
pub struct Rule {
    pub name: &'static str,
    pub host: &'static str,
    pub path: &'static str,
}

/// How much to measure.
pub struct Plan {
    /// Pairs wanted per rule (the medians are over these).
    pub runs: usize,
    /// Seconds per wrk run.
    pub seconds: u64,
    /// The steal (percent) above which a pair is taken again.
    pub max_steal: f64,
    /// Retakes allowed in all; after that, disturbed pairs count, and say so.
    pub retakes: usize,
    /// How long to wait for the CPUs to quieten before a round.
    pub settle_limit: Duration,
    /// How long to wait before a pair for a steal probe at most `max_steal`.
    pub quiet_limit: Duration,
    /// The proxy's CPU and the load's, when pinned ([`crate::load::Placement::cpus`]).
    pub cpus: Option<(usize, usize)>,
}

/// The counted runs for one rule.
#[derive(Default)]
pub struct RuleRuns {
    /// The compared set's runs: the router's, then each yardstick's, in the set's order.
    pub compared: Vec<Vec<Figures>>,
    /// The runs of the target measured beside them.
    pub beside: Vec<Figures>,
}

/// The counted runs, rule by rule.
pub type Results = Vec<RuleRuns>;

/// One wrk run against `target`, with the proxy's CPU time per request, the steal and, when
/// pinned, how busy the proxy's and the load's CPUs were.
fn measure(wrk_bin: &Path, target: &Target, rule: &Rule, plan: &Plan) -> Figures {
    let cpu_before = cpu_seconds(target.pid);
    let before = Counters::read(plan.cpus);
    let mut figures = wrk(wrk_bin, target.address, rule.host, rule.path, plan.seconds);
    let after = Counters::read(plan.cpus);
    let requests = figures.rps * plan.seconds as f64;
    figures.cpu_us = (cpu_seconds(target.pid) - cpu_before) * 1e6 / requests.max(1.0);
    figures.steal_pct = after.all.since(&before.all).steal_pct;
    figures.busy_pct = after.pinned.zip(before.pinned).map(|(after, before)| {
        (
            after.0.since(&before.0).busy_pct,
            after.1.since(&before.1).busy_pct,
        )
    });
    wait_idle(target.pid);
    figures
}

/// The machine's CPU counters and, when pinned, the proxy's and the load's CPU's, from one
/// read of `/proc/stat`.
struct Counters {
    all: CpuTimes,
    pinned: Option<(CpuTimes, CpuTimes)>,
}

impl Counters {
    fn read(cpus: Option<(usize, usize)>) -> Self {
        let stat = std::fs::read_to_string("/proc/stat").unwrap_or_default();
        Counters {
            all: CpuTimes::parse(&stat),
            pinned: cpus.map(|(proxy, load)| {
                (
                    CpuTimes::parse_cpu(&stat, proxy),
                    CpuTimes::parse_cpu(&stat, load),
                )
            }),
        }
    }
}

fn describe(figures: &Figures) -> String {
    let mut text = format!(
        "{:>7.0} req/s p50 {:5.2} ms p99 {:6.2} ms {:5.1} us/req steal {:4.1}%",
        figures.rps, figures.p50_ms, figures.p99_ms, figures.cpu_us, figures.steal_pct
    );
    if let Some((proxy, load)) = figures.busy_pct {
        let _ = write!(text, " busy {proxy:3.0}/{load:3.0}%");
    }
    text
}

/// Measures `compared` (the router, then the yardsticks it is held against) as sets and
/// `beside` once per round, until every rule has `plan.runs` counted sets.
pub fn measure_pairs(
    wrk_bin: &Path,
    compared: &[&Target],
    beside: &Target,
    rules: &[Rule],
    plan: &Plan,
) -> Results {
    let n = compared.len();
    let mut results: Results = rules
        .iter()
        .map(|_| RuleRuns {
            compared: vec![Vec::new(); n],
            beside: Vec::new(),
        })
        .collect();
    let mut retakes_left = plan.retakes;
    let mut round = 0;
    while results
        .iter()
        .any(|runs| runs.compared[0].len() < plan.runs)
    {
        round += 1;
        let (busy, waited) = settle(25.0, plan.settle_limit);
        println!(
            "   round {round}: load {}, CPUs {busy:.0}% busy with other work before (waited {}s)",
            load_average(),
            waited.as_secs()
        );
        for (r, rule) in rules.iter().enumerate() {
            if results[r].compared[0].len() >= plan.runs {
                continue;
            }
            // The order rotates every set and flips every other one (ABBA for two), so a drift
            // in the machine hits every target alike.
            let shift = (round + r) / 2;
            let mut order: Vec<usize> = (0..n).map(|i| (i + shift) % n).collect();
            if (round + r) % 2 == 0 {
                order.reverse();
            }
            let (probe, waited) = quiet_host(plan.max_steal, plan.quiet_limit);
            let mut pair = vec![Figures::default(); n];
            for at in order {
                pair[at] = measure(wrk_bin, compared[at], rule, plan);
            }
            let mut report = format!(
                "     {:<5} rule (probe: steal {probe:.1}%, waited {}s)",
                rule.name,
                waited.as_secs()
            );
            for (target, figures) in compared.iter().zip(&pair) {
                let _ = write!(report, " | {} {}", target.name, describe(figures));
            }
            let steal = pair.iter().map(|f| f.steal_pct).fold(0.0, f64::max);
            if steal > plan.max_steal {
                if retakes_left > 0 {
                    retakes_left -= 1;
                    println!(
                        "{report}\n       disturbed: the hypervisor stole {steal:.1}% of the CPU time (limit {}%); taken again ({retakes_left} retakes left)",
                        plan.max_steal
                    );
                    continue;
                }
                let _ = write!(
                    report,
                    "\n       disturbed (steal {steal:.1}%), counted: no retakes left"
                );
            }
            println!("{report}");
            for (runs, figures) in results[r].compared.iter_mut().zip(pair) {
                runs.push(figures);
            }
        }
        for (r, rule) in rules.iter().enumerate() {
            if results[r].beside.len() < plan.runs {
                let figures = measure(wrk_bin, beside, rule, plan);
                println!(
                    "     {:<5} rule | {} {}",
                    rule.name,
                    beside.name,
                    describe(&figures)
                );
                results[r].beside.push(figures);
            }
        }
    }
    results
}

/// A ratio against the ACL chain, which can be hundreds of times slower on the last rule: below
/// 0.1 in scientific notation, so that a p99 ratio of 0.002 prints as 2.0e-3, not 0.00.
fn beside(ratio: f64) -> String {
    if ratio > 0.0 && ratio < 0.1 {
        format!("{ratio:.1e}")
    } else {
        format!("{ratio:.2}")
    }
}

fn median_of(runs: &[Figures], field: impl Fn(&Figures) -> f64) -> f64 {
    median(&mut runs.iter().map(field).collect::<Vec<_>>())
}

/// Prints each target's medians and the ratios: the router against each yardstick (the floors
/// are about map-based HAProxy, `compared[1]`) and against the target measured beside them.
pub fn report(results: &Results, compared: &[&Target], beside_target: &Target, rules: &[Rule]) {
    for (rule, rule_runs) in rules.iter().zip(results) {
        let targets = compared.iter().copied().chain([beside_target]);
        let runs_of = rule_runs.compared.iter().chain([&rule_runs.beside]);
        for (target, runs) in targets.zip(runs_of) {
            let (low, high) = range(runs.iter().map(|f| f.rps));
            let busy = if runs.iter().all(|f| f.busy_pct.is_some()) {
                let busy = |pick: fn((f64, f64)) -> f64| {
                    median_of(runs, move |f| f.busy_pct.map_or(f64::NAN, pick))
                };
                format!(
                    "; CPUs busy: the proxy's {:.0}%, the load's {:.0}%",
                    busy(|b| b.0),
                    busy(|b| b.1)
                )
            } else {
                String::new()
            };
            println!(
                "   {:<12} {:<5} rule: {:>10.0} req/s  p50 {:5.2} ms  p99 {:6.2} ms  CPU {:5.1} us/req   (runs {low:.0}..{high:.0} req/s{busy})",
                target.name,
                rule.name,
                median_of(runs, |f| f.rps),
                median_of(runs, |f| f.p50_ms),
                median_of(runs, |f| f.p99_ms),
                median_of(runs, |f| f.cpu_us),
            );
        }
    }
    let ratio = |a: &[Figures], b: &[Figures], field: fn(&Figures) -> f64| {
        median_of(a, field) / median_of(b, field)
    };
    for (r, rule) in rules.iter().enumerate() {
        let RuleRuns {
            compared: runs,
            beside: acl,
        } = &results[r];
        let router = &runs[0];
        for (k, yardstick) in runs.iter().enumerate().skip(1) {
            // The same ratios set by set (each router run against the yardstick's run of the
            // same set).
            let pairs = |field: fn(&Figures) -> f64| -> Vec<f64> {
                router
                    .iter()
                    .zip(yardstick)
                    .map(|(a, b)| field(a) / field(b))
                    .collect()
            };
            let (rps_pairs, p99_pairs) = (pairs(|f| f.rps), pairs(|f| f.p99_ms));
            let (rps_low, rps_high) = range(rps_pairs.iter().copied());
            let (p99_low, p99_high) = range(p99_pairs.iter().copied());
            let floors = if k == 1 {
                (" (floor >= 0.95, goal 1.2)", " (floor <= 1.0, goal 0.8)")
            } else {
                ("", "")
            };
            println!(
                "   {:<5} rule: {} / {}: RPS {:.2}{}, p99 {:.2}{}; set by set: RPS median {:.2} (sets {rps_low:.2}..{rps_high:.2}), p99 median {:.2} (sets {p99_low:.2}..{p99_high:.2})",
                rule.name,
                compared[0].name,
                compared[k].name,
                ratio(router, yardstick, |f| f.rps),
                floors.0,
                ratio(router, yardstick, |f| f.p99_ms),
                floors.1,
                median(&mut rps_pairs.clone()),
                median(&mut p99_pairs.clone())
            );
        }
        println!(
            "   {:<5} rule: {} / {}: RPS {}, p99 {}",
            rule.name,
            compared[0].name,
            beside_target.name,
            beside(ratio(router, acl, |f| f.rps)),
            beside(ratio(router, acl, |f| f.p99_ms)),
        );
    }
}
