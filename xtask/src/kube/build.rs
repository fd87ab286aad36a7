//! `cargo xtask kube build`: kube-apiserver and etcd from the Go module proxy, once; and, for
//! `cargo xtask cluster`, the node's binaries from the same release ([`ensure_node`]).
//!
//! The two sets can be built apart so that `cargo xtask test` not run as root, whose tests
//! then need only the API server and etcd, never pays for the kubelet: a cold [`ensure`] takes
//! ~10 minutes. As root the suite runs the cluster tests too and builds all six with
//! [`ensure_node`]: one `go build` of every missing package, so what they share compiles once
//! (see [`NODE_BUILD_COST`]; the node's four built after the API server's two, with Go's build
//! cache dropped between, recompiled the shared packages: ~18 minutes more). One go.sum covers
//! both sets: `--update-sum` builds all of them, and a verified build of either set accepts
//! entries the other needs.
//!
//! Everything lands under `target/kube/` (binaries, the wrapper module, Go's module and build
//! caches with `-modcacherw` so `cargo clean` can delete them), so a warm run costs nothing
//! and a clean one starts over. The build cache is removed once the binaries are in place.
//! The checked-in `xtask/kube/go.sum` pins every module's hash:
//! the build runs with `-mod=readonly`, so a proxy serving different bytes fails the build
//! instead of changing what is tested. After moving the pin, `--update-sum` rebuilds with
//! `-mod=mod` and writes the new go.sum back.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use anyhow::{Context, bail};
use nephrite_test_services::kube_apiserver::{
    ETCD_VERSION, KUBERNETES_VERSION, KubeBinaries, bin_dir, kube_root, release_dir,
};

use super::gomod::{staging_modules, wrapper_go_mod};

/// The checked-in go.sum of the wrapper module, relative to the workspace.
const GO_SUM: &str = "xtask/kube/go.sum";

/// The Go packages built for the tests, and the binary each becomes.
const COMMANDS: &[(&str, &str)] = &[
    ("etcd", "go.etcd.io/etcd/server/v3"),
    ("kube-apiserver", "k8s.io/kubernetes/cmd/kube-apiserver"),
];

/// The Go packages a one-node cluster adds (`cargo xtask cluster up`), from the same release.
/// The container runtime is not among them: see `crate::cluster::runtime` for why Debian's
/// containerd and runc serve this kubelet.
const NODE_COMMANDS: &[(&str, &str)] = &[
    (
        "kube-controller-manager",
        "k8s.io/kubernetes/cmd/kube-controller-manager",
    ),
    ("kube-scheduler", "k8s.io/kubernetes/cmd/kube-scheduler"),
    ("kubelet", "k8s.io/kubernetes/cmd/kubelet"),
    ("kubectl", "k8s.io/kubernetes/cmd/kubectl"),
];

/// What a cold [`ensure_node`] costs, as printed before it starts: all six in one `go build`
/// (measured on the 2-core machine; building the node's four after the API server's two, with
/// Go's build cache dropped between, took ~18 minutes more).
pub const NODE_BUILD_COST: &str = "cold, all six in one go build: 877 CPU-seconds, 17 minutes measured on 2 cores shared at load ~7, ~4 GB of Go build cache while building";

/// The node's binaries of the pinned release, beside the API server's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeBinaries {
    /// `kube-controller-manager`.
    pub controller_manager: PathBuf,
    /// `kube-scheduler`.
    pub scheduler: PathBuf,
    /// `kubelet`.
    pub kubelet: PathBuf,
    /// `kubectl`, the same release as the server.
    pub kubectl: PathBuf,
}

impl NodeBinaries {
    /// The binaries in `bin`.
    pub fn under(bin: &Path) -> NodeBinaries {
        NodeBinaries {
            controller_manager: bin.join("kube-controller-manager"),
            scheduler: bin.join("kube-scheduler"),
            kubelet: bin.join("kubelet"),
            kubectl: bin.join("kubectl"),
        }
    }
}

/// Build the API server's, etcd's and the node's binaries, those missing only, in one go (so
/// a cold build compiles the packages they share once).
pub fn ensure_node(mode: SumMode) -> anyhow::Result<(KubeBinaries, NodeBinaries)> {
    let bin = bin_dir(&kube_root());
    let control_plane = KubeBinaries::under(&bin);
    let node = NodeBinaries::under(&bin);
    if mode == SumMode::Update {
        ensure(mode)?;
        return Ok((control_plane, node));
    }
    let missing: Vec<(&str, &str)> = COMMANDS
        .iter()
        .chain(NODE_COMMANDS)
        .filter(|(name, _)| !bin.join(name).is_file())
        .copied()
        .collect();
    if missing.is_empty() {
        return Ok((control_plane, node));
    }
    eprintln!(
        "xtask: building Kubernetes {KUBERNETES_VERSION}'s {} into {} ({NODE_BUILD_COST})",
        missing
            .iter()
            .map(|(name, _)| *name)
            .collect::<Vec<_>>()
            .join(", "),
        bin.display()
    );
    build(mode, &missing)?;
    Ok((control_plane, node))
}

/// Whether go.sum is trusted or rewritten.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SumMode {
    /// `-mod=readonly` against the checked-in go.sum (the normal build).
    Verify,
    /// `-mod=mod`, then copy the resulting go.sum over the checked-in one.
    Update,
}

/// Build the pinned kube-apiserver and etcd unless both binaries exist; their paths.
pub fn ensure(mode: SumMode) -> anyhow::Result<KubeBinaries> {
    let root = kube_root();
    let binaries = KubeBinaries::under(&bin_dir(&root));
    if binaries.exist() && mode == SumMode::Verify {
        eprintln!(
            "xtask: kube-apiserver {KUBERNETES_VERSION} and etcd {ETCD_VERSION} already built in {}",
            bin_dir(&root).display()
        );
        return Ok(binaries);
    }
    eprintln!(
        "xtask: building kube-apiserver {KUBERNETES_VERSION} and etcd {ETCD_VERSION} from the Go \
         module proxy into {} (cold: ~10 minutes on 2 cores, ~3.5 GB while building)",
        root.display()
    );
    // `--update-sum` builds every command, so the go.sum it writes serves both sets.
    match mode {
        SumMode::Verify => build(mode, COMMANDS)?,
        SumMode::Update => build(mode, &[COMMANDS, NODE_COMMANDS].concat())?,
    }
    Ok(binaries)
}

/// Build `commands` in the wrapper module, each binary moved into place once complete, then
/// drop Go's build cache.
fn build(mode: SumMode, commands: &[(&str, &str)]) -> anyhow::Result<()> {
    let root = kube_root();
    let go = which_go()?;
    let started = Instant::now();
    let module = release_dir(&root).join("module");
    std::fs::create_dir_all(&module).with_context(|| format!("creating {}", module.display()))?;
    let kubernetes_go_mod = download_go_mod(&go, &root, &module)?;
    let staging = staging_modules(&kubernetes_go_mod)?;
    let text = wrapper_go_mod(KUBERNETES_VERSION, ETCD_VERSION, &staging)?;
    write(&module.join("go.mod"), &text)?;
    let checked_in = crate::workspace_root().join(GO_SUM);
    match mode {
        SumMode::Verify => {
            std::fs::copy(&checked_in, module.join("go.sum")).with_context(|| {
                format!(
                    "copying {} (run `cargo xtask kube build --update-sum` to write it)",
                    checked_in.display()
                )
            })?;
        }
        SumMode::Update => {
            let _ = std::fs::remove_file(module.join("go.sum"));
        }
    }
    let bin = bin_dir(&root);
    std::fs::create_dir_all(&bin).with_context(|| format!("creating {}", bin.display()))?;
    // One `go build` of every package: the packages they share (most of k8s.io) compile once
    // and the links overlap the compiles. Built beside and renamed: a half-written binary
    // never counts as built.
    let partial = bin.join(".partial");
    let _ = std::fs::remove_dir_all(&partial);
    std::fs::create_dir_all(&partial).with_context(|| format!("creating {}", partial.display()))?;
    let mut command = go_command(&go, &root, &module);
    command
        .arg("build")
        .arg(match mode {
            SumMode::Verify => "-mod=readonly",
            SumMode::Update => "-mod=mod",
        })
        .args(["-trimpath", "-ldflags", &version_ldflags()?, "-o"])
        // A directory (the trailing slash says so): each binary under its default name.
        .arg(format!("{}/", partial.display()))
        .args(commands.iter().map(|(_, package)| *package));
    let packages = commands
        .iter()
        .map(|(_, package)| *package)
        .collect::<Vec<_>>()
        .join(" ");
    run(&mut command, &format!("go build {packages}"))?;
    for (name, package) in commands {
        let built = partial.join(exec_name(package));
        std::fs::rename(&built, bin.join(name))
            .with_context(|| format!("moving {} into place as {name}", built.display()))?;
    }
    let _ = std::fs::remove_dir_all(&partial);
    if mode == SumMode::Update {
        std::fs::copy(module.join("go.sum"), &checked_in)
            .with_context(|| format!("writing {}", checked_in.display()))?;
        eprintln!("xtask: wrote {}", checked_in.display());
    }
    eprintln!(
        "xtask: {} built in {:.0}s into {}",
        commands
            .iter()
            .map(|(name, _)| *name)
            .collect::<Vec<_>>()
            .join(", "),
        started.elapsed().as_secs_f64(),
        bin.display()
    );
    // Go's build cache is ~3 GB and only speeds up a rebuild, which happens when the pin
    // moves and then recompiles most of it anyway; the module cache (~0.6 GB) stays, so a
    // new pin downloads only what changed.
    let cache = root.join("go").join("cache");
    match std::fs::remove_dir_all(&cache) {
        Ok(()) => eprintln!("xtask: removed Go's build cache {}", cache.display()),
        Err(e) => eprintln!("xtask: could not remove {}: {e}", cache.display()),
    }
    Ok(())
}

/// The `-ldflags` that give the Kubernetes binaries their release version (`kube-apiserver
/// --version`, the API's `/version`, the kubelet's in its Node's status, kubectl's client
/// version); etcd's version is compiled into its source, and it does not link the package these
/// set, so they leave it alone.
fn version_ldflags() -> anyhow::Result<String> {
    let Some((major, minor)) = KUBERNETES_VERSION
        .strip_prefix('v')
        .and_then(|v| v.split('.').next().zip(v.split('.').nth(1)))
    else {
        bail!("{KUBERNETES_VERSION} is not vMAJOR.MINOR.PATCH");
    };
    let package = "k8s.io/component-base/version";
    Ok(format!(
        "-X {package}.gitVersion={KUBERNETES_VERSION} -X {package}.gitMajor={major} \
         -X {package}.gitMinor={minor} -X {package}.gitTreeState=clean"
    ))
}

/// The name `go build -o DIR/` gives the binary of `package`: its last path element, or the one
/// before when that is a major-version suffix (`go.etcd.io/etcd/server/v3` → `server`).
fn exec_name(package: &str) -> &str {
    let mut elements = package.rsplit('/');
    let last = elements.next().unwrap_or(package);
    let is_version = last
        .strip_prefix('v')
        .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()));
    match elements.next() {
        Some(parent) if is_version => parent,
        _ => last,
    }
}

/// Kubernetes' own `go.mod` at the pinned release, fetched into the build's module cache.
fn download_go_mod(go: &Path, root: &Path, module: &Path) -> anyhow::Result<String> {
    let mut command = go_command(go, root, module);
    command
        .args(["mod", "download", "-json"])
        .arg(format!("k8s.io/kubernetes@{KUBERNETES_VERSION}"))
        // Outside the wrapper: it may not have a go.mod yet.
        .env("GO111MODULE", "on")
        .current_dir(root);
    let output = command
        .output()
        .context("running `go mod download k8s.io/kubernetes`")?;
    let answer: serde_json::Value = serde_json::from_slice(&output.stdout).with_context(|| {
        format!(
            "`go mod download k8s.io/kubernetes@{KUBERNETES_VERSION}` answered no JSON ({}): {}",
            output.status,
            String::from_utf8_lossy(&output.stderr)
        )
    })?;
    if let Some(error) = answer["Error"].as_str() {
        bail!("go mod download k8s.io/kubernetes@{KUBERNETES_VERSION}: {error}");
    }
    let path = answer["GoMod"]
        .as_str()
        .context("`go mod download -json` gave no GoMod path")?;
    std::fs::read_to_string(path).with_context(|| format!("reading {path}"))
}

/// `go` with the caches under `root`, the module in `module`, no workspace, no toolchain
/// download and no cgo (static binaries, no C compiler needed).
fn go_command(go: &Path, root: &Path, module: &Path) -> Command {
    let mut command = Command::new(go);
    command
        .current_dir(module)
        .env("GOMODCACHE", root.join("go").join("mod"))
        .env("GOCACHE", root.join("go").join("cache"))
        .env("GOFLAGS", "-modcacherw -buildvcs=false")
        .env("GOWORK", "off")
        .env("GOTOOLCHAIN", "local")
        .env("CGO_ENABLED", "0");
    command
}

/// Run `command`, its output shown, failing with `what` when it fails.
fn run(command: &mut Command, what: &str) -> anyhow::Result<()> {
    let status = command
        .status()
        .with_context(|| format!("running {what}"))?;
    crate::ensure_success(what, status)
}

/// `go` on PATH.
fn which_go() -> anyhow::Result<PathBuf> {
    std::env::var_os("PATH")
        .iter()
        .flat_map(std::env::split_paths)
        .chain([PathBuf::from("/usr/local/go/bin")])
        .map(|dir| dir.join("go"))
        .find(|path| path.is_file())
        .context(
            "`go` is not on PATH (kube-apiserver and etcd are built from the Go module proxy: \
             install Go 1.26 or newer)",
        )
}

fn write(path: &Path, text: &str) -> anyhow::Result<()> {
    std::fs::write(path, text).with_context(|| format!("writing {}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::{COMMANDS, NODE_COMMANDS, exec_name};

    #[test]
    fn a_binary_is_named_after_its_package_without_a_major_version() {
        assert_eq!(exec_name("go.etcd.io/etcd/server/v3"), "server");
        assert_eq!(exec_name("k8s.io/kubernetes/cmd/kubelet"), "kubelet");
        assert_eq!(exec_name("example.com/v2tool"), "v2tool");
        assert_eq!(exec_name("kubectl"), "kubectl");
    }

    #[test]
    fn no_two_packages_built_together_share_a_binary_name() {
        let mut names: Vec<&str> = COMMANDS
            .iter()
            .chain(NODE_COMMANDS)
            .map(|(_, package)| exec_name(package))
            .collect();
        names.sort_unstable();
        let before = names.len();
        names.dedup();
        assert_eq!(names.len(), before, "{names:?}");
    }
}
