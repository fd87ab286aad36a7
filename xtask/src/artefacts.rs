//! Generated artefacts users install: the CRDs of every Kubernetes-mode daemon and
//! bmm-provider's clusterctl provider repository. Each comes from the daemon's own binary, so
//! what `cargo xtask` writes is exactly what the daemon serves against.

use std::path::Path;

use anyhow::{Context, bail};

/// Daemons with a `crds` subcommand: (package, binary, the checked-in copy under the
/// workspace that a test keeps current, if any).
const CRD_SOURCES: &[(&str, &str, Option<&str>)] = &[
    ("nephrite-ntc", "ntc", Some("topology/deploy/crds.yaml")),
    ("nephrite-bmm-provider", "bmm-provider", None),
];

/// Writes `<binary>.yaml` with each daemon's CRDs into `out`, and refreshes the checked-in
/// copies (`CRD_SOURCES`).
pub fn crds(out: &Path) -> anyhow::Result<()> {
    std::fs::create_dir_all(out).with_context(|| format!("creating {}", out.display()))?;
    for (package, binary, checked_in) in CRD_SOURCES {
        let yaml = run_binary(package, binary, &["crds"])?;
        let file = out.join(format!("{binary}.yaml"));
        std::fs::write(&file, &yaml).with_context(|| format!("writing {}", file.display()))?;
        eprintln!("xtask: wrote {}", file.display());
        if let Some(checked_in) = checked_in {
            let file = crate::workspace_root().join(checked_in);
            let mut text = format!(
                "# The CRDs as `{binary} crds` prints them (written by `cargo xtask crds`; a test\n\
                 # fails when this file and the binary disagree).\n"
            );
            text.push_str(&String::from_utf8_lossy(&yaml));
            std::fs::write(&file, text).with_context(|| format!("writing {}", file.display()))?;
            eprintln!("xtask: wrote {}", file.display());
        }
    }
    Ok(())
}

/// Writes bmm-provider's clusterctl repository (`metadata.yaml`,
/// `infrastructure-components.yaml`, `cluster-template.yaml`) into `out`.
pub fn clusterctl(out: &Path) -> anyhow::Result<()> {
    let out = out
        .to_str()
        .with_context(|| format!("{} is not UTF-8", out.display()))?;
    let printed = run_binary(
        "nephrite-bmm-provider",
        "bmm-provider",
        &["clusterctl", "--out", out],
    )?;
    eprint!("{}", String::from_utf8_lossy(&printed));
    Ok(())
}

/// `cargo run` of one binary, returning its standard output.
fn run_binary(package: &str, binary: &str, args: &[&str]) -> anyhow::Result<Vec<u8>> {
    let output = crate::cargo_command()
        .args([
            "run",
            "--quiet",
            "--package",
            package,
            "--bin",
            binary,
            "--",
        ])
        .args(args)
        .current_dir(crate::workspace_root())
        .stderr(std::process::Stdio::inherit())
        .output()
        .with_context(|| format!("running {binary} {}", args.join(" ")))?;
    if !output.status.success() {
        bail!("{binary} {} failed ({})", args.join(" "), output.status);
    }
    Ok(output.stdout)
}
