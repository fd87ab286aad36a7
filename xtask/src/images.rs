//! `cargo xtask images`: an OCI image per daemon, built with podman and no registry.
//!
//! Each image starts `FROM scratch`: the build assembles a root file system under
//! `target/images/<image>/rootfs` holding the daemon's binaries in `/usr/local/bin`, the shared
//! libraries they load (as `ldd` resolves them on this machine), the CA bundle and a `nobody`
//! user, then runs `podman build` with the daemon's `deploy/Containerfile` on that context. The
//! images are named `nephrite/<daemon>:<version>` in podman's default storage, which is what
//! the manifests reference. Each image is checked by running its `--version` with podman.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, bail};

use crate::{cargo_command, ensure_success, workspace_root};

/// One image: its name, the packages that build its binaries, the binaries (the first is the
/// entry point) and its Containerfile, relative to the workspace root.
struct Image {
    name: &'static str,
    packages: &'static [&'static str],
    binaries: &'static [&'static str],
    containerfile: &'static str,
    /// Shell tools (busybox from Debian's `busybox-static`: `sh`, `cp`, `test`) for images
    /// whose manifests run commands besides the daemon (nimbess-agent's CNI install step).
    shell: bool,
}

/// The shell tools of an image with `shell`, as links to busybox.
const SHELL_TOOLS: &[&str] = &["sh", "cp", "test", "cat", "ls"];

const IMAGES: &[Image] = &[
    Image {
        name: "preparer",
        packages: &["nephrite-preparer"],
        binaries: &["preparer"],
        containerfile: "preparer/deploy/Containerfile",
        shell: false,
    },
    Image {
        name: "ntc",
        packages: &["nephrite-ntc"],
        binaries: &["ntc"],
        containerfile: "topology/deploy/Containerfile",
        shell: false,
    },
    Image {
        name: "nimbess-agent",
        packages: &["nephrite-nimbess-agent", "nephrite-nimbess-cni"],
        binaries: &["nimbess-agent", "nimbess-cni"],
        containerfile: "nimbess-agent/deploy/Containerfile",
        shell: true,
    },
    Image {
        name: "kuryr-l7",
        packages: &["nephrite-kuryr-l7"],
        binaries: &["kuryr-l7"],
        containerfile: "kuryr-l7/deploy/Containerfile",
        shell: false,
    },
    Image {
        name: "bmm-provider",
        packages: &["nephrite-bmm-provider"],
        binaries: &["bmm-provider"],
        containerfile: "bmm-provider/deploy/Containerfile",
        shell: false,
    },
    Image {
        name: "bmm-sim",
        packages: &["nephrite-bmm-sim"],
        binaries: &["bmm-sim"],
        containerfile: "bmm-provider/sim/deploy/Containerfile",
        shell: false,
    },
];

/// Podman's default open-files and processes limits (1048576) are above what this machine's
/// container runtime may set: every run states its own.
const ULIMITS: &[&str] = &[
    "--ulimit",
    "nofile=1024:1024",
    "--ulimit",
    "nproc=1024:1024",
];

/// What `cargo xtask images` was asked for.
pub struct Options {
    /// `release` (the default) or `dev`.
    pub profile: String,
    /// Use the binaries already in `target/<profile dir>` instead of building them.
    pub build: bool,
}

impl Options {
    /// `[--dev] [--no-build]`.
    pub fn parse(args: &[String]) -> anyhow::Result<Self> {
        let mut options = Options {
            profile: "release".to_owned(),
            build: true,
        };
        for arg in args {
            match arg.as_str() {
                "--dev" => options.profile = "dev".to_owned(),
                "--no-build" => options.build = false,
                other => bail!("unknown images flag `{other}` (expected --dev or --no-build)"),
            }
        }
        Ok(options)
    }

    /// `target/release` or `target/debug`.
    fn binary_dir(&self) -> PathBuf {
        let profile_dir = if self.profile == "dev" {
            "debug"
        } else {
            &self.profile
        };
        target_dir().join(profile_dir)
    }
}

/// Builds (unless told not to) the daemons, then every image, then runs each one's
/// `--version`.
pub fn run(options: &Options) -> anyhow::Result<()> {
    let podman = which("podman").context(
        "podman is not installed (Debian: apt-get install podman runc; `cargo xtask packages` \
         installs it as root)",
    )?;
    if options.build {
        let mut command = cargo_command();
        command.args(["build", "--bins", "--profile", &options.profile]);
        for package in IMAGES.iter().flat_map(|image| image.packages) {
            command.args(["--package", package]);
        }
        let status = command
            .current_dir(workspace_root())
            .status()
            .context("running cargo build")?;
        ensure_success("cargo build of the daemons", status)?;
    }
    let version = env!("CARGO_PKG_VERSION");
    for image in IMAGES {
        let tag = format!("nephrite/{}:{version}", image.name);
        let context = target_dir().join("images").join(image.name);
        assemble(image, &options.binary_dir(), &context)
            .with_context(|| format!("assembling the root file system of {tag}"))?;
        let previous = image_id(&podman, &tag);
        // `--quiet` prints only the image id, which says nothing here: kept for failures.
        let built = Command::new(&podman)
            .args(["build", "--quiet", "--tag", &tag, "--file"])
            .arg(workspace_root().join(image.containerfile))
            .arg(&context)
            .output()
            .context("running podman build")?;
        if !built.status.success() {
            bail!(
                "podman build of {tag}: {}\n{}",
                built.status,
                String::from_utf8_lossy(&built.stderr).trim()
            );
        }
        // A rebuild moves the tag: the image it leaves behind is removed, not left to pile up.
        if let Some(previous) = previous
            && image_id(&podman, &tag).as_ref() != Some(&previous)
        {
            let _ = Command::new(&podman)
                .args(["image", "rm", &previous])
                .output();
        }
        let output = Command::new(&podman)
            .args(["run", "--rm", "--network", "none"])
            .args(ULIMITS)
            .args([&tag, "--version"])
            .output()
            .context("running podman run")?;
        let said = String::from_utf8_lossy(&output.stdout);
        let expected = format!("{} {version}", image.binaries[0]);
        if !output.status.success() || !said.contains(&expected) {
            bail!(
                "{tag} --version answered {:?} ({}; stderr: {}), expected {expected:?}",
                said.trim(),
                output.status,
                String::from_utf8_lossy(&output.stderr).trim()
            );
        }
        eprintln!("xtask: {tag}: {}", said.trim());
    }
    Ok(())
}

/// The id of the image `tag` names, if there is one.
fn image_id(podman: &Path, tag: &str) -> Option<String> {
    let output = Command::new(podman)
        .args(["image", "inspect", "--format", "{{.Id}}", tag])
        .output()
        .ok()?;
    let id = String::from_utf8_lossy(&output.stdout).trim().to_owned();
    (output.status.success() && !id.is_empty()).then_some(id)
}

/// The image's context: `rootfs/` with the binaries, their libraries, the CA bundle and
/// `/etc/passwd`, replacing what an earlier build left.
fn assemble(image: &Image, binary_dir: &Path, context: &Path) -> anyhow::Result<()> {
    if context.exists() {
        std::fs::remove_dir_all(context)
            .with_context(|| format!("removing {}", context.display()))?;
    }
    let rootfs = context.join("rootfs");
    let bin = rootfs.join("usr/local/bin");
    std::fs::create_dir_all(&bin)?;
    std::fs::create_dir_all(rootfs.join("tmp"))?;
    for binary in image.binaries {
        let source = binary_dir.join(binary);
        if !source.is_file() {
            bail!(
                "{} is not built (run without --no-build, or build the packages {})",
                source.display(),
                image.packages.join(", ")
            );
        }
        copy(&source, &bin.join(binary))?;
        for library in shared_libraries(&source)? {
            let inside = rootfs.join(library.strip_prefix("/").unwrap_or(&library));
            if !inside.exists() {
                copy(&library, &inside)?;
            }
        }
    }
    if image.shell {
        let busybox = Path::new("/usr/bin/busybox");
        if !busybox.is_file() {
            bail!("/usr/bin/busybox is missing (Debian: apt-get install busybox-static)");
        }
        copy(busybox, &rootfs.join("bin/busybox"))?;
        for tool in SHELL_TOOLS {
            std::os::unix::fs::symlink("busybox", rootfs.join("bin").join(tool))?;
        }
    }
    let bundle = Path::new("/etc/ssl/certs/ca-certificates.crt");
    if bundle.is_file() {
        copy(bundle, &rootfs.join("etc/ssl/certs/ca-certificates.crt"))?;
    }
    std::fs::create_dir_all(rootfs.join("etc"))?;
    std::fs::write(
        rootfs.join("etc/passwd"),
        "root:x:0:0:root:/:/sbin/nologin\nnobody:x:65534:65534:nobody:/:/sbin/nologin\n",
    )?;
    std::fs::write(rootfs.join("etc/group"), "root:x:0:\nnogroup:x:65534:\n")?;
    Ok(())
}

/// The absolute paths of the shared libraries `binary` loads (and its dynamic loader), from
/// `ldd`.
fn shared_libraries(binary: &Path) -> anyhow::Result<Vec<PathBuf>> {
    let output = Command::new("ldd")
        .arg(binary)
        .output()
        .context("running ldd (Debian: libc-bin)")?;
    let text = String::from_utf8_lossy(&output.stdout);
    if !output.status.success() {
        // A static binary: ldd says "not a dynamic executable" and fails.
        return Ok(Vec::new());
    }
    Ok(parse_ldd(&text))
}

/// `libc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x…)` and `/lib64/ld-linux-x86-64.so.2
/// (0x…)` lines → their paths; the vDSO (no file) is left out.
fn parse_ldd(text: &str) -> Vec<PathBuf> {
    text.lines()
        .filter_map(|line| {
            let path = match line.split_once("=>") {
                Some((_, right)) => right.split_whitespace().next()?,
                None => line.split_whitespace().next()?,
            };
            path.starts_with('/').then(|| PathBuf::from(path))
        })
        .collect()
}

/// Copies `from` (following links) to `to`, creating `to`'s directory.
fn copy(from: &Path, to: &Path) -> anyhow::Result<()> {
    if let Some(parent) = to.parent() {
        std::fs::create_dir_all(parent)?;
    }
    std::fs::copy(from, to)
        .with_context(|| format!("copying {} to {}", from.display(), to.display()))?;
    Ok(())
}

fn which(program: &str) -> Option<PathBuf> {
    std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|dir| dir.join(program))
            .find(|path| path.is_file())
    })
}

/// The workspace's target directory (`CARGO_TARGET_DIR` when set).
fn target_dir() -> PathBuf {
    match std::env::var_os("CARGO_TARGET_DIR").filter(|dir| !dir.is_empty()) {
        Some(dir) => workspace_root().join(dir),
        None => workspace_root().join("target"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ldd_output_gives_the_library_paths_and_the_loader() {
        let text = "\tlinux-vdso.so.1 (0x00007ffd)\n\
                    \tlibgcc_s.so.1 => /lib/x86_64-linux-gnu/libgcc_s.so.1 (0x00007f05)\n\
                    \tlibc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x00007f05)\n\
                    \t/lib64/ld-linux-x86-64.so.2 (0x00007f05)\n";
        assert_eq!(
            parse_ldd(text),
            [
                "/lib/x86_64-linux-gnu/libgcc_s.so.1",
                "/lib/x86_64-linux-gnu/libc.so.6",
                "/lib64/ld-linux-x86-64.so.2"
            ]
            .map(PathBuf::from)
        );
    }

    #[test]
    fn every_image_has_its_containerfile_with_its_entry_point() {
        for image in IMAGES {
            let path = workspace_root().join(image.containerfile);
            let text = std::fs::read_to_string(&path)
                .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            let entry = format!("ENTRYPOINT [\"/usr/local/bin/{}\"]", image.binaries[0]);
            assert!(text.contains(&entry), "{}: no {entry}", path.display());
            assert!(text.contains("FROM scratch"), "{}", path.display());
        }
    }

    #[test]
    fn flags_are_parsed_and_unknown_ones_refused() {
        let options = Options::parse(&["--dev".into(), "--no-build".into()]).unwrap();
        assert_eq!(options.profile, "dev");
        assert!(!options.build);
        assert!(options.binary_dir().ends_with("debug"));
        let err = Options::parse(&["--fast".into()]).err().unwrap();
        assert!(err.to_string().contains("--fast"), "{err}");
    }
}
