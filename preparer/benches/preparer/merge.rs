//! Merge 1,000 into 1,000 and 10,000 into 10,000, and the ratio between them.

use std::time::{Duration, Instant};

use nephrite_krm::{Gvk, Object, Package, keys};
use nephrite_merge::merge_package;
use nephrite_test_services::machine::{CpuTimes, load_average};
use nephrite_test_services::stats::median;

use super::ms;

fn packages(n: usize) -> (Package, Package) {
    let gvk = Gvk::new("example.org", "v1", "Tuning");
    let mut template = Package::new();
    let mut merge = Package::new();
    for i in 0..n {
        let mut object = Object::new(&gvk, format!("r{i}"));
        object
            .spec_mut()
            .expect("spec")
            .insert("a".into(), serde_json::json!({"x": i, "y": [1, 2]}));
        template.push(object.clone());
        let mut over = Object::new(&gvk, format!("r{}", i * 2));
        over.set_annotation(keys::MERGE, if i % 2 == 0 { "Override" } else { "Replace" });
        over.spec_mut()
            .expect("spec")
            .insert("a".into(), serde_json::json!({"x": -1}));
        merge.push(over);
    }
    (template, merge)
}

/// One timed merge of `merge` into a fresh copy of `template` (copying and dropping are not
/// timed). With `evict`, the caches are filled with other data between the copy and the
/// merge, so that neither size starts with its data in cache (a diagnostic: it separates
/// cache capacity from the work itself).
fn time_merge(template: &Package, merge: &Package, evict: Option<&mut Vec<u64>>) -> Duration {
    let mut target = template.clone();
    if let Some(buffer) = evict {
        for (at, word) in buffer.iter_mut().enumerate() {
            *word = word.wrapping_add(at as u64);
        }
        std::hint::black_box(&buffer);
    }
    let start = Instant::now();
    merge_package(&mut target, merge, |_| false).expect("merge");
    let took = start.elapsed();
    drop(target);
    took
}

/// Merge 1,000 into 1,000 and 10,000 into 10,000: after a warm-up, `runs` interleaved pairs
/// (small, large), so that load from other processes falls on both sizes alike. Prints the
/// medians, the ratio of the medians and the spread of the per-pair ratios (the noise).
pub fn figures(runs: usize) {
    let (small_template, small_merge) = packages(1000);
    let (large_template, large_merge) = packages(10_000);
    for _ in 0..3 {
        time_merge(&small_template, &small_merge, None);
        time_merge(&large_template, &large_merge, None);
    }
    let (mut small, mut large, mut ratios) = (Vec::new(), Vec::new(), Vec::new());
    let (mut small_cold, mut large_cold) = (Vec::new(), Vec::new());
    // 64 MB: more than the caches this data could stay in.
    let mut evict = vec![0u64; 8 << 20];
    let times = CpuTimes::now();
    for _ in 0..runs.max(1) {
        let s = ms(time_merge(&small_template, &small_merge, None));
        let l = ms(time_merge(&large_template, &large_merge, None));
        small.push(s);
        large.push(l);
        ratios.push(l / s);
        small_cold.push(ms(time_merge(
            &small_template,
            &small_merge,
            Some(&mut evict),
        )));
        large_cold.push(ms(time_merge(
            &large_template,
            &large_merge,
            Some(&mut evict),
        )));
    }
    let shares = CpuTimes::now().since(&times);
    let (small_median, large_median) = (median(&mut small), median(&mut large));
    let ratio_median = median(&mut ratios);
    let quartile = |at: f64| ratios[((ratios.len() - 1) as f64 * at).round() as usize];
    println!(
        "merge 1,000 into 1,000:   median {small_median:>7.2} ms of {} runs (fastest {:.2}, slowest {:.2}; target < 5 ms)",
        small.len(),
        small[0],
        small[small.len() - 1]
    );
    println!(
        "merge 10,000 into 10,000: median {large_median:>7.2} ms (fastest {:.2}, slowest {:.2})",
        large[0],
        large[large.len() - 1]
    );
    println!(
        "merge 10× input: ratio of medians {:.2}×; per-pair ratios median {ratio_median:.2}×, quartiles {:.2}..{:.2}×, range {:.2}..{:.2}× (target ≤ 12×)",
        large_median / small_median,
        quartile(0.25),
        quartile(0.75),
        ratios[0],
        ratios[ratios.len() - 1]
    );
    let (small_cold, large_cold) = (median(&mut small_cold), median(&mut large_cold));
    println!(
        "  diagnostic, caches evicted before each merge: median {small_cold:.2} ms and {large_cold:.2} ms, ratio {:.2}× (the work without the cache advantage of the small size)",
        large_cold / small_cold
    );
    println!(
        "  machine during the merge runs: steal {:.1}% of the CPU time (the hypervisor running other guests), load average {}",
        shares.steal_pct,
        load_average()
    );
    cost_curve();
}

/// Sizes for the per-resource cost curve: below 1,000 fixed costs show, above it the data
/// outgrows first the core's cache and then the shared one.
const CURVE_SIZES: [usize; 8] = [250, 500, 1000, 2000, 5000, 10_000, 20_000, 40_000];

/// A diagnostic: the median cost per resource of an N-into-N merge over a range of sizes,
/// interleaved round by round, so that one line shows where the cost per resource is lowest
/// and where it grows with the size of the data.
fn cost_curve() {
    let inputs: Vec<(Package, Package)> = CURVE_SIZES.iter().map(|&n| packages(n)).collect();
    let mut costs: Vec<Vec<f64>> = vec![Vec::new(); CURVE_SIZES.len()];
    for _ in 0..15 {
        for ((template, merge), costs) in inputs.iter().zip(&mut costs) {
            let took = time_merge(template, merge, None);
            costs.push(took.as_secs_f64() * 1e6 / merge.len() as f64);
        }
    }
    let curve: Vec<String> = CURVE_SIZES
        .iter()
        .zip(&mut costs)
        .map(|(n, costs)| format!("{n}: {:.2}", median(costs)))
        .collect();
    println!(
        "  diagnostic, µs per resource by size (median of 15 interleaved rounds): {}",
        curve.join(", ")
    );
}
