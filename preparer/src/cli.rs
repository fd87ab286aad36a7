//! The command line: `preparer serve` and the client subcommands (the same binary is the
//! daemon and its CLI; `--server` / `PREPARER_SERVER` picks the endpoint). People get tables,
//! scripts get JSON / YAML; logs go to stderr; a failing command exits non-zero with the
//! server's message.

use std::path::PathBuf;

use clap::{Parser, Subcommand, ValueEnum};

use crate::daemon::ServeCommand;

pub(crate) mod diff;
pub mod jsonpath;
mod output;
mod run;

pub use run::run;

/// The `preparer` command line.
#[derive(Debug, Parser)]
#[command(
    name = "preparer",
    version,
    about = "TKO-style deployment store, Data API and preparation loop"
)]
pub struct Cli {
    /// The Data API to talk to (client subcommands).
    #[arg(
        long,
        global = true,
        env = "PREPARER_SERVER",
        default_value = "http://127.0.0.1:50051"
    )]
    pub server: String,
    /// Credentials for the Data API (client subcommands; before the subcommand, or the
    /// environment variables).
    #[command(flatten, next_help_heading = "Credentials")]
    pub credentials: nephrite_runtime::ClientArgs,
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// Top-level subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Serve the Data API and run the preparation loop.
    Serve(Box<ServeCommand>),
    /// Templates.
    #[command(subcommand)]
    Template(CatalogCommand),
    /// Sites.
    #[command(subcommand)]
    Site(CatalogCommand),
    /// Preparation plugins.
    #[command(subcommand)]
    Plugin(PluginCommand),
    /// Deployments.
    #[command(subcommand)]
    Deployment(DeploymentCommand),
    /// The live terminal dashboard of the daemon at --server (q quits).
    Dashboard,
}

/// Output formats of listings (`-o`): `table`, `json`, `yaml`, `name` or `jsonpath=TEMPLATE`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ListFormat {
    /// Aligned columns for people, names before ids.
    Table,
    /// One JSON array.
    Json,
    /// A YAML list.
    Yaml,
    /// `KIND/ID`, one per line, as `kubectl get -o name`.
    Name,
    /// A kubectl-style JSONPath template over `{"kind": "List", "items": [...]}`.
    JsonPath(jsonpath::Template),
}

impl std::str::FromStr for ListFormat {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        match text {
            "table" => Ok(Self::Table),
            "json" => Ok(Self::Json),
            "yaml" => Ok(Self::Yaml),
            "name" => Ok(Self::Name),
            _ => match text.split_once('=') {
                Some(("jsonpath", template)) => template
                    .parse()
                    .map(Self::JsonPath)
                    .map_err(|error: jsonpath::TemplateError| error.to_string()),
                _ => Err(format!(
                    "{text:?} is not an output format: table, json, yaml, name or jsonpath=TEMPLATE"
                )),
            },
        }
    }
}

/// Output formats of `get`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum GetFormat {
    /// The package as `---`-separated KRM objects.
    Yaml,
    /// One JSON object with the row and the package's objects.
    Json,
}

/// What every listing with metadata takes: the metadata filter and the output format.
#[derive(Debug, clap::Args)]
pub struct Listing {
    /// Metadata k=PATTERN (repeatable).
    #[arg(long = "metadata", value_name = "K=PATTERN")]
    pub metadata: Vec<String>,
    /// Output format.
    #[arg(
        short = 'o',
        long = "output",
        default_value = "table",
        value_name = "FORMAT"
    )]
    pub output: ListFormat,
}

/// Template and site subcommands.
#[derive(Debug, Subcommand)]
pub enum CatalogCommand {
    /// Register (or replace) from a package file.
    Register {
        /// Id.
        id: String,
        /// The package, multi-document YAML.
        #[arg(short = 'f', long = "file")]
        file: PathBuf,
        /// Metadata k=v (repeatable), laid over the package's own.
        #[arg(long = "metadata", value_name = "K=V")]
        metadata: Vec<String>,
    },
    /// List.
    List {
        /// Id pattern (`*`, `**`; repeatable).
        #[arg(long = "id", value_name = "PATTERN")]
        ids: Vec<String>,
        /// Metadata filter and output format.
        #[command(flatten)]
        listing: Listing,
    },
    /// Show one.
    Get {
        /// Id.
        id: String,
        /// Output format.
        #[arg(short = 'o', long = "output", value_enum, default_value_t = GetFormat::Yaml)]
        output: GetFormat,
    },
    /// Delete one.
    Delete {
        /// Id.
        id: String,
    },
}

/// What a registered plugin does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum PluginKind {
    /// Prepares resources of its trigger types.
    Prepare,
    /// Validates prepared packages holding its trigger types, before approval.
    Validate,
    /// Chooses the sites of Placements of its trigger type.
    Schedule,
}

/// Plugin subcommands.
#[derive(Debug, Subcommand)]
pub enum PluginCommand {
    /// Register (or replace) a plugin.
    Register {
        /// Name.
        name: String,
        /// Its gRPC endpoint (http://HOST:PORT or unix:///PATH).
        #[arg(long)]
        endpoint: String,
        /// What it does: `prepare` (serves `Preparer`: prepares its trigger resources),
        /// `validate` (serves `Validator`: refuses or accepts prepared packages holding them)
        /// or `schedule` (serves `Scheduler`: chooses the sites of Placements of its trigger
        /// type, `topology.nephio.org/v1alpha1/Placement`).
        #[arg(long = "type", value_enum, default_value = "prepare")]
        plugin_type: PluginKind,
        /// Trigger group/version/Kind (repeatable; `v1/ConfigMap` for the core group).
        #[arg(long = "trigger", value_name = "GROUP/VERSION/KIND", required = true)]
        triggers: Vec<String>,
        /// Argument passed on every call (repeatable).
        #[arg(long = "argument")]
        arguments: Vec<String>,
        /// Property k=v passed on every call (repeatable).
        #[arg(long = "property", value_name = "K=V")]
        properties: Vec<String>,
    },
    /// List plugins.
    List {
        /// Output format.
        #[arg(
            short = 'o',
            long = "output",
            default_value = "table",
            value_name = "FORMAT"
        )]
        output: ListFormat,
    },
    /// Show one plugin as JSON.
    Get {
        /// Name.
        name: String,
    },
    /// Delete a plugin.
    Delete {
        /// Name.
        name: String,
    },
}

/// Deployment subcommands.
#[derive(Debug, Subcommand)]
pub enum DeploymentCommand {
    /// Create a deployment; prints its id.
    Create {
        /// Template id.
        #[arg(long)]
        template: Option<String>,
        /// Site id.
        #[arg(long)]
        site: Option<String>,
        /// Parent deployment id.
        #[arg(long)]
        parent: Option<String>,
        /// A package merged into the template (repeatable, merged in order).
        #[arg(long = "merge", value_name = "FILE")]
        merge: Vec<PathBuf>,
        /// Metadata k=v (repeatable).
        #[arg(long = "metadata", value_name = "K=V")]
        metadata: Vec<String>,
        /// Instance key: makes (parent, template, site, key) unique.
        #[arg(long)]
        instance_key: Option<String>,
    },
    /// List deployments (every page).
    List {
        /// Only children of this deployment.
        #[arg(long)]
        parent: Option<String>,
        /// Prepared state.
        #[arg(long, action = clap::ArgAction::Set)]
        prepared: Option<bool>,
        /// Approved state.
        #[arg(long, action = clap::ArgAction::Set)]
        approved: Option<bool>,
        /// Template id pattern (repeatable).
        #[arg(long = "template", value_name = "PATTERN")]
        templates: Vec<String>,
        /// Site id pattern (repeatable).
        #[arg(long = "site", value_name = "PATTERN")]
        sites: Vec<String>,
        /// Metadata filter and output format.
        #[command(flatten)]
        listing: Listing,
    },
    /// Show a deployment's package (or its row and package as JSON).
    Get {
        /// Id.
        id: String,
        /// Output format.
        #[arg(short = 'o', long = "output", value_enum, default_value_t = GetFormat::Yaml)]
        output: GetFormat,
    },
    /// Replace a deployment's package.
    Update {
        /// Id.
        id: String,
        /// The new package.
        #[arg(short = 'f', long = "file")]
        file: PathBuf,
    },
    /// Approve a prepared deployment.
    Approve {
        /// Id.
        id: String,
    },
    /// List a deployment's kept revisions: number, when, who, what.
    History {
        /// Id.
        id: String,
        /// Output format (`table`, `json`, `yaml`, `name`, `jsonpath=…`).
        #[arg(
            short = 'o',
            long = "output",
            default_value = "table",
            value_name = "FORMAT"
        )]
        output: ListFormat,
    },
    /// Show how a deployment's package changed between two kept revisions (a line diff of
    /// their YAML).
    Diff {
        /// Id.
        id: String,
        /// The older revision.
        #[arg(long)]
        from: i64,
        /// The newer revision.
        #[arg(long)]
        to: i64,
    },
    /// Write a kept revision's package as the deployment's new one (a new revision); it is
    /// prepared, validated and approved again as any change.
    Rollback {
        /// Id.
        id: String,
        /// The revision to return to.
        #[arg(long)]
        to: i64,
    },
    /// Delete a deployment and its descendants.
    Delete {
        /// Id.
        id: String,
    },
}
