//! The reachability matrix of upstream's NetworkPolicy tests: for every port, every pod to every
//! pod, reachable or not; what a case expects, what the probes observed, and both printed as
//! upstream prints them (`.` reachable, `X` blocked, rows are the clients).
//!
//! A pod reaching itself never leaves its network namespace (its own address is local there),
//! so no policy can stop it: the diagonal is always expected reachable (upstream's
//! `AllowLoopback`).

use std::collections::BTreeMap;
use std::fmt::Write;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use crate::pods::Pod;
use crate::probe::{Outcome, probe};

/// One probe's coordinates: client pod, server pod, port (by index into the pods).
type Key = (usize, usize, u16);

/// A full matrix: for each (client, server, port), whether the server answered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Matrix {
    ids: Vec<String>,
    ports: Vec<u16>,
    cells: BTreeMap<Key, bool>,
}

impl Matrix {
    /// The matrix `expect(client, server, port)` describes over `pods` and `ports`, the
    /// diagonal reachable whatever `expect` says.
    pub fn expected(
        pods: &[Pod],
        ports: &[u16],
        expect: impl Fn(&Pod, &Pod, u16) -> bool,
    ) -> Matrix {
        let mut cells = BTreeMap::new();
        for (i, from) in pods.iter().enumerate() {
            for (j, to) in pods.iter().enumerate() {
                for &port in ports {
                    cells.insert((i, j, port), i == j || expect(from, to, port));
                }
            }
        }
        Matrix {
            ids: pods.iter().map(|p| p.id.clone()).collect(),
            ports: ports.to_vec(),
            cells,
        }
    }

    /// Probe every cell at once (a thread each) and note which answered, with the right pod.
    /// The second value lists, for each unexpected answer, who answered instead.
    pub fn observe(pods: &[Pod], ports: &[u16]) -> (Matrix, Vec<String>) {
        let outcomes: Vec<(Key, Outcome)> = std::thread::scope(|scope| {
            let mut probes = Vec::new();
            for (i, from) in pods.iter().enumerate() {
                for (j, to) in pods.iter().enumerate() {
                    for &port in ports {
                        probes.push(scope.spawn(move || {
                            let outcome = probe(
                                Some(&from.netns),
                                SocketAddr::from((to.ip, port)),
                                "/netpol",
                            );
                            ((i, j, port), outcome)
                        }));
                    }
                }
            }
            probes
                .into_iter()
                .filter_map(|probe| probe.join().ok())
                .collect()
        });
        let mut cells = BTreeMap::new();
        let mut strays = Vec::new();
        for ((i, j, port), outcome) in outcomes {
            let answered = outcome.answered_by() == Some(pods[j].id.as_str());
            if let Some(other) = outcome.answered_by().filter(|_| !answered) {
                strays.push(format!(
                    "{} -> {}:{port} was answered by {other}",
                    pods[i].id, pods[j].id
                ));
            }
            cells.insert((i, j, port), answered);
        }
        let matrix = Matrix {
            ids: pods.iter().map(|p| p.id.clone()).collect(),
            ports: ports.to_vec(),
            cells,
        };
        (matrix, strays)
    }

    /// The cells where `self` and `other` differ, one line each.
    pub fn differences(&self, other: &Matrix) -> Vec<String> {
        self.cells
            .iter()
            .filter(|(key, value)| other.cells.get(key) != Some(value))
            .map(|(&(i, j, port), &value)| {
                format!(
                    "{} -> {}:{port}: expected {}, observed {}",
                    self.ids[i],
                    self.ids[j],
                    if value { "reachable" } else { "blocked" },
                    if value { "blocked" } else { "reachable" },
                )
            })
            .collect()
    }

    /// The matrix of each port as a table.
    pub fn render(&self) -> String {
        let mut text = String::new();
        for &port in &self.ports {
            let _ = write!(text, "port {port:<5}");
            for id in &self.ids {
                let _ = write!(text, " {id:>4}");
            }
            text.push('\n');
            for (i, from) in self.ids.iter().enumerate() {
                let _ = write!(text, "{from:<10}");
                for j in 0..self.ids.len() {
                    let mark = if self.cells.get(&(i, j, port)) == Some(&true) {
                        '.'
                    } else {
                        'X'
                    };
                    let _ = write!(text, " {mark:>4}");
                }
                text.push('\n');
            }
        }
        text
    }
}

/// Probe until the observed matrix is `expected` (the agent renders what the API says a moment
/// after it says it), at most until `timeout`; on failure, both matrices and their differences.
pub fn converge(pods: &[Pod], expected: &Matrix, timeout: Duration) -> Result<usize, String> {
    let deadline = Instant::now() + timeout;
    let mut rounds = 0;
    loop {
        rounds += 1;
        let (observed, strays) = Matrix::observe(pods, &expected.ports);
        if &observed == expected && strays.is_empty() {
            return Ok(rounds);
        }
        if Instant::now() >= deadline {
            return Err(format!(
                "after {rounds} rounds of probes in {}s (. reachable, X blocked, rows are clients):\n\
                 expected:\n{}observed:\n{}differences:\n  {}{}",
                timeout.as_secs(),
                expected.render(),
                observed.render(),
                expected.differences(&observed).join("\n  "),
                if strays.is_empty() {
                    String::new()
                } else {
                    format!("\nwrong pods answered:\n  {}", strays.join("\n  "))
                }
            ));
        }
        std::thread::sleep(Duration::from_millis(500));
    }
}
