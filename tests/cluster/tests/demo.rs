//! `cargo xtask demo --kubernetes` as a user runs it, as root: the whole path ends with its
//! summary (the NFs' Deployments ready with every interface, the SMF's ping to a UPF answered,
//! every NF reached through kuryr-l7), exit 0, and nothing left behind: no process that
//! inherited the demo's `TMPDIR`, no file in it, no bridge of its networks.
//!
//! It runs here, not in the main suite, because its cluster owns the host's nimbess tables and
//! a kubelet while it runs; this crate's tests run alone, after the rest (`cargo xtask test`).
//! The daemons are taken from `target/debug` (`--no-build`): the workspace's test build put
//! them there.

use std::path::Path;
use std::process::Command;

use nephrite_cluster_tests::cluster::{XTASK_ENV, workspace_root};

/// Processes that still carry `TMPDIR=<tmp>`, but this one.
fn processes_with(tmp: &Path) -> Vec<String> {
    let marker = format!("TMPDIR={}", tmp.display());
    let me = std::process::id();
    let mut left = Vec::new();
    for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        if pid == me {
            continue;
        }
        let environ = std::fs::read(entry.path().join("environ")).unwrap_or_default();
        let zombie = std::fs::read_to_string(entry.path().join("stat")).is_ok_and(|stat| {
            stat.rsplit(')')
                .next()
                .is_some_and(|s| s.trim_start().starts_with('Z'))
        });
        if !zombie
            && environ
                .split(|b| *b == 0)
                .any(|var| var == marker.as_bytes())
        {
            let cmdline = std::fs::read(entry.path().join("cmdline")).unwrap_or_default();
            left.push(format!(
                "process {pid}: {}",
                String::from_utf8_lossy(&cmdline).replace('\0', " ")
            ));
        }
    }
    left
}

#[test]
fn the_kubernetes_demo_walks_the_whole_path_and_leaves_nothing() {
    if !nephrite_cluster_tests::is_root() {
        eprintln!(
            "\nSKIPPED, NOT PASSED: `cargo xtask demo --kubernetes` starts a one-node cluster \
             and needs root; run `cargo xtask test` as root to run it\n"
        );
        return;
    }
    let tmp = tempfile::tempdir().expect("a temporary directory");
    let mut command = match std::env::var_os(XTASK_ENV).filter(|x| !x.is_empty()) {
        Some(xtask) => Command::new(xtask),
        None => {
            let mut command =
                Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()));
            command.args(["run", "--quiet", "--package", "xtask", "--"]);
            command
        }
    };
    let output = command
        .args(["demo", "--kubernetes", "--no-build"])
        .env("TMPDIR", tmp.path())
        .current_dir(workspace_root())
        .output()
        .expect("running xtask demo --kubernetes");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    let shown = format!("{stdout}\n--- stderr ---\n{stderr}");
    println!("{stdout}");
    assert!(
        output.status.success(),
        "the demo failed ({}):\n{shown}",
        output.status
    );
    for line in [
        "clusters Ready            3/3 (3 bare-metal instances Ready)",
        "SMF approved after UPFs   yes",
        "NFDeployedTopology        4 instances, 8 connectivities",
        "NF Deployments            4/4 ready, 14 interfaces on 7 Nimbess networks",
        "3 packets transmitted, 3 received, 0% packet loss",
        "HTTP through the router   8/8 200",
    ] {
        assert!(stdout.contains(line), "no {line:?} in:\n{shown}");
    }
    let mut left = processes_with(tmp.path());
    for entry in std::fs::read_dir(tmp.path())
        .into_iter()
        .flatten()
        .flatten()
    {
        left.push(format!("file {}", entry.path().display()));
    }
    // The bridges of the NF networks carry their gateways, 10.60.0.1 to 10.66.0.1.
    let addresses = Command::new("ip")
        .args(["-4", "-o", "addr", "show"])
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
        .unwrap_or_default();
    left.extend(
        addresses
            .lines()
            .filter(|l| (60..=66).any(|n| l.contains(&format!(" 10.{n}.0.1/"))))
            .map(|l| format!("link {l}")),
    );
    assert!(left.is_empty(), "the demo left {left:#?}\n{shown}");
}
