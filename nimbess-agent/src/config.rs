//! The agent's config file (YAML): the driver and the networks.

use std::path::Path;

use nephrite_pipeline::{Masquerade, NetworkSpec};
use serde::{Deserialize, Serialize};

/// Which data plane renders the pipelines.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum DriverKind {
    /// Linux kernel: veth pairs, bridges without learning or flooding, static FDB entries.
    Kernel,
    /// In-process simulation on synthetic frames.
    Sim,
}

/// The config file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AgentConfig {
    /// The driver (the `--driver` flag overrides it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub driver: Option<DriverKind>,
    /// The networks the agent serves.
    #[serde(default)]
    pub networks: Vec<NetworkSpec>,
    /// Masquerade of pod traffic leaving the pod networks (kernel driver):
    /// on unless `enabled: false`; `except` lists destinations reached
    /// with the pods' own addresses.
    #[serde(default)]
    pub masquerade: Masquerade,
}

/// Why the config could not be used.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file could not be read.
    #[error("cannot read config {path}: {source}")]
    Read {
        /// The file.
        path: String,
        /// The OS error.
        source: std::io::Error,
    },
    /// The file is not a valid config.
    #[error("invalid config {path}: {source}")]
    Parse {
        /// The file.
        path: String,
        /// What the parser said.
        source: serde_norway::Error,
    },
    /// A network is invalid.
    #[error("invalid config {path}: {source}")]
    Network {
        /// The file.
        path: String,
        /// The model's verdict.
        source: nephrite_pipeline::Error,
    },
}

impl AgentConfig {
    /// Parse YAML text; `origin` names the file in errors.
    ///
    /// # Errors
    /// Bad YAML, unknown keys, invalid networks.
    pub fn parse(text: &str, origin: &str) -> Result<Self, ConfigError> {
        let config: AgentConfig =
            serde_norway::from_str(text).map_err(|source| ConfigError::Parse {
                path: origin.to_string(),
                source,
            })?;
        for spec in &config.networks {
            spec.validate().map_err(|source| ConfigError::Network {
                path: origin.to_string(),
                source,
            })?;
        }
        Ok(config)
    }

    /// Read and parse a file.
    ///
    /// # Errors
    /// As [`AgentConfig::parse`], or the file cannot be read.
    pub fn load(path: &Path) -> Result<Self, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            path: path.display().to_string(),
            source,
        })?;
        Self::parse(&text, &path.display().to_string())
    }
}
