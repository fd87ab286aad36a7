//! `cargo xtask images` as an operator runs it: every daemon's image builds with podman from
//! scratch and answers `--version` inside a container.
//!
//! The test uses the binaries the workspace's test build put in `target/debug` (`--dev
//! --no-build`), so it builds nothing with another feature set. Podman needs root here (CI has
//! it); without root, podman or the binaries, it says it is skipped (a failure under
//! `CI=true`).

use std::path::{Path, PathBuf};
use std::process::Command;

const IMAGES: &[(&str, &[&str])] = &[
    ("preparer", &["preparer"]),
    ("ntc", &["ntc"]),
    ("nimbess-agent", &["nimbess-agent", "nimbess-cni"]),
    ("kuryr-l7", &["kuryr-l7"]),
    ("bmm-provider", &["bmm-provider"]),
    ("bmm-sim", &["bmm-sim"]),
];

fn target_dir() -> PathBuf {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    std::env::var_os("CARGO_TARGET_DIR").map_or_else(|| root.join("target"), PathBuf::from)
}

/// `Some(reason)` when the test cannot run here.
fn missing_prerequisite() -> Option<String> {
    if !nephrite_test_services::running_as_root() {
        return Some("podman builds images as root here; not running as root".to_owned());
    }
    if nephrite_test_services::program("podman", "podman").is_err() {
        return Some("podman is not installed (cargo xtask packages installs it)".to_owned());
    }
    let missing: Vec<&str> = IMAGES
        .iter()
        .flat_map(|(_, binaries)| binaries.iter().copied())
        .filter(|binary| !target_dir().join("debug").join(binary).is_file())
        .collect();
    (!missing.is_empty()).then(|| {
        format!(
            "the binaries {missing:?} are not built in {}/debug (cargo xtask test builds them)",
            target_dir().display()
        )
    })
}

fn podman(args: &[&str]) -> std::process::Output {
    Command::new("podman")
        .args(args)
        .output()
        .expect("running podman")
}

#[test]
fn every_daemon_image_builds_from_scratch_and_answers_its_version() {
    if let Some(why) = missing_prerequisite() {
        if std::env::var("CI").is_ok_and(|ci| ci == "true") {
            panic!("{why}");
        }
        eprintln!("SKIPPED: {why}");
        return;
    }
    let output = Command::new(env!("CARGO_BIN_EXE_xtask"))
        .args(["images", "--dev", "--no-build"])
        .output()
        .expect("running xtask images");
    let said = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "xtask images failed:\n{said}");
    let version = env!("CARGO_PKG_VERSION");
    for (image, binaries) in IMAGES {
        let tag = format!("nephrite/{image}:{version}");
        assert!(
            said.contains(&format!("{tag}: {} {version}", binaries[0])),
            "no --version line for {tag}:\n{said}"
        );
        // Built from scratch: the image holds the task's root file system and nothing else —
        // one layer, the binaries as its entry point.
        let inspect = podman(&[
            "image",
            "inspect",
            "--format",
            "{{len .RootFS.Layers}} {{json .Config.Entrypoint}}",
            &tag,
        ]);
        let text = String::from_utf8_lossy(&inspect.stdout);
        assert_eq!(
            text.trim(),
            format!("1 [\"/usr/local/bin/{}\"]", binaries[0]),
            "{tag}"
        );
    }
    // The CNI binary ships in the agent's image, where the DaemonSet's init container copies it
    // from with the image's own shell; no `nft` does (the agent speaks nf_tables over netlink).
    let cni = podman(&[
        "run",
        "--rm",
        "--network",
        "none",
        "--ulimit",
        "nofile=1024:1024",
        "--ulimit",
        "nproc=1024:1024",
        "--entrypoint",
        "/bin/sh",
        &format!("nephrite/nimbess-agent:{version}"),
        "-c",
        "test -x /usr/local/bin/nimbess-cni && /usr/local/bin/nimbess-cni --version && ! test -e /usr/sbin/nft",
    ]);
    assert!(
        cni.status.success(),
        "nimbess-cni, and no nft, in the agent's image: {}{}",
        String::from_utf8_lossy(&cni.stdout),
        String::from_utf8_lossy(&cni.stderr)
    );
}
