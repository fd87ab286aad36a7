//! `bmm-provider apply`, `status` and `delete`: standalone mode's flags, which connection and
//! state file they use, and what they print. The work is [`crate::standalone`]'s; registering
//! the clusters as the preparer's Sites is [`crate::sites`]'.

use std::path::PathBuf;
use std::time::Duration;

use clap::ValueEnum;

use super::emit;
use crate::standalone::{self, Pace, State};

/// Which BMM API, and the state file that remembers it.
#[derive(clap::Args)]
pub struct Connection {
    /// The BMM API server root (`https://host[:port]`).
    #[arg(long, env = "BMM_ENDPOINT")]
    pub endpoint: Option<String>,
    /// The org.
    #[arg(long, env = "BMM_ORG")]
    pub org: Option<String>,
    /// A file holding the bearer token (its path is recorded, never the token).
    #[arg(long, env = "BMM_TOKEN_FILE")]
    pub token_file: Option<PathBuf>,
    /// The state file.
    #[arg(long, env = "BMM_STATE", default_value = "bmm-provider-state.json")]
    pub state: PathBuf,
    /// Per-request timeout.
    #[arg(long, env = "BMM_REQUEST_TIMEOUT", default_value = "30s", value_parser = humantime::parse_duration)]
    pub request_timeout: Duration,
}

impl Connection {
    /// The state file (when it exists) with the flags overriding what it records; refused
    /// when neither gives the endpoint, the org or the token file.
    pub fn state(&self) -> anyhow::Result<State> {
        let mut state = if self.state.exists() {
            State::load(&self.state)?
        } else {
            State {
                endpoint: String::new(),
                org: String::new(),
                token_file: PathBuf::new(),
                clusters: vec![],
                machines: vec![],
            }
        };
        if let Some(e) = &self.endpoint {
            state.endpoint = e.clone();
        }
        if let Some(o) = &self.org {
            state.org = o.clone();
        }
        if let Some(t) = &self.token_file {
            state.token_file = t.clone();
        }
        let missing = if state.endpoint.is_empty() {
            Some("--endpoint")
        } else if state.org.is_empty() {
            Some("--org")
        } else if state.token_file.as_os_str().is_empty() {
            Some("--token-file")
        } else {
            None
        };
        if let Some(flag) = missing {
            anyhow::bail!(
                "{flag} is required (no state file {} records one)",
                self.state.display()
            );
        }
        Ok(state)
    }
}

/// How fast to poll and how long to wait.
#[derive(clap::Args)]
pub struct PaceFlags {
    /// Time between polls while something is provisioning.
    #[arg(long, env = "BMM_POLL_INTERVAL", default_value = "10s", value_parser = humantime::parse_duration)]
    pub poll_interval: Duration,
    /// Give up after this long.
    #[arg(long, env = "BMM_TIMEOUT", default_value = "45m", value_parser = humantime::parse_duration)]
    pub timeout: Duration,
}

impl PaceFlags {
    fn pace(&self) -> Pace {
        Pace {
            poll: self.poll_interval,
            timeout: self.timeout,
        }
    }
}

/// Where and how `apply` registers the provisioned clusters as the preparer's Sites.
#[derive(clap::Args)]
pub struct SiteFlags {
    /// Once every machine is Ready, register each cluster of the state with the preparer's
    /// Data API at this URL as a Site (id: the cluster's name; metadata: its labels and BMM
    /// site).
    #[arg(long, env = "BMM_REGISTER_SITES", value_name = "URL")]
    pub register_sites: Option<String>,
    /// Trust this PEM CA for the preparer's certificate (dials it with TLS).
    #[arg(
        long,
        env = "BMM_PREPARER_CA",
        value_name = "PEM",
        requires = "register_sites"
    )]
    pub preparer_ca: Option<PathBuf>,
    /// Present this PEM client certificate to the preparer (needs --preparer-key and
    /// --preparer-ca).
    #[arg(long, env = "BMM_PREPARER_CERT", value_name = "PEM", requires_all = ["preparer_key", "preparer_ca"])]
    pub preparer_cert: Option<PathBuf>,
    /// The PEM private key of --preparer-cert.
    #[arg(
        long,
        env = "BMM_PREPARER_KEY",
        value_name = "PEM",
        requires = "preparer_cert"
    )]
    pub preparer_key: Option<PathBuf>,
    /// Send the preparer the bearer token in this file.
    #[arg(
        long,
        env = "BMM_PREPARER_TOKEN_FILE",
        value_name = "FILE",
        requires = "register_sites"
    )]
    pub preparer_token_file: Option<PathBuf>,
}

impl SiteFlags {
    /// The credentials to dial the preparer with.
    pub fn credentials(&self) -> nephrite_runtime::ClientArgs {
        nephrite_runtime::ClientArgs {
            ca: self.preparer_ca.clone(),
            cert: self.preparer_cert.clone(),
            key: self.preparer_key.clone(),
            token_file: self.preparer_token_file.clone(),
            tls_domain: None,
        }
    }
}

/// `bmm-provider apply` flags.
#[derive(clap::Args)]
pub struct ApplyCommand {
    /// The multi-document YAML file.
    #[arg(short = 'f', long = "filename", env = "BMM_FILE")]
    pub file: PathBuf,
    /// Which API and state file.
    #[command(flatten)]
    pub connection: Connection,
    /// Polling and patience.
    #[command(flatten)]
    pub pace: PaceFlags,
    /// Site registration.
    #[command(flatten)]
    pub sites: SiteFlags,
}

impl ApplyCommand {
    /// Provisions what the file describes, prints the state as a table and, when asked,
    /// registers the clusters as Sites.
    pub async fn run(self) -> anyhow::Result<()> {
        let (clusters, machines) = standalone::read_documents(&self.file)?;
        let mut state = self.connection.state()?;
        standalone::merge_documents(&mut state, clusters, machines);
        let client = state.client(self.connection.request_timeout)?;
        let path = &self.connection.state;
        standalone::apply(&mut state, path, &client, self.pace.pace()).await?;
        emit(&standalone::status_table(&state))?;
        let Some(preparer) = &self.sites.register_sites else {
            return Ok(());
        };
        let credentials = self.sites.credentials();
        let registered =
            crate::sites::register_sites(preparer, &credentials, &state.clusters).await?;
        for r in registered {
            let what = if r.created { "registered" } else { "updated" };
            emit(&format!("site {} {what} at {preparer}\n", r.site))?;
        }
        Ok(())
    }
}

/// How `status` prints (no doc comments on the values: clap would list them in `--help`).
#[derive(Clone, Copy, ValueEnum)]
enum Output {
    Table,
    Json,
}

/// `bmm-provider status` flags.
#[derive(clap::Args)]
pub struct StatusCommand {
    /// Which API and state file.
    #[command(flatten)]
    pub connection: Connection,
    /// Output format.
    #[arg(short = 'o', long, env = "BMM_OUTPUT", value_enum, default_value_t = Output::Table)]
    output: Output,
}

impl StatusCommand {
    /// Prints what the state file records.
    pub fn run(self) -> anyhow::Result<()> {
        let state = self.connection.state()?;
        match self.output {
            Output::Table => emit(&standalone::status_table(&state)),
            Output::Json => emit(&format!("{}\n", serde_json::to_string_pretty(&state)?)),
        }
    }
}

/// `bmm-provider delete` flags.
#[derive(clap::Args)]
pub struct DeleteCommand {
    /// Which API and state file.
    #[command(flatten)]
    pub connection: Connection,
    /// Polling and patience.
    #[command(flatten)]
    pub pace: PaceFlags,
}

impl DeleteCommand {
    /// Deletes everything the state records and waits until it is gone.
    pub async fn run(self) -> anyhow::Result<()> {
        let mut state = self.connection.state()?;
        let client = state.client(self.connection.request_timeout)?;
        standalone::delete(
            &mut state,
            &self.connection.state,
            &client,
            self.pace.pace(),
        )
        .await?;
        eprintln!("everything is deleted");
        Ok(())
    }
}
