//! `cargo xtask demo`: the whole toolkit working together on one machine, the path
//! ARCHITECTURE.md's "How the daemons fit together" draws.
//!
//! 1. `bmm-sim` plays NVIDIA BMM; `bmm-provider apply -f` provisions three workload clusters.
//! 2. The preparer keeps them as Sites, with their labels as the Sites' metadata.
//! 3. `ntc serve --backend tko` deploys the free5GC-like topology through the preparer: one child
//!    deployment per NF instance and matching site, the SMF approved by ntc once its UPFs are.
//! 4. `nimbess-agent` gives each NF instance a pod on its networks; as root, on the kernel data
//!    plane, the SMF pings a UPF.
//! 5. The `kuryr-l7` controller and router put each NF's management endpoint behind one Ingress.
//!
//! It builds only what it runs (dev profile), downloads nothing, and keeps all state, the
//! agent's included, in one temporary directory: removed on success and on Ctrl-C, kept (and
//! named) after a failure. `--keep` leaves everything running until Ctrl-C and says how to poke
//! at each daemon.

use std::process::{Command, Stdio};

use anyhow::{Context, bail};

use crate::lab::Lab;
use crate::progress::Progress;
use crate::{bmm, interrupt, pods, router, tko};

/// The packages whose binaries the demo runs.
pub const PACKAGES: &[&str] = &[
    "nephrite-bmm-provider",
    "nephrite-bmm-sim",
    "nephrite-preparer",
    "nephrite-ntc",
    "nephrite-nimbess-agent",
    "nephrite-nimbess-cni",
    "nephrite-kuryr-l7",
];

/// How the demo runs.
pub struct Options {
    /// Leave everything running until Ctrl-C.
    pub keep: bool,
    /// The command that builds [`PACKAGES`]' binaries into [`crate::bin_dir`] (dev profile),
    /// run as the first step; `None` runs what is there.
    pub build: Option<Command>,
}

/// What every step gave, for the summary.
struct Outcome {
    provisioned: bmm::Provisioned,
    deployed: tko::Deployed,
    pods: pods::Pods,
    routed: router::Routed,
}

/// Runs the demo to its summary (and, with `keep`, on until Ctrl-C), then cleans up.
pub fn run(options: Options) -> anyhow::Result<()> {
    interrupt::install()?;
    let root = crate::workspace_root();
    let progress = Progress::new();
    let as_root = nephrite_test_services::running_as_root();
    let mut lab = Lab::new(crate::bin_dir())?;
    progress.println(&format!(
        "Nephrite demo: state and logs in {}{}",
        lab.dir().display(),
        if as_root {
            ""
        } else {
            " (not root: the sim data plane, no pings)"
        }
    ));
    let Options { keep, build } = options;
    let result = (|| -> anyhow::Result<Outcome> {
        if let Some(command) = build {
            run_build(&lab, &progress, command)?;
        }
        let preparer = tko::store(&mut lab, &progress)?;
        let provisioned = bmm::provision(&mut lab, &progress, preparer)?;
        let deployed = tko::deploy(&mut lab, &progress, &root, preparer)?;
        let pods = pods::plug(&mut lab, &progress, &deployed.children, as_root)?;
        let routed = router::route(&mut lab, &progress, &pods.pods)?;
        Ok(Outcome {
            provisioned,
            deployed,
            pods,
            routed,
        })
    })();
    match result {
        Ok(outcome) => {
            print_summary(&outcome);
            if keep {
                print_pokes(&lab, &outcome);
                while !interrupt::interrupted() {
                    std::thread::sleep(std::time::Duration::from_millis(200));
                }
            }
            report_leftovers(lab.cleanup())?;
            lab.finish(false);
            Ok(())
        }
        Err(err) if err.is::<interrupt::Interrupted>() => {
            let left = lab.cleanup();
            lab.finish(false);
            println!("demo: interrupted; everything it started is stopped and removed");
            report_leftovers(left)?;
            bail!("interrupted")
        }
        Err(err) => {
            let left = lab.cleanup();
            let kept = lab.finish(true);
            report_leftovers(left)?;
            match kept {
                Some(dir) => bail!("{err:#}\nthe demo's logs are in {}/logs", dir.display()),
                None => Err(err),
            }
        }
    }
}

/// An error naming what cleanup could not undo, if anything.
pub fn report_leftovers(left: Vec<String>) -> anyhow::Result<()> {
    if left.is_empty() {
        return Ok(());
    }
    bail!("the demo could not clean up: {}", left.join("; "))
}

/// Builds the binaries the demo runs with `command`, as the step `build the daemons`, its
/// output in the lab's `build` log and its last line shown live.
pub fn run_build(lab: &Lab, progress: &Progress, mut command: Command) -> anyhow::Result<()> {
    let step = progress.step("build the daemons (dev profile)");
    let log = lab.log("build");
    let out = std::fs::File::create(&log)?;
    let mut child = command
        .stdin(Stdio::null())
        .stdout(out.try_clone()?)
        .stderr(out)
        .spawn()
        .context("running cargo build")?;
    loop {
        if let Some(status) = child.try_wait()? {
            if !status.success() {
                step.failed("cargo build failed");
                bail!(
                    "cargo build exited with {status}; its output: {}",
                    log.display()
                );
            }
            break;
        }
        if interrupt::interrupted() {
            let _ = child.kill();
            let _ = child.wait();
            interrupt::check()?;
        }
        if let Some(last) = std::fs::read_to_string(&log)
            .ok()
            .and_then(|text| text.lines().last().map(|l| l.trim().to_owned()))
        {
            step.message(&last);
        }
        std::thread::sleep(std::time::Duration::from_millis(250));
    }
    step.done(&format!("{} packages", PACKAGES.len()));
    Ok(())
}

fn print_summary(outcome: &Outcome) {
    let Outcome {
        provisioned,
        deployed,
        pods,
        routed,
    } = outcome;
    println!();
    println!("Summary");
    print_topology_summary(provisioned, deployed);
    let interfaces: usize = pods.pods.iter().map(|p| p.interfaces.len()).sum();
    println!(
        "  pods                      {} pods, {interfaces} interfaces ({} data plane)",
        pods.pods.len(),
        pods.driver
    );
    match &pods.ping {
        Ok(stats) | Err(stats) => println!("  ping                      {stats}"),
    }
    println!(
        "  HTTP through the router   {}/{} 200",
        routed.ok, routed.sent
    );
}

/// The summary's lines on what BMM provisioned and what ntc deployed through the preparer,
/// shared with `cargo xtask demo --kubernetes`.
pub fn print_topology_summary(provisioned: &bmm::Provisioned, deployed: &tko::Deployed) {
    println!(
        "  clusters Ready            {}/{} ({} bare-metal instances Ready)",
        provisioned.clusters_ready,
        bmm::CLUSTERS.len(),
        provisioned.machines_ready
    );
    println!(
        "  child deployments         {} ({})",
        deployed.children.len(),
        deployed
            .children
            .iter()
            .map(|c| format!("{}@{}", c.nf_type, c.site))
            .collect::<Vec<_>>()
            .join(", ")
    );
    println!(
        "  SMF approved after UPFs   {}",
        if deployed.smf_after_upfs { "yes" } else { "no" }
    );
    println!(
        "  NFDeployedTopology        {} instances, {} connectivities",
        deployed.deployed_instances, deployed.connectivities
    );
}

fn print_pokes(lab: &Lab, outcome: &Outcome) {
    let bin = lab.binary("");
    let d = &outcome.deployed;
    println!();
    println!("Everything keeps running until Ctrl-C. Try:");
    println!("  export PATH={}:$PATH", bin.display());
    println!(
        "  PREPARER_SERVER=http://{} preparer deployment list --parent {}",
        d.preparer, d.parent
    );
    println!(
        "  nimbess-agent --socket {} ports",
        lab.dir().join("nimbess/agent.sock").display()
    );
    println!(
        "  kuryr-l7 rules --source dir:{}",
        lab.dir().join("l7").display()
    );
    println!(
        "  curl -H 'Host: mgmt.free5gc.demo' http://{}/{}/",
        outcome.routed.router,
        outcome
            .pods
            .pods
            .first()
            .map_or("smf-regional", |p| p.deployed.as_str())
    );
    println!("  curl http://{}/metrics | head", outcome.provisioned.sim);
    println!("  logs: {}/logs", lab.dir().display());
    println!(
        "  (ntc serves its plugin on {}; the rules service is on {})",
        d.ntc, outcome.routed.controller
    );
}
