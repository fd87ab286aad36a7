//! The command lines of etcd and kube-apiserver, as pure functions of where things are.
//!
//! Kept apart from starting the processes so the flags can be read in one place and checked
//! without running anything. The choices that matter:
//!
//! - kube-apiserver authenticates with a static token file and service-account tokens only,
//!   and authorises with `Node,RBAC`, as a production control plane does: a test that uses a
//!   ServiceAccount's token sees the same 403s a cluster would give.
//! - `--endpoint-reconciler-type=none`: no `kubernetes` Endpoints to keep for a server no pod
//!   will ever reach.
//! - API priority and fairness is off: on two shared cores its bookkeeping only slows start-up.
//! - etcd runs without fsync: its data lives as long as one test.

use std::net::SocketAddr;
use std::path::Path;

use super::pki::Pki;

/// The etcd member's name; the cluster has only this member.
pub(crate) const ETCD_MEMBER: &str = "nephrite-kube";

/// The service IP range (the server allocates ClusterIPs from it; nothing routes it).
pub(crate) const SERVICE_CLUSTER_IP_RANGE: &str = "10.96.0.0/12";

/// The issuer written into service-account tokens.
pub(crate) const SERVICE_ACCOUNT_ISSUER: &str = "https://kubernetes.default.svc.cluster.local";

/// Where the etcd member listens.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct EtcdPorts {
    /// The client URL's address.
    pub(crate) client: SocketAddr,
    /// The peer (raft) address.
    pub(crate) peer: SocketAddr,
}

/// etcd's arguments: one member, data in `data_dir`, logging to stderr.
pub(crate) fn etcd_args(ports: EtcdPorts, data_dir: &Path) -> Vec<String> {
    let client = format!("http://{}", ports.client);
    let peer = format!("http://{}", ports.peer);
    vec![
        format!("--name={ETCD_MEMBER}"),
        format!("--data-dir={}", data_dir.display()),
        format!("--listen-client-urls={client}"),
        format!("--advertise-client-urls={client}"),
        format!("--listen-peer-urls={peer}"),
        format!("--initial-advertise-peer-urls={peer}"),
        format!("--initial-cluster={ETCD_MEMBER}={peer}"),
        format!(
            "--initial-cluster-token={ETCD_MEMBER}-{}",
            ports.client.port()
        ),
        "--initial-cluster-state=new".to_owned(),
        "--unsafe-no-fsync=true".to_owned(),
        "--logger=zap".to_owned(),
        "--log-outputs=stderr".to_owned(),
        "--log-level=warn".to_owned(),
    ]
}

/// kube-apiserver's arguments: serving on `secure` with the certificate, token file and
/// service-account key of `pki`, storing in etcd at `etcd_client`, `cert_dir` for anything
/// it writes itself.
pub(crate) fn apiserver_args(
    secure: SocketAddr,
    etcd_client: SocketAddr,
    pki: &Pki,
    cert_dir: &Path,
) -> Vec<String> {
    vec![
        format!("--etcd-servers=http://{etcd_client}"),
        format!("--bind-address={}", secure.ip()),
        format!("--advertise-address={}", secure.ip()),
        format!("--secure-port={}", secure.port()),
        format!("--cert-dir={}", cert_dir.display()),
        format!("--tls-cert-file={}", pki.serving_cert.display()),
        format!("--tls-private-key-file={}", pki.serving_key.display()),
        format!("--token-auth-file={}", pki.token_file.display()),
        "--authorization-mode=Node,RBAC".to_owned(),
        format!(
            "--service-account-key-file={}",
            pki.service_account_public_key.display()
        ),
        format!(
            "--service-account-signing-key-file={}",
            pki.service_account_key.display()
        ),
        format!("--service-account-issuer={SERVICE_ACCOUNT_ISSUER}"),
        format!("--service-cluster-ip-range={SERVICE_CLUSTER_IP_RANGE}"),
        "--endpoint-reconciler-type=none".to_owned(),
        "--enable-priority-and-fairness=false".to_owned(),
        "--profiling=false".to_owned(),
    ]
}
