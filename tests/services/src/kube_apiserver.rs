//! The real Kubernetes API: kube-apiserver on its own etcd, for tests and for
//! `cargo xtask kube up`.
//!
//! The in-memory API server (`tests/apiserver`) is fast but is our reading of the API; what
//! users run against is kube-apiserver, with its OpenAPI validation, CEL rules, server-side
//! apply and RBAC. This module starts the real one: both binaries built from the Go module
//! proxy at pinned versions ([`KUBERNETES_VERSION`], [`ETCD_VERSION`]; `cargo xtask kube build`),
//! on free loopback ports, with a throwaway CA and serving certificate, a static admin token in
//! `system:masters`, service-account tokens (the TokenRequest API) and
//! `--authorization-mode=Node,RBAC`, so a daemon run with its ServiceAccount's token meets the
//! same refusals it would in a cluster.
//!
//! ```no_run
//! use nephrite_test_services::KubeApiServer;
//! let kube = match KubeApiServer::shared() {
//!     Ok(kube) => kube,
//!     Err(e) => return e.skip("my_test"),
//! };
//! let url = kube.endpoint().url(); // https://127.0.0.1:PORT
//! # let _ = url;
//! ```

mod binaries;
#[cfg(feature = "kube-client")]
mod client;
#[cfg(feature = "kube-client")]
mod crds;
mod detached;
mod flags;
mod https;
mod kubeconfig;
mod launch;
#[cfg(feature = "kube-client")]
mod manifests;
mod pki;

use std::net::SocketAddr;
use std::path::Path;
use std::process::Command;
use std::sync::OnceLock;
use std::time::Duration;

use rustix::process::Signal;
use tempfile::TempDir;

use binaries::WHAT;
pub use binaries::{
    ETCD_VERSION, KUBERNETES_VERSION, KubeBinaries, bin_dir, kube_root, release_dir,
};
#[cfg(feature = "kube-client")]
pub use client::KubeClientError;
#[cfg(feature = "kube-client")]
pub use crds::{CrdError, apply_crds, wait_crds_established};
pub use detached::{ClusterError, DetachedKube, Stopped, down, up};
use launch::{Spawner, launch};
#[cfg(feature = "kube-client")]
pub use manifests::{Credentials, ManifestError};

use crate::Unavailable;
use crate::server_process::ServerProcess;

/// How long a server may take to exit after SIGTERM before it is killed.
const STOP_GRACE: Duration = Duration::from_secs(10);

/// How to reach one kube-apiserver as its admin: address, CA and token.
#[derive(Clone)]
pub struct KubeEndpoint {
    addr: SocketAddr,
    ca_pem: String,
    admin_user: String,
    admin_token: String,
}

impl std::fmt::Debug for KubeEndpoint {
    // The token is a credential: never in a test's output.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KubeEndpoint")
            .field("addr", &self.addr)
            .field("admin_user", &self.admin_user)
            .finish_non_exhaustive()
    }
}

impl KubeEndpoint {
    /// The API's URL, `https://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("https://{}", self.addr)
    }

    /// The API's address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The CA certificate (PEM) that signed the serving certificate.
    pub fn ca_pem(&self) -> &str {
        &self.ca_pem
    }

    /// The admin's bearer token (user `nephrite-admin`, group `system:masters`).
    pub fn admin_token(&self) -> &str {
        &self.admin_token
    }

    /// The admin kubeconfig (CA embedded; context `nephrite`, namespace `default`).
    pub fn kubeconfig(&self) -> String {
        self.kubeconfig_for(&self.admin_user, &self.admin_token)
    }

    /// A kubeconfig for this server authenticating as `user` (the name in the file only)
    /// with `token`, e.g. a ServiceAccount's.
    pub fn kubeconfig_for(&self, user: &str, token: &str) -> String {
        kubeconfig::kubeconfig(&self.url(), &self.ca_pem, user, token)
    }

    /// Write the admin kubeconfig to `path`, readable by the owner only.
    pub fn write_kubeconfig(&self, path: &Path) -> std::io::Result<()> {
        use std::io::Write as _;
        use std::os::unix::fs::OpenOptionsExt as _;
        std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .open(path)?
            .write_all(self.kubeconfig().as_bytes())
    }
}

/// A running kube-apiserver and its etcd, owned by a test; both stopped and their directory
/// removed on drop (or, if the test process is killed, by their watchdogs).
#[derive(Debug)]
pub struct KubeApiServer {
    // Declared in stop order: the API server, then its storage, then the directory.
    apiserver: ServerProcess,
    etcd: ServerProcess,
    endpoint: KubeEndpoint,
    started_in: Duration,
    dir: TempDir,
}

/// The pair of this test binary, started by the first [`KubeApiServer::shared`].
static SHARED: OnceLock<Result<KubeApiServer, Unavailable>> = OnceLock::new();

impl KubeApiServer {
    /// A private pair: fresh credentials, etcd and kube-apiserver on free loopback ports in a
    /// new temporary directory; returns once `/readyz` answers 200 (RBAC's bootstrap roles
    /// are in place by then).
    ///
    /// Err is *missing* (skip outside CI) when the binaries are not built, and *failed* when
    /// they are but did not start (the log tails say why).
    pub fn start() -> Result<KubeApiServer, Unavailable> {
        let binaries = KubeBinaries::find()?;
        let dir = tempfile::Builder::new()
            .prefix("nephrite-kube-")
            .tempdir()
            .map_err(|e| {
                Unavailable::failed(WHAT, format!("cannot create a temporary directory: {e}"))
            })?;
        let launched = launch(&mut OwnedSpawner, &binaries, dir.path())?;
        Ok(KubeApiServer {
            apiserver: launched.apiserver,
            etcd: launched.etcd,
            endpoint: launched.endpoint,
            started_in: launched.started_in,
            dir,
        })
    }

    /// The pair shared by every test of this binary, started by the first call (others wait
    /// for it). It is never dropped: when the test process exits, the watchdogs stop both
    /// servers and remove their directory. Tests sharing it use their own namespaces or names.
    ///
    /// Err is the first start's [`Unavailable`], returned to every caller.
    pub fn shared() -> Result<&'static KubeApiServer, Unavailable> {
        SHARED
            .get_or_init(KubeApiServer::start)
            .as_ref()
            .map_err(Clone::clone)
    }

    /// How to reach the API as admin.
    pub fn endpoint(&self) -> &KubeEndpoint {
        &self.endpoint
    }

    /// The API's URL, `https://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        self.endpoint.url()
    }

    /// Write the admin kubeconfig to `path`.
    pub fn write_kubeconfig(&self, path: &Path) -> std::io::Result<()> {
        self.endpoint.write_kubeconfig(path)
    }

    /// kube-apiserver's process id.
    pub fn apiserver_pid(&self) -> u32 {
        self.apiserver.pid()
    }

    /// etcd's process id.
    pub fn etcd_pid(&self) -> u32 {
        self.etcd.pid()
    }

    /// The directory holding credentials, etcd's data and both logs (removed on drop).
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// From the first spawn to `/readyz` answering 200.
    pub fn started_in(&self) -> Duration {
        self.started_in
    }
}

/// Spawns servers owned by the test: [`ServerProcess`], stopped on drop and by a watchdog.
struct OwnedSpawner;

impl Spawner for OwnedSpawner {
    type Process = ServerProcess;

    fn spawn(
        &mut self,
        what: &str,
        command: Command,
        log: &Path,
        state: &Path,
    ) -> Result<ServerProcess, Unavailable> {
        ServerProcess::spawn(what, command, log, Signal::TERM, STOP_GRACE, state)
    }
}

#[cfg(test)]
mod tests;
