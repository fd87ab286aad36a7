//! Which kube-apiserver and etcd run, and where their binaries live.
//!
//! Both are built from the Go module proxy by `cargo xtask kube build` (the wrapper module is
//! generated from [`KUBERNETES_VERSION`] and [`ETCD_VERSION`]), into the workspace's cargo
//! target directory, so `cargo clean` removes them with everything else and a warm run finds
//! them without building. Debian's etcd (3.4) is too old for a current kube-apiserver, so
//! this module never looks on `PATH`.

use std::path::{Path, PathBuf};

use crate::Unavailable;

/// The `k8s.io/kubernetes` release whose kube-apiserver is built and run.
pub const KUBERNETES_VERSION: &str = "v1.37.2";

/// The etcd release run under it: the version that Kubernetes release's kubeadm deploys
/// (`DefaultEtcdVersion`), which is also the etcd client it is built with.
pub const ETCD_VERSION: &str = "v3.7.0";

/// What error messages call the pair.
pub(crate) const WHAT: &str = "kube-apiserver";

/// The paths of the two built binaries for the pinned versions.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KubeBinaries {
    /// `kube-apiserver`, built from `k8s.io/kubernetes/cmd/kube-apiserver`.
    pub kube_apiserver: PathBuf,
    /// `etcd`, built from `go.etcd.io/etcd/server/v3`.
    pub etcd: PathBuf,
}

impl KubeBinaries {
    /// Where the binaries of the pinned versions belong:
    /// `<target>/kube/<KUBERNETES_VERSION>-etcd-<ETCD_VERSION>/bin/`.
    pub fn expected() -> KubeBinaries {
        KubeBinaries::under(&bin_dir(&kube_root()))
    }

    /// The two binaries in `bin`.
    pub fn under(bin: &Path) -> KubeBinaries {
        KubeBinaries {
            kube_apiserver: bin.join("kube-apiserver"),
            etcd: bin.join("etcd"),
        }
    }

    /// Whether both binaries exist.
    pub fn exist(&self) -> bool {
        self.kube_apiserver.is_file() && self.etcd.is_file()
    }

    /// The binaries of the pinned versions, or a *missing* [`Unavailable`] saying to run
    /// `cargo xtask kube build` (skipped outside CI, a failure under `CI=true`).
    pub fn find() -> Result<KubeBinaries, Unavailable> {
        KubeBinaries::expected().present()
    }

    /// These binaries when both exist, else the *missing* [`Unavailable`] naming them.
    pub(crate) fn present(self) -> Result<KubeBinaries, Unavailable> {
        let binaries = self;
        let missing: Vec<String> = [&binaries.kube_apiserver, &binaries.etcd]
            .into_iter()
            .filter(|p| !p.is_file())
            .map(|p| p.display().to_string())
            .collect();
        if missing.is_empty() {
            Ok(binaries)
        } else {
            Err(Unavailable::not_provisioned(
                format!("{WHAT} {KUBERNETES_VERSION} with etcd {ETCD_VERSION}"),
                format!("not built yet ({} missing)", missing.join(", ")),
                "cargo xtask kube build (Go and the module proxy; several minutes the first time)",
            ))
        }
    }
}

/// `<target>/kube`: everything `cargo xtask kube build` writes (binaries, the wrapper
/// module, and the Go module and build caches), under the workspace's cargo target directory
/// (`CARGO_TARGET_DIR` when set, relative to the workspace root when relative).
pub fn kube_root() -> PathBuf {
    // This crate is tests/services inside the workspace.
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    let workspace = manifest
        .ancestors()
        .nth(2)
        .map_or_else(|| manifest.join("..").join(".."), Path::to_path_buf);
    let target = match std::env::var_os("CARGO_TARGET_DIR").filter(|d| !d.is_empty()) {
        Some(dir) => workspace.join(dir),
        None => workspace.join("target"),
    };
    target.join("kube")
}

/// The directory of one pinned pair under `root` ([`kube_root`]).
pub fn release_dir(root: &Path) -> PathBuf {
    root.join(format!("{KUBERNETES_VERSION}-etcd-{ETCD_VERSION}"))
}

/// The binaries' directory of the pinned pair under `root` ([`kube_root`]).
pub fn bin_dir(root: &Path) -> PathBuf {
    release_dir(root).join("bin")
}
