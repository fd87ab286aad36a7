//! Running the load and reading the machine: wrk and its figures, a process's CPU time, how
//! busy the CPUs are with other work, and where the processes run.

use std::net::SocketAddr;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use nephrite_test_services::machine::CpuTimes;
use nix::sched::{CpuSet, sched_setaffinity};
use nix::unistd::Pid;

/// One wrk run's figures.
#[derive(Debug, Clone, Copy, Default)]
pub struct Figures {
    pub rps: f64,
    pub p50_ms: f64,
    pub p99_ms: f64,
    pub non_2xx: u64,
    pub socket_errors: u64,
    /// The proxy's CPU time (user + system) per request, in microseconds.
    pub cpu_us: f64,
    /// The share of CPU time the hypervisor gave to other guests during the run, in percent
    /// (steal: time this VM wanted a CPU and did not get one).
    pub steal_pct: f64,
    /// When pinned: how busy the proxy's CPU and the load's (wrk + nginx) CPU were, in percent.
    /// Whichever is near 100 bounds the run; when it is the load's, the figures are the load
    /// generator's as much as the proxy's.
    pub busy_pct: Option<(f64, f64)>,
}

/// CPU time (user + system) of process `pid` so far, in seconds (Linux `USER_HZ` is 100).
pub fn cpu_seconds(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // Fields after the command name (which is in parentheses and may hold spaces).
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .map(|(_, rest)| rest.split_whitespace().collect())
        .unwrap_or_default();
    let ticks = |i: usize| {
        fields
            .get(i)
            .and_then(|f| f.parse::<u64>().ok())
            .unwrap_or(0)
    };
    // utime and stime are fields 14 and 15 of the line, 12 and 13 after the name.
    (ticks(11) + ticks(12)) as f64 / 100.0
}

fn parse_latency(text: &str) -> f64 {
    let text = text.trim();
    let (number, factor) = if let Some(n) = text.strip_suffix("us") {
        (n, 0.001)
    } else if let Some(n) = text.strip_suffix("ms") {
        (n, 1.0)
    } else if let Some(n) = text.strip_suffix('s') {
        (n, 1000.0)
    } else {
        (text, 1.0)
    };
    number.parse::<f64>().unwrap_or(f64::NAN) * factor
}

/// `wrk -t1 -c32` for `seconds` against `http://address/path` with `Host: host`.
pub fn wrk(wrk: &Path, address: SocketAddr, host: &str, path: &str, seconds: u64) -> Figures {
    let output = Command::new(wrk)
        .args([
            "-t1",
            "-c32",
            &format!("-d{seconds}s"),
            "--latency",
            "-H",
            &format!("Host: {host}"),
        ])
        .arg(format!("http://{address}{path}"))
        .output()
        .expect("wrk runs");
    let text = String::from_utf8_lossy(&output.stdout);
    let mut figures = Figures::default();
    for line in text.lines() {
        let line = line.trim();
        if let Some(rest) = line.strip_prefix("Requests/sec:") {
            figures.rps = rest.trim().parse().unwrap_or(0.0);
        } else if let Some(rest) = line.strip_prefix("50%") {
            figures.p50_ms = parse_latency(rest);
        } else if let Some(rest) = line.strip_prefix("99%") {
            figures.p99_ms = parse_latency(rest);
        } else if let Some(rest) = line.strip_prefix("Non-2xx or 3xx responses:") {
            figures.non_2xx = rest.trim().parse().unwrap_or(0);
        } else if let Some(rest) = line.strip_prefix("Socket errors:") {
            figures.socket_errors = rest
                .split(',')
                .filter_map(|part| part.split_whitespace().last()?.parse::<u64>().ok())
                .sum();
        }
    }
    figures
}

/// How busy the CPUs are, in percent, over `window`.
fn busy_percent(window: Duration) -> f64 {
    let before = CpuTimes::now();
    std::thread::sleep(window);
    CpuTimes::now().since(&before).busy_pct
}

/// Takes `probe` until it reads at most `threshold` or `limit` has passed, pausing `pause`
/// between readings: the last reading and how long it waited.
fn wait_for(
    threshold: f64,
    limit: Duration,
    pause: Duration,
    mut probe: impl FnMut() -> f64,
) -> (f64, Duration) {
    let start = Instant::now();
    loop {
        let reading = probe();
        if reading <= threshold || start.elapsed() >= limit {
            return (reading, start.elapsed());
        }
        std::thread::sleep(pause);
    }
}

/// Waits (at most `limit`) until other work leaves the CPUs at most `threshold` percent busy,
/// measured over 1-second windows while the bench's own processes are idle: the busy share
/// when it stopped waiting, and how long it waited.
pub fn settle(threshold: f64, limit: Duration) -> (f64, Duration) {
    wait_for(threshold, limit, Duration::ZERO, || {
        busy_percent(Duration::from_secs(1))
    })
}

/// The hypervisor's steal, in percent, over `window` with every CPU kept busy by a spinning
/// thread pinned to it. Steal only accrues while the guest has work, so an idle machine reads
/// 0 however crowded the host is: the probe gives it work.
fn steal_under_load(window: Duration) -> f64 {
    let cpus = std::thread::available_parallelism().map_or(1, usize::from);
    let before = CpuTimes::now();
    let deadline = Instant::now() + window;
    std::thread::scope(|scope| {
        for cpu in 0..cpus {
            scope.spawn(move || {
                Placement::pin(cpu);
                while Instant::now() < deadline {
                    std::hint::spin_loop();
                }
            });
        }
    });
    CpuTimes::now().since(&before).steal_pct
}

/// Waits (at most `limit`) for the host to leave this guest alone: probes the steal for a
/// second at a time ([`steal_under_load`]), two seconds apart, until one probe reads at most
/// `max_steal` percent. The last probe's steal and how long it waited.
pub fn quiet_host(max_steal: f64, limit: Duration) -> (f64, Duration) {
    wait_for(max_steal, limit, Duration::from_secs(2), || {
        steal_under_load(Duration::from_secs(1))
    })
}

/// Where the processes run: the proxy under test alone on one CPU, wrk and nginx on the
/// other, the same for every proxy. A process started by the calling thread inherits its CPU
/// set, so the bench moves itself before starting each one.
#[derive(Debug, Clone, Copy)]
pub struct Placement {
    cpus: Option<(usize, usize)>,
}

impl Placement {
    /// Pinning on a machine with two CPUs or more, unless `L7_BENCH_PIN=0`.
    pub fn detect() -> Self {
        let wanted = std::env::var("L7_BENCH_PIN").map_or(true, |v| v != "0");
        let cpus = std::thread::available_parallelism().map_or(1, usize::from);
        Placement {
            cpus: (wanted && cpus >= 2).then_some((1, 0)),
        }
    }

    /// The proxy's CPU and the load's, when pinned.
    pub fn cpus(&self) -> Option<(usize, usize)> {
        self.cpus
    }

    /// What the placement is, for the report.
    pub fn describe(&self) -> String {
        match self.cpus {
            Some((proxy, load)) => {
                format!("the proxy alone on CPU {proxy}, wrk and nginx on CPU {load}")
            }
            None => "not pinned (all processes share all CPUs)".into(),
        }
    }

    fn pin(cpu: usize) {
        let mut set = CpuSet::new();
        if set.set(cpu).is_ok() {
            let _ = sched_setaffinity(Pid::from_raw(0), &set);
        }
    }

    /// Processes started from now on run on the proxies' CPU.
    pub fn for_proxies(&self) {
        if let Some((proxy, _)) = self.cpus {
            Self::pin(proxy);
        }
    }

    /// Processes started from now on (wrk, nginx) run on the load's CPU.
    pub fn for_load(&self) {
        if let Some((_, load)) = self.cpus {
            Self::pin(load);
        }
    }
}

/// The smallest and the largest of `values`.
pub fn range(values: impl Iterator<Item = f64> + Clone) -> (f64, f64) {
    (
        values.clone().fold(f64::INFINITY, f64::min),
        values.fold(0.0, f64::max),
    )
}

/// Waits (at most 5 s) until process `pid` stops using CPU: HAProxy's ACL chain still works
/// through queued requests after wrk is gone, on the CPU the next proxy measured needs.
pub fn wait_idle(pid: u32) {
    let deadline = Instant::now() + Duration::from_secs(5);
    let mut before = cpu_seconds(pid);
    while Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(200));
        let now = cpu_seconds(pid);
        if now == before {
            return;
        }
        before = now;
    }
}
