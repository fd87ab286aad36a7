//! The cluster's own images, without a registry: `nephrite/pause` (containerd's sandbox
//! image) and `nephrite/echo`, from the workspace's `nephrite-echo` crate.
//!
//! Both binaries are linked statically (`-C target-feature=+crt-static`, glibc's static
//! libraries from Debian's libc6-dev), in a target directory of their own so the flag never
//! invalidates the workspace's build, so each image is `FROM scratch` plus one file. podman
//! builds it and saves it as an OCI archive (`DIR/images/`), which `ctr images import` loads
//! into containerd's `k8s.io` namespace under the full name the pods use; podman's copy is
//! removed again. Pods reference them with `imagePullPolicy: Never`.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::Context;

use super::config::IMAGE_VERSION;
use super::runtime::ctr;

/// The Rust target the static binaries are built for (the host's).
const TARGET: &str = "x86_64-unknown-linux-gnu";

/// One image: its repository (`nephrite/<name>`) and the binary that is its entry point.
struct Image {
    name: &'static str,
    binary: &'static str,
}

const IMAGES: &[Image] = &[
    Image {
        name: "pause",
        binary: "nephrite-pause",
    },
    Image {
        name: "echo",
        binary: "nephrite-echo",
    },
];

/// The Containerfile of an image whose entry point is `binary`.
pub fn containerfile(binary: &str) -> String {
    format!("FROM scratch\nCOPY {binary} /{binary}\nUSER 65534:65534\nENTRYPOINT [\"/{binary}\"]\n")
}

/// The full name containerd keeps an image under: `docker.io/nephrite/<name>:<version>`.
pub fn full_name(name: &str) -> String {
    format!("docker.io/nephrite/{name}:{IMAGE_VERSION}")
}

/// Build both binaries statically; the directory holding them.
fn build_static() -> anyhow::Result<PathBuf> {
    let root = crate::workspace_root();
    let target_dir = match std::env::var_os("CARGO_TARGET_DIR").filter(|d| !d.is_empty()) {
        Some(dir) => root.join(dir),
        None => root.join("target"),
    }
    .join("cluster-images");
    let status = crate::cargo_command()
        .args([
            "build",
            "--release",
            "-p",
            "nephrite-echo",
            "--target",
            TARGET,
        ])
        .arg("--target-dir")
        .arg(&target_dir)
        .env("RUSTFLAGS", "-C target-feature=+crt-static")
        .current_dir(&root)
        .status()
        .context("running cargo build -p nephrite-echo")?;
    crate::ensure_success("cargo build -p nephrite-echo (static)", status)?;
    Ok(target_dir.join(TARGET).join("release"))
}

/// Build the images and import them into the cluster's containerd.
pub fn import(dir: &Path) -> anyhow::Result<Vec<String>> {
    let binaries = build_static()?;
    let images = dir.join("images");
    let mut imported = Vec::new();
    for image in IMAGES {
        let context = images.join(image.name);
        std::fs::create_dir_all(&context)
            .with_context(|| format!("creating {}", context.display()))?;
        std::fs::copy(binaries.join(image.binary), context.join(image.binary))
            .with_context(|| format!("copying {} into the image", image.binary))?;
        std::fs::write(context.join("Containerfile"), containerfile(image.binary))
            .with_context(|| format!("writing {}'s Containerfile", image.name))?;
        let name = full_name(image.name);
        run(
            Command::new("podman")
                .args(["build", "--quiet", "--tag", &name, "--file"])
                .arg(context.join("Containerfile"))
                .arg(&context),
            &format!("podman build {name}"),
        )?;
        let archive = images.join(format!("{}.oci.tar", image.name));
        let saved = run(
            Command::new("podman")
                .args(["save", "--format", "oci-archive", "--output"])
                .arg(&archive)
                .arg(&name),
            &format!("podman save {name}"),
        );
        let _ = Command::new("podman")
            .args(["rmi", "--force", &name])
            .output();
        saved?;
        run(
            ctr(dir)
                .args(["images", "import", "--base-name"])
                .arg(format!("docker.io/nephrite/{}", image.name))
                .arg(&archive),
            &format!("ctr images import {}", archive.display()),
        )?;
        let listed = ctr(dir)
            .args(["images", "ls", "--quiet"])
            .output()
            .context("running ctr images ls")?;
        anyhow::ensure!(
            String::from_utf8_lossy(&listed.stdout)
                .lines()
                .any(|line| line == name),
            "ctr imported {} but containerd does not list {name}: {}",
            archive.display(),
            String::from_utf8_lossy(&listed.stdout)
        );
        imported.push(name);
    }
    Ok(imported)
}

/// Run `command`, failing with its output.
fn run(command: &mut Command, what: &str) -> anyhow::Result<()> {
    let output = command
        .output()
        .with_context(|| format!("running {what}"))?;
    if !output.status.success() {
        anyhow::bail!(
            "{what} failed ({}): {}{}",
            output.status,
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
    }
    Ok(())
}
