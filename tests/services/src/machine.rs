//! What the machine was doing while a benchmark ran: the load average, and how the CPUs'
//! time split between this VM's work, idleness and steal (time the hypervisor gave other
//! guests while this one had work, which nothing inside the VM can avoid or see otherwise).
//!
//! ```no_run
//! use nephrite_test_services::machine::{CpuTimes, load_average};
//!
//! let before = CpuTimes::now();
//! // … a timed run …
//! let shares = CpuTimes::now().since(&before);
//! println!("load {}, steal {:.1}%", load_average(), shares.steal_pct);
//! ```

/// The load average over 1, 5 and 15 minutes (`/proc/loadavg`), or `unknown`.
pub fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|text| {
            text.split_whitespace()
                .take(3)
                .collect::<Vec<_>>()
                .join(" ")
        })
        .unwrap_or_else(|_| "unknown".into())
}

/// Jiffies all CPUs (or one, [`CpuTimes::parse_cpu`]) spent so far in each state, from
/// `/proc/stat`: user, nice, system, idle, iowait, irq, softirq, steal (zeros where Linux is
/// not there to ask).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CpuTimes {
    states: [u64; 8],
}

/// How the CPUs' time between two [`CpuTimes`] readings was spent, in percent of it.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct CpuShares {
    /// Not idle (waiting for IO counts as idle): this VM's work, ours and anybody else's,
    /// and steal.
    pub busy_pct: f64,
    /// Steal: the hypervisor ran other guests while this one had work.
    pub steal_pct: f64,
}

const IDLE: usize = 3;
const IOWAIT: usize = 4;
const STEAL: usize = 7;

impl CpuTimes {
    /// The counters now.
    pub fn now() -> Self {
        Self::parse(&std::fs::read_to_string("/proc/stat").unwrap_or_default())
    }

    /// The counters of all CPUs in the text of `/proc/stat`.
    pub fn parse(stat: &str) -> Self {
        Self::parse_line(stat, "cpu")
    }

    /// CPU `cpu`'s counters in the text of `/proc/stat` (zeros for a CPU it does not list).
    pub fn parse_cpu(stat: &str, cpu: usize) -> Self {
        Self::parse_line(stat, &format!("cpu{cpu}"))
    }

    fn parse_line(stat: &str, name: &str) -> Self {
        let mut states = [0; 8];
        let line = stat
            .lines()
            .find(|line| line.split_whitespace().next() == Some(name));
        if let Some(line) = line {
            for (state, field) in states.iter_mut().zip(line.split_whitespace().skip(1)) {
                *state = field.parse().unwrap_or(0);
            }
        }
        CpuTimes { states }
    }

    /// How the time since `earlier` was spent.
    pub fn since(&self, earlier: &CpuTimes) -> CpuShares {
        let delta: [u64; 8] =
            std::array::from_fn(|at| self.states[at].saturating_sub(earlier.states[at]));
        let total = delta.iter().sum::<u64>() as f64;
        if total == 0.0 {
            return CpuShares::default();
        }
        let idle = delta[IDLE] + delta[IOWAIT];
        CpuShares {
            busy_pct: (total - idle as f64) * 100.0 / total,
            steal_pct: delta[STEAL] as f64 * 100.0 / total,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shares_of_the_time_between_two_readings() {
        let before = CpuTimes::parse("cpu  100 0 50 800 50 0 0 0 0 0\ncpu0 1 2 3\n");
        let after = CpuTimes::parse("cpu  150 0 70 880 50 0 0 50 0 0\ncpu0 1 2 3\n");
        // 200 jiffies: 70 of ours, 80 idle, 50 stolen.
        let shares = after.since(&before);
        assert!((shares.busy_pct - 60.0).abs() < 1e-9, "{shares:?}");
        assert!((shares.steal_pct - 25.0).abs() < 1e-9, "{shares:?}");
    }

    #[test]
    fn one_cpu_read_from_its_own_line() {
        let stat = "cpu  9 9 9 9 9 9 9 9\ncpu0 10 0 0 90 0 0 0 0\ncpu1 50 0 0 50 0 0 0 0\n";
        let busy = |cpu| {
            CpuTimes::parse_cpu(stat, cpu)
                .since(&CpuTimes::default())
                .busy_pct
        };
        assert!((busy(0) - 10.0).abs() < 1e-9);
        assert!((busy(1) - 50.0).abs() < 1e-9);
        assert_eq!(CpuTimes::parse_cpu(stat, 2), CpuTimes::default());
        // `cpu1` is not `cpu10`'s prefix match, nor the total line's.
        let stat = "cpu  1 1 1 1\ncpu10 7 7 7 7\n";
        assert_eq!(CpuTimes::parse_cpu(stat, 1), CpuTimes::default());
    }

    #[test]
    fn no_counters_no_shares_and_no_division_by_zero() {
        let none = CpuTimes::parse("intr 1 2 3\n");
        assert_eq!(none, CpuTimes::default());
        let shares = none.since(&none);
        assert_eq!((shares.busy_pct, shares.steal_pct), (0.0, 0.0));
        // A counter that went backwards (a different machine's file) counts as zero.
        let later = CpuTimes::parse("cpu  1 1 1 1 1 1 1 1\n");
        assert_eq!(none.since(&later).steal_pct, 0.0);
    }
}
