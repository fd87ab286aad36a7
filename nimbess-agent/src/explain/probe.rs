//! `explain --probe`: one real TCP connection from the source pod's
//! network namespace to the destination, and what the kernel's counters
//! made of it. The model's verdict says what the probe must meet — a
//! connection or a refusal when allowed (no listener answers with a
//! reset), silence when denied (dropped), a refusal for a Service port
//! without a ready backend — and the deciding rule, where it counts
//! (a `drop`), must count the probe's packets.

use std::net::{SocketAddrV4, TcpStream};
use std::time::Duration;

use nephrite_pipeline::{Explanation, Verdict};
use serde::Serialize;

use super::live::LiveCheck;

/// How long the probe waits for an answer to its SYN.
pub const PATIENCE: Duration = Duration::from_secs(2);

/// What the probe met.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ProbeOutcome {
    /// The connection was accepted.
    Connected,
    /// A reset (nothing listening, or a Service rejecting).
    Refused,
    /// No answer within [`PATIENCE`]: dropped.
    TimedOut,
    /// No route (the kernel said so at once).
    Unreachable,
}

impl std::fmt::Display for ProbeOutcome {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            ProbeOutcome::Connected => "connected",
            ProbeOutcome::Refused => "refused (a reset)",
            ProbeOutcome::TimedOut => "no answer (dropped)",
            ProbeOutcome::Unreachable => "no route",
        })
    }
}

/// Why the probe could not be sent.
#[derive(Debug, thiserror::Error)]
pub enum ProbeError {
    /// The source pod's namespace cannot be entered.
    #[error("entering the source pod's network namespace {netns}: {reason}")]
    Enter {
        /// Its path.
        netns: String,
        /// What failed.
        reason: String,
    },
}

/// One TCP connection to `dst` from the network namespace at `netns`.
///
/// # Errors
/// The namespace cannot be entered (not root, or gone).
pub fn connect_from(netns: &str, dst: SocketAddrV4) -> Result<ProbeOutcome, ProbeError> {
    let path = netns.to_string();
    std::thread::spawn(move || {
        let file = std::fs::File::open(&path).map_err(|e| e.to_string())?;
        nix::sched::setns(&file, nix::sched::CloneFlags::CLONE_NEWNET)
            .map_err(|e| e.to_string())?;
        Ok(match TcpStream::connect_timeout(&dst.into(), PATIENCE) {
            Ok(_) => ProbeOutcome::Connected,
            Err(e) => match e.kind() {
                std::io::ErrorKind::ConnectionRefused => ProbeOutcome::Refused,
                std::io::ErrorKind::HostUnreachable | std::io::ErrorKind::NetworkUnreachable => {
                    ProbeOutcome::Unreachable
                }
                _ => ProbeOutcome::TimedOut,
            },
        })
    })
    .join()
    .unwrap_or_else(|_| Err("the probe's thread panicked".to_string()))
    .map_err(|reason| ProbeError::Enter {
        netns: netns.to_string(),
        reason,
    })
}

/// A counted rule's packets before and after the probe.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CounterMove {
    /// The rule, as `--live` prints it.
    pub rule: String,
    /// Its packets before the probe.
    pub before: u64,
    /// And after.
    pub after: u64,
}

/// What `--probe` found.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ProbeReport {
    /// Where the probe went.
    pub destination: SocketAddrV4,
    /// What it met.
    pub outcome: ProbeOutcome,
    /// The counted rules `--live` found, before and after.
    pub counters: Vec<CounterMove>,
    /// True when the outcome and the counters are what the model says.
    pub agrees: bool,
    /// Each difference, one line.
    pub disagreements: Vec<String>,
}

impl std::fmt::Display for ProbeReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "probe: TCP to {}: {}", self.destination, self.outcome)?;
        for c in &self.counters {
            write!(
                f,
                "\n  {}: +{} packets",
                c.rule,
                c.after.saturating_sub(c.before)
            )?;
        }
        for d in &self.disagreements {
            write!(f, "\n  {d}")?;
        }
        Ok(())
    }
}

/// Judge the probe's `outcome` against `explanation`, with the counted
/// rules of `before` and `after` (the same checks, read around the probe).
pub fn judge(
    explanation: &Explanation,
    destination: SocketAddrV4,
    outcome: ProbeOutcome,
    before: &[LiveCheck],
    after: &[LiveCheck],
) -> ProbeReport {
    let mut disagreements = Vec::new();
    let reached = matches!(outcome, ProbeOutcome::Connected | ProbeOutcome::Refused);
    let verdict = explanation.verdict();
    let expected = match verdict {
        Verdict::Allowed => Some(reached),
        Verdict::Denied | Verdict::Unrouted => Some(!reached),
        Verdict::Refused => Some(outcome == ProbeOutcome::Refused),
        Verdict::Mixed => None,
    };
    if expected == Some(false) {
        disagreements.push(format!(
            "model and kernel disagree: the model says {verdict}, the probe met {outcome}"
        ));
    }
    let mut counters = Vec::new();
    for (b, a) in before.iter().zip(after) {
        if let (Some(fb), Some(fa)) = (&b.found, &a.found)
            && let (Some(pb), Some(pa)) = (fb.packets, fa.packets)
        {
            counters.push(CounterMove {
                rule: b.expected.rule_text(),
                before: pb,
                after: pa,
            });
        }
    }
    // a drop the model names must have counted the probe it dropped
    if verdict == Verdict::Denied && !reached {
        let deciding: Vec<&CounterMove> = counters
            .iter()
            .filter(|c| c.rule.ends_with(" drop"))
            .collect();
        if !deciding.is_empty() && deciding.iter().all(|c| c.after == c.before) {
            disagreements.push(
                "model and kernel disagree: the probe was dropped, but not by the rule the model names (its counter did not move)"
                    .to_string(),
            );
        }
    }
    ProbeReport {
        destination,
        outcome,
        counters,
        agrees: disagreements.is_empty(),
        disagreements,
    }
}
