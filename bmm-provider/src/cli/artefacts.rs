//! `bmm-provider crds` and `bmm-provider clusterctl`: the artefacts an operator installs, written
//! out rather than served.

use std::path::PathBuf;

use super::emit;

/// `bmm-provider clusterctl` flags.
#[derive(clap::Args)]
pub struct ClusterctlCommand {
    /// The output directory.
    #[arg(long, env = "BMM_CLUSTERCTL_OUT")]
    pub out: PathBuf,
    /// The release the artefacts are for (its major.minor goes into metadata.yaml).
    #[arg(long, env = "BMM_CLUSTERCTL_VERSION", default_value = concat!("v", env!("CARGO_PKG_VERSION")))]
    pub version: String,
}

impl ClusterctlCommand {
    /// Writes the artefacts and prints the path of each file written.
    pub fn run(self) -> anyhow::Result<()> {
        for path in crate::clusterctl::write(&self.out, &self.version)? {
            emit(&format!("{}\n", path.display()))?;
        }
        Ok(())
    }
}

/// Prints the provider's CRDs as multi-document YAML.
pub fn print_crds() -> anyhow::Result<()> {
    for crd in nephrite_bmm::crd::all_crds() {
        emit(&format!(
            "---\n{}\n",
            serde_norway::to_string(&crd)?.trim_end()
        ))?;
    }
    Ok(())
}
