//! `bmm-provider ccm`: the flags of the cloud-controller-manager's node controllers for a
//! workload cluster, and the assembly of their configuration: the BMM credentials from a
//! Secret or from `--endpoint`/`--org`/`--token-file`, and the `--zone` map.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use super::controller_flags::{RoleFlags, kube_client};
use crate::client::{ClientConfig, Token};
use crate::controller::{ControllerConfig, NodeCredentials, Role};
use crate::metrics::ProviderMetrics;

/// `bmm-provider ccm` flags.
#[derive(clap::Args)]
pub struct CcmCommand {
    /// The workload cluster's kubeconfig (in-cluster service account when absent).
    #[arg(long, env = "KUBECONFIG")]
    pub kubeconfig: Option<PathBuf>,
    /// The credentials Secret (`namespace/name`, keys `endpoint`, `orgName`, `token`);
    /// or give --endpoint, --org and --token-file.
    #[arg(long, env = "BMM_CREDENTIALS", conflicts_with_all = ["endpoint", "org", "token_file"])]
    pub credentials: Option<String>,
    /// The BMM API server root (`https://host[:port]`).
    #[arg(long, env = "BMM_ENDPOINT", requires_all = ["org", "token_file"])]
    pub endpoint: Option<String>,
    /// The org.
    #[arg(long, env = "BMM_ORG")]
    pub org: Option<String>,
    /// A file holding the bearer token (re-read when it changes).
    #[arg(long, env = "BMM_TOKEN_FILE")]
    pub token_file: Option<PathBuf>,
    /// `SITE=ZONE`: the `topology.kubernetes.io/zone` of Nodes in the site named SITE
    /// (repeat, or comma-separate); a site without one has its name as zone.
    #[arg(long = "zone", env = "BMM_ZONES", value_delimiter = ',')]
    pub zones: Vec<String>,
    /// Re-check of initialized Nodes (power state, deletion of their instance).
    #[arg(long, env = "BMM_NODE_RESYNC", default_value = "1m", value_parser = humantime::parse_duration)]
    pub resync: Duration,
    /// Re-check of Nodes whose instance is not complete yet (no addresses, no match).
    #[arg(long, env = "BMM_NODE_PENDING_POLL", default_value = "10s", value_parser = humantime::parse_duration)]
    pub pending_poll: Duration,
    /// Per-request timeout of the BMM client.
    #[arg(long, env = "BMM_REQUEST_TIMEOUT", default_value = "30s", value_parser = humantime::parse_duration)]
    pub request_timeout: Duration,
    /// Backoff, leader election and the daemon server.
    #[command(flatten)]
    pub role: RoleFlags,
}

impl CcmCommand {
    /// The node controllers' configuration: refused when neither a credentials Secret nor an
    /// endpoint, org and token file are given, or a `--zone` is not `SITE=ZONE`.
    pub fn config(&self) -> anyhow::Result<ControllerConfig> {
        let zones = parse_zones(&self.zones)?;
        let metrics = ProviderMetrics::default();
        let node_credentials = match (&self.endpoint, &self.org, &self.token_file) {
            (Some(endpoint), Some(org), Some(token_file)) => {
                let mut client = ClientConfig::new(endpoint, org, Token::new(""));
                client.timeout = self.request_timeout;
                Some(NodeCredentials::token_file(
                    client,
                    token_file.clone(),
                    Some(metrics.clone()),
                )?)
            }
            _ => None,
        };
        anyhow::ensure!(
            node_credentials.is_some() || self.credentials.is_some(),
            "give --credentials NAMESPACE/NAME or --endpoint, --org and --token-file"
        );
        Ok(ControllerConfig {
            default_credentials: self.credentials.clone(),
            node_credentials,
            zones,
            resync: self.resync,
            dependency_poll: self.pending_poll,
            request_timeout: self.request_timeout,
            metrics,
            ..self.role.backoff.config()
        })
    }

    /// Serves the node controllers against the workload cluster (on the Lease
    /// `bmm-cloud-controller-manager` unless told otherwise) until SIGTERM or SIGINT.
    pub async fn run(self) -> anyhow::Result<()> {
        let config = self.config()?;
        let client = kube_client(self.kubeconfig.as_deref()).await?;
        self.role
            .run(
                client,
                config,
                Role::CloudControllerManager,
                "bmm-cloud-controller-manager",
            )
            .await
    }
}

/// The `--zone SITE=ZONE` values as a map; empty entries (an empty `BMM_ZONES`) are skipped.
pub fn parse_zones(values: &[String]) -> anyhow::Result<BTreeMap<String, String>> {
    values
        .iter()
        .map(|v| v.trim())
        .filter(|v| !v.is_empty())
        .map(|text| match text.split_once('=') {
            Some((site, zone)) if !site.trim().is_empty() && !zone.trim().is_empty() => {
                Ok((site.trim().to_string(), zone.trim().to_string()))
            }
            _ => Err(anyhow::anyhow!("--zone {text:?} is not SITE=ZONE")),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zones_are_site_equals_zone_and_empty_entries_are_skipped() {
        let zones = parse_zones(&[" a = z1 ".into(), String::new(), "b=z2".into()]).unwrap();
        assert_eq!(
            zones.into_iter().collect::<Vec<_>>(),
            [("a".into(), "z1".into()), ("b".into(), "z2".into())]
        );
    }

    #[test]
    fn a_zone_without_site_or_zone_is_refused_naming_it() {
        for bad in ["a", "=z", "a=", " = "] {
            let err = parse_zones(&[bad.to_string()]).unwrap_err().to_string();
            assert!(err.contains(&format!("{:?}", bad.trim())), "{bad}: {err}");
        }
    }
}
