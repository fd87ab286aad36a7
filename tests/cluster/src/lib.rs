//! The upstream Kubernetes network tests' model, run on the real one-node cluster that
//! `cargo xtask cluster up` starts (a kubelet, containerd, nimbess-agent as the CNI and Service
//! proxy): the NetworkPolicy truth table of `test/e2e/network/netpol` (namespaces x, y, z; pods
//! a, b, c serving TCP 80 and 81; the full 9×9 reachability matrix after each policy) and the
//! Service cases (ready endpoints only, NodePort, ClientIP affinity, no endpoints refused).
//!
//! Why a crate of its own: the cluster is the real thing, started by the same code as
//! `cargo xtask cluster up` (the test runs that command, in a temporary directory, and
//! `cluster down` when done, even on failure), and it owns the host's `ip nimbess` tables while it
//! runs, so `cargo xtask test` runs this crate alone, after the rest of the suite.
//!
//! One concern per module: [`cluster`] (up, down, kubectl), [`ingress`] (kuryr-l7's controller
//! and router as host processes), [`pods`] (the namespaces, pods and
//! their network namespaces), [`probe`] (a TCP connection from inside a pod's network
//! namespace, no exec and no shell in the image), [`reachability`] (the expected and observed
//! matrices and how they print).

pub mod cluster;
pub mod ingress;
pub mod pods;
pub mod probe;
pub mod reachability;

/// Whether this process runs as root (the cluster needs it): its effective uid, the second of
/// `/proc/self/status`'s `Uid:` line, is 0.
pub fn is_root() -> bool {
    std::fs::read_to_string("/proc/self/status").is_ok_and(|status| {
        status
            .lines()
            .find_map(|l| l.strip_prefix("Uid:"))
            .and_then(|uids| uids.split_whitespace().nth(1))
            == Some("0")
    })
}
