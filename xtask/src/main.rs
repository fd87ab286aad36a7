//! `cargo xtask <task>`: the project's chores, one command each.
//!
//! - `test`: the Debian packages the tests use (installed when root), format check, clippy, the
//!   layering and licence checks, a warning-free `cargo doc`, doc tests and the whole test suite
//!   (nextest, installed with `cargo install --locked` when missing; `cargo test` if that fails).
//! - `demo`: the daemons working together, end to end (`nephrite_e2e::demo`).
//! - `lint`: format check, clippy, the layering and licence checks only.
//! - `layering`, `licences`: one check each.
//! - `bench <domain>`: a domain's benchmarks (outside `test`: they take minutes and print
//!   figures and ratios rather than pass or fail).
//! - `crds`, `clusterctl`: generated artefacts users install (see [`artefacts`]).
//! - `images`: an OCI image per daemon, built with podman from scratch (see [`images`]).
//! - `kube build|up|down`: the real kube-apiserver and etcd, built from the Go module proxy,
//!   for the tests and to try the controllers against (see [`kube`]).
//! - `cluster up|down|test`: a one-node Kubernetes (the same release, a kubelet on Debian's
//!   containerd) with Nimbess as its CNI and Service proxy, and the network tests on it (see
//!   [`cluster`]).

mod artefacts;
mod boundaries;
mod cluster;
mod images;
mod kube;
mod layering;
mod licences;
mod packages;
mod state_dir;
mod wire_edges;

use std::process::{Command, ExitCode};
use std::time::Instant;

use anyhow::{Context, bail};

const USAGE: &str = "usage: cargo xtask <task>

tasks:
  test            test packages, fmt check, clippy, layering and licence checks, cargo doc,
                  doc tests, all tests
  demo [--kubernetes] [--keep] [--no-build]
                  the toolkit end to end: BMM clusters, the preparer and ntc deploying a
                  free5GC-like topology, NF pods on nimbess, their endpoints behind kuryr-l7;
                  --kubernetes (as root): the NFs as Deployments on a one-node cluster
  lint            fmt check, clippy, layering and licence checks
  layering        check that no core/ crate depends on an IO crate, and that daemons
                  use the wire (nephrite_proto) only in their edge modules
  licences        check that every dependency's licence is compatible with Apache-2.0
  packages        install the Debian packages the tests use (as root)
  images [--dev] [--no-build]
                  build an OCI image per daemon with podman (nephrite/<daemon>:<version>,
                  from scratch, release binaries unless --dev) and run each one's --version
  bench DOMAIN    run a domain's benchmarks: preparer, dashboard, ntc (or topology),
                  ntc-churn, nimbess, nimbess-services, l7 (or l7-router),
                  l7-octavia, bmm, cluster (as root)
  crds [DIR]      write every daemon's CRDs (default target/crds)
  clusterctl [DIR]
                  write bmm-provider's clusterctl provider repository (default
                  target/clusterctl/infrastructure-nvidia-bmm/v0.1.0)
  kube build [--update-sum]
                  build the pinned kube-apiserver and etcd from the Go module proxy into
                  target/kube (skipped when built; the tests' real API server)
  kube up [--dir DIR]
                  start kube-apiserver + etcd detached, state in DIR (default: a fresh
                  temporary directory), admin kubeconfig in DIR/kubeconfig
  kube down [--dir DIR]
                  stop them and remove their state (default: the last `kube up`)
  cluster up [--dir DIR]
                  as root: a one-node Kubernetes (control plane, containerd, kubelet) with
                  nimbess-agent as its CNI and the pause/echo images built here; state in
                  DIR (default: a fresh temporary directory), admin kubeconfig DIR/kubeconfig
  cluster down [--dir DIR]
                  stop everything it started, unmount, remove its links, tables and DIR
                  (default: the last `cluster up`)
  cluster test    as root: the upstream NetworkPolicy matrix and Service cases on a fresh
                  cluster (tests/cluster; up in a temporary directory, down at the end)";

/// Optional features turned on for clippy, docs and tests, so the code behind them is checked
/// too (`nephrite-krm`'s `DynamicObject` bridge, `nephrite-runtime`'s leader election).
const FEATURES: &str = "nephrite-krm/dynamic-object,nephrite-runtime/leader-election";

/// Benchmark domains: (domain, [(package, bench target)] run in order).
const BENCHES: &[(&str, &[(&str, &str)])] = &[
    ("preparer", &[("nephrite-preparer", "preparer")]),
    ("dashboard", &[("nephrite-preparer", "dashboard")]),
    ("ntc", &[("nephrite-topology", "plan")]),
    ("topology", &[("nephrite-topology", "plan")]),
    ("ntc-churn", &[("nephrite-ntc", "churn")]),
    (
        "nimbess",
        &[
            ("nephrite-pipeline", "derive"),
            ("nephrite-nimbess-agent", "add_latency"),
            ("nephrite-nimbess-agent", "throughput"),
        ],
    ),
    (
        "nimbess-services",
        &[("nephrite-nimbess-agent", "services")],
    ),
    ("l7", &[("nephrite-kuryr-l7", "l7")]),
    ("l7-router", &[("nephrite-kuryr-l7", "l7")]),
    ("l7-octavia", &[("nephrite-kuryr-l7", "l7_octavia")]),
    ("bmm", &[("nephrite-bmm-provider", "bmm")]),
    ("cluster", &[("nephrite-cluster-tests", "cluster")]),
];

/// Packages whose binaries a domain's benchmarks execute but cargo does not build for them (a
/// bench gets only its own package's binaries): built with `--release` (where `cargo bench`'s
/// profile puts binaries) before the domain runs.
const BENCH_BINARIES: &[(&str, &[&str])] = &[
    ("nimbess", &["nephrite-nimbess-cni"]),
    ("nimbess-services", &["nephrite-nimbess-cni"]),
];

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let result = match args.first().map(String::as_str) {
        Some("test") => step("packages", packages::ensure)
            .and_then(|()| step("kube", kube_for_tests))
            .and_then(|()| lint())
            .and_then(|()| docs())
            .and_then(|()| test_suite()),
        Some("demo") => demo(&args[1..]),
        Some("images") => step("images", || {
            images::run(&images::Options::parse(&args[1..])?)
        }),
        Some("lint") => lint(),
        Some("layering") => layering_step(),
        Some("licences") => licences_step(),
        Some("packages") => step("packages", packages::ensure),
        Some("bench") => bench(args.get(1).map(String::as_str)),
        Some("crds") => step("crds", || {
            artefacts::crds(&out_dir(args.get(1), "target/crds"))
        }),
        Some("clusterctl") => step("clusterctl", || {
            artefacts::clusterctl(&out_dir(
                args.get(1),
                concat!(
                    "target/clusterctl/infrastructure-nvidia-bmm/v",
                    env!("CARGO_PKG_VERSION")
                ),
            ))
        }),
        Some("kube") => kube::run(&args[1..]),
        Some("cluster") => cluster::run(&args[1..]),
        Some("-h" | "--help" | "help") => {
            println!("{USAGE}");
            Ok(())
        }
        Some(other) => Err(anyhow::anyhow!("unknown task `{other}`\n\n{USAGE}")),
        None => Err(anyhow::anyhow!("no task given\n\n{USAGE}")),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("xtask: {err:#}");
            ExitCode::FAILURE
        }
    }
}

/// `cargo xtask demo [--kubernetes] [--keep] [--no-build]`: builds the daemons (unless
/// `--no-build`) and runs `nephrite_e2e::demo`, or with `--kubernetes` the same path ending on
/// the one-node cluster (`cluster::demo`, as root).
fn demo(args: &[String]) -> anyhow::Result<()> {
    let mut keep = false;
    let mut build = true;
    let mut kubernetes = false;
    for arg in args {
        match arg.as_str() {
            "--keep" => keep = true,
            "--no-build" => build = false,
            "--kubernetes" => kubernetes = true,
            other => {
                bail!("unknown demo flag `{other}` (expected --kubernetes, --keep or --no-build)")
            }
        }
    }
    let build = build.then(|| {
        let mut command = cargo_command();
        command.args(["build", "--bins"]);
        for package in nephrite_e2e::demo::PACKAGES {
            command.args(["--package", package]);
        }
        command.current_dir(workspace_root());
        command
    });
    let options = nephrite_e2e::demo::Options { keep, build };
    if kubernetes {
        cluster::demo::run(options)
    } else {
        nephrite_e2e::demo::run(options)
    }
}

fn lint() -> anyhow::Result<()> {
    step("format", || cargo(&["fmt", "--all", "--", "--check"]))?;
    step("clippy", || {
        cargo(&[
            "clippy",
            "--workspace",
            "--all-targets",
            "--features",
            FEATURES,
            "--",
            "-D",
            "warnings",
        ])
    })?;
    layering_step()?;
    licences_step()
}

/// `cargo metadata --format-version 1` with `extra` arguments (e.g. `--no-deps`).
pub(crate) fn cargo_metadata(extra: &[&str]) -> anyhow::Result<Vec<u8>> {
    let out = Command::new(cargo_bin())
        .args(["metadata", "--format-version", "1"])
        .args(extra)
        .current_dir(workspace_root())
        .output()
        .context("running cargo metadata")?;
    if !out.status.success() {
        bail!(
            "cargo metadata failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    Ok(out.stdout)
}

fn licences_step() -> anyhow::Result<()> {
    step("licences", || {
        let mut metadata: licences::Metadata = serde_json::from_slice(&cargo_metadata(&[])?)
            .context("parsing cargo metadata output")?;
        metadata.retain_built(&licences::built_packages(&cargo_bin(), &workspace_root())?);
        let refused = licences::check(&metadata);
        if refused.is_empty() {
            return Ok(());
        }
        for r in &refused {
            eprintln!("  {r}");
        }
        bail!(
            "{} dependenc{} with a licence outside the Apache-2.0-compatible allow-list",
            refused.len(),
            if refused.len() == 1 { "y" } else { "ies" }
        )
    })
}

fn bench(domain: Option<&str>) -> anyhow::Result<()> {
    let names = BENCHES
        .iter()
        .map(|(d, _)| *d)
        .collect::<Vec<_>>()
        .join(", ");
    let Some(domain) = domain else {
        bail!("which domain? one of {names}");
    };
    let Some((_, targets)) = BENCHES.iter().find(|(d, _)| *d == domain) else {
        bail!("unknown bench domain `{domain}`: one of {names}");
    };
    step("packages", packages::ensure)?;
    if let Some((_, packages)) = BENCH_BINARIES.iter().find(|(d, _)| *d == domain) {
        step(&format!("bench {domain}: the binaries it runs"), || {
            let mut args = vec!["build", "--release", "--bins"];
            for package in *packages {
                args.extend(["--package", package]);
            }
            cargo(&args)
        })?;
    }
    for (package, target) in *targets {
        step(&format!("bench {domain}: {package} {target}"), || {
            cargo(&["bench", "--package", package, "--bench", target])
        })?;
    }
    Ok(())
}

fn layering_step() -> anyhow::Result<()> {
    step("layering", || {
        let metadata: layering::Metadata = serde_json::from_slice(&cargo_metadata(&[])?)
            .context("parsing cargo metadata output")?;
        let violations = layering::check(&metadata)?;
        for v in &violations {
            eprintln!("  {v}");
        }
        let workspace: boundaries::Metadata =
            serde_json::from_slice(&cargo_metadata(&["--no-deps"])?)
                .context("parsing cargo metadata output")?;
        let mut crossings = boundaries::daemon_dependencies(&workspace);
        crossings.extend(boundaries::workspace_path_dependencies(&workspace)?);
        for v in &crossings {
            eprintln!("  {v}");
        }
        let members = workspace.members();
        let daemon_dirs: Vec<&str> = members
            .iter()
            .filter(|m| m.role == boundaries::Role::Daemon)
            .map(|m| m.dir.as_str())
            .collect();
        let wire = wire_edges::check(&workspace_root(), &daemon_dirs, wire_edges::EDGES)?;
        for v in &wire {
            eprintln!("  {v}");
        }
        if !violations.is_empty() {
            bail!(
                "{} forbidden dependenc{} in core/ (the pure layer; see ARCHITECTURE.md)",
                violations.len(),
                if violations.len() == 1 { "y" } else { "ies" }
            )
        }
        if !crossings.is_empty() {
            bail!(
                "{} dependenc{} crossing a daemon boundary or bypassing [workspace.dependencies] \
                 (see ARCHITECTURE.md)",
                crossings.len(),
                if crossings.len() == 1 { "y" } else { "ies" }
            )
        }
        if !wire.is_empty() {
            bail!(
                "{} file{} outside the wire-edge modules use{} nephrite_proto (see ARCHITECTURE.md)",
                wire.len(),
                if wire.len() == 1 { "" } else { "s" },
                if wire.len() == 1 { "s" } else { "" }
            )
        }
        Ok(())
    })
}

/// The tests on the real one-node cluster (`tests/cluster`): they own the host's nimbess
/// tables and a kubelet while they run, so the suite's parallel run leaves them out and
/// [`test_suite`] runs them alone afterwards.
const CLUSTER_TESTS: &str = "nephrite-cluster-tests";

/// Doc tests, then the main suite, then (as root) the cluster tests on a cluster of their own;
/// the cluster tests run even when the main suite failed, and the step fails naming both.
fn test_suite() -> anyhow::Result<()> {
    step("doc tests", || {
        cargo(&["test", "--workspace", "--features", FEATURES, "--doc"])
    })?;
    let main = main_suite();
    let on_cluster = if nephrite_test_services::running_as_root() {
        step(
            "cluster tests (NetworkPolicy matrix, Services, Ingress)",
            || cluster::test(cluster::Binaries::Prebuilt),
        )
    } else {
        eprintln!(
            "\nxtask: SKIPPED, NOT PASSED: the cluster tests ({CLUSTER_TESTS}: the NetworkPolicy \
             matrix, the Service cases and the Ingress on a real one-node Kubernetes) need root; \
             run `cargo xtask test` as root (CI does) or `cargo xtask cluster test` as root\n"
        );
        Ok(())
    };
    match (main, on_cluster) {
        (Ok(()), Ok(())) => Ok(()),
        (Err(e), Ok(())) | (Ok(()), Err(e)) => Err(e),
        (Err(main), Err(cluster)) => bail!("{main:#}\nand {cluster:#}"),
    }
}

/// Every test but the cluster tests' and the doc tests, with nextest when it can be had.
fn main_suite() -> anyhow::Result<()> {
    if !nextest_available() {
        // The suite's host-network tests share the host's nftables tables and take turns only
        // under nextest's test groups (`.config/nextest.toml`): install it rather than run them
        // side by side in one process.
        let installed = step("install cargo-nextest", || {
            cargo(&["install", "--locked", "cargo-nextest"])
        });
        if let Err(e) = installed {
            eprintln!("xtask: {e:#}");
        }
    }
    if nextest_available() {
        step("tests (nextest)", || {
            cargo(&[
                "nextest",
                "run",
                "--workspace",
                "--exclude",
                CLUSTER_TESTS,
                "--features",
                FEATURES,
                "--no-fail-fast",
            ])
        })
    } else {
        eprintln!(
            "xtask: cargo-nextest could not be installed; running the suite with cargo test \
             (the host-network tests may then disturb each other)"
        );
        step("tests (cargo test)", || {
            cargo(&[
                "test",
                "--workspace",
                "--exclude",
                CLUSTER_TESTS,
                "--features",
                FEATURES,
                "--no-fail-fast",
                "--lib",
                "--bins",
                "--tests",
            ])
        })
    }
}

fn docs() -> anyhow::Result<()> {
    step("cargo doc", || {
        let status = cargo_command()
            .args(["doc", "--workspace", "--no-deps", "--features", FEATURES])
            .env("RUSTDOCFLAGS", "-D warnings")
            .current_dir(workspace_root())
            .status()
            .context("running cargo doc")?;
        ensure_success("cargo doc --workspace --no-deps", status)
    })
}

fn nextest_available() -> bool {
    Command::new(cargo_bin())
        .args(["nextest", "--version"])
        .output()
        .is_ok_and(|o| o.status.success())
}

/// The `test` flow's kube step: builds kube-apiserver and etcd when missing, and as root (when
/// the suite runs the cluster tests) the node's binaries with them, all in one `go build` so
/// the packages they share compile once. Without Go the tests that need them skip loudly;
/// under CI that is a failure here already.
fn kube_for_tests() -> anyhow::Result<()> {
    let built = if nephrite_test_services::running_as_root() {
        kube::ensure_node(kube::SumMode::Verify).map(drop)
    } else {
        kube::ensure(kube::SumMode::Verify).map(drop)
    };
    match built {
        Ok(()) => Ok(()),
        Err(e) if std::env::var_os("CI").is_none_or(|ci| ci.is_empty() || ci == "false") => {
            eprintln!("xtask: WARNING: kube-apiserver not built, its tests will skip: {e:#}");
            Ok(())
        }
        Err(e) => Err(e),
    }
}

/// Runs one named step, printing a header and how long it took.
fn step(name: &str, run: impl FnOnce() -> anyhow::Result<()>) -> anyhow::Result<()> {
    eprintln!("xtask: ── {name} ──");
    let started = Instant::now();
    let result = run().with_context(|| format!("step `{name}` failed"));
    eprintln!(
        "xtask: ── {name}: {} in {:.1}s ──",
        if result.is_ok() { "ok" } else { "FAILED" },
        started.elapsed().as_secs_f64()
    );
    result
}

fn cargo(args: &[&str]) -> anyhow::Result<()> {
    let status = cargo_command()
        .args(args)
        .current_dir(workspace_root())
        .status()
        .with_context(|| format!("running cargo {}", args.join(" ")))?;
    ensure_success(&format!("cargo {}", args.join(" ")), status)
}

/// `cargo`, made lean under CI: no incremental caches and no debug info, the standard
/// library's stripped too. Debug info is four fifths of every test binary even at line tables
/// only; with it a whole-workspace test build is 9 GB or more, without it 3.7 GB, and a CI
/// disk may not have the former. Panics still name their file and line (that is compiled in,
/// not read from debug info), and CI builds once, so the caches buy nothing.
pub(crate) fn cargo_command() -> Command {
    let mut command = Command::new(cargo_bin());
    if std::env::var_os("CI").is_some_and(|ci| !ci.is_empty() && ci != "false") {
        command.env("CARGO_INCREMENTAL", "0");
        for profile in ["DEV", "TEST"] {
            command
                .env(format!("CARGO_PROFILE_{profile}_DEBUG"), "false")
                .env(format!("CARGO_PROFILE_{profile}_STRIP"), "debuginfo");
        }
    }
    command
}

pub(crate) fn ensure_success(what: &str, status: std::process::ExitStatus) -> anyhow::Result<()> {
    if status.success() {
        Ok(())
    } else {
        bail!("`{what}` exited with {status}")
    }
}

/// The directory a generating task writes to: the argument, else `default` under the workspace.
fn out_dir(arg: Option<&String>, default: &str) -> std::path::PathBuf {
    arg.map_or_else(|| workspace_root().join(default), std::path::PathBuf::from)
}

fn cargo_bin() -> String {
    std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_string())
}

pub(crate) fn workspace_root() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map(std::path::Path::to_path_buf)
        .unwrap_or_else(|| std::path::PathBuf::from("."))
}
