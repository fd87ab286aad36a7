//! `kuryr-l7 rules`: the compiled policies, rules and pools of a snapshot, and what was
//! rejected, conflicting or wrong, as a table or as JSON; from a directory, or from a
//! controller's rules service with the version each router serves; with `--explain`, how
//! much of each HTTPRoute rule each driver serves ([`explain`]).

use std::fmt::Write as _;

use nephrite_l7::{Action, Listener, Options, PathChange};
use nephrite_runtime::{ClientArgs, Endpoint, LogFormat};

use kuryr_l7_client::{RouterAck, fetch};

use crate::kubernetes::{self, KubeSourceError};
use crate::source::{Snapshot, SourceError, SourceSpec, snapshot_dir};

pub mod explain;

/// What `rules` shows: a snapshot and, from a controller, its version and the routers.
#[derive(Debug)]
pub struct Fetched {
    /// The controller's current version (`None` for a directory).
    pub version: Option<String>,
    /// The rules.
    pub snapshot: Snapshot,
    /// The routers that acknowledged a version to the controller.
    pub routers: Vec<RouterAck>,
}

impl Fetched {
    /// A directory's rules.
    pub fn local(snapshot: Snapshot) -> Self {
        Fetched {
            version: None,
            snapshot,
            routers: Vec::new(),
        }
    }
}

impl From<kuryr_l7_client::Fetched> for Fetched {
    /// A controller's rules, as the rules client fetched them.
    fn from(fetched: kuryr_l7_client::Fetched) -> Self {
        Fetched {
            version: Some(fetched.version),
            snapshot: fetched.snapshot,
            routers: fetched.routers,
        }
    }
}

/// How `rules` prints.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub enum Output {
    /// Text tables.
    Table,
    /// One JSON document.
    Json,
}

/// `kuryr-l7 rules` flags.
#[derive(Debug, clap::Args)]
#[command(group(clap::ArgGroup::new("from").required(true).args(["source", "rules"])))]
pub struct RulesArgs {
    /// Where the objects come from: dir:PATH, or kube (listed once).
    #[arg(long, env = "KURYR_L7_SOURCE")]
    pub source: Option<SourceSpec>,
    /// A controller's rules service (HOST:PORT, tcp://, https://, unix://); the first of a
    /// comma-separated list that answers.
    #[arg(long, env = "KURYR_L7_RULES", value_delimiter = ',')]
    pub rules: Option<Vec<Endpoint>>,
    /// Our IngressClass.
    #[arg(long, env = "KURYR_L7_INGRESS_CLASS", default_value = nephrite_l7::translate::DEFAULT_INGRESS_CLASS)]
    pub ingress_class: String,
    /// The `controllerName` of the GatewayClasses we serve (Gateway API).
    #[arg(long, env = "KURYR_L7_GATEWAY_CONTROLLER", default_value = nephrite_l7::gateway::build::DEFAULT_CONTROLLER_NAME)]
    pub gateway_controller: String,
    /// Output format.
    #[arg(
        short,
        long,
        env = "KURYR_L7_OUTPUT",
        value_enum,
        default_value = "table"
    )]
    pub output: Output,
    /// For each HTTPRoute rule on each Gateway listener, which drivers serve it fully, partly
    /// or not, and why (needs --source: a controller's rules carry no Gateway objects).
    #[arg(long)]
    pub explain: bool,
    /// Log line format.
    #[arg(long, env = "NEPHRITE_LOG_FORMAT", value_enum, default_value = "text")]
    pub log_format: LogFormat,
    /// The credentials presented to the rules service (--rules): `--ca`, `--cert`/`--key`,
    /// `--token-file`; a `read` identity sees the certificates without their keys.
    #[command(flatten)]
    pub credentials: ClientArgs,
}

/// Why `rules` could not show the rules.
#[derive(Debug, thiserror::Error)]
pub enum RulesError {
    /// Neither `--source` nor `--rules`.
    #[error("give --source or --rules")]
    NothingToShow,
    /// `--explain` with `--rules`.
    #[error("--explain needs --source: a controller's rules carry no Gateway API objects")]
    ExplainNeedsSource,
    /// The directory could not be read.
    #[error(transparent)]
    Source(#[from] SourceError),
    /// The cluster could not be listed.
    #[error(transparent)]
    Kube(#[from] KubeSourceError),
    /// No controller answered.
    #[error("no rules service answered: {0}")]
    NoAnswer(String),
    /// The JSON could not be written.
    #[error("writing JSON: {0}")]
    Json(#[from] serde_json::Error),
}

/// The SHA-256 of the leaf certificate's DER (hex): how the CLI names a certificate (the
/// private key is never shown, and a `read` identity does not receive it).
pub fn fingerprint(cert_pem: &str) -> String {
    use rustls_pki_types::CertificateDer;
    use rustls_pki_types::pem::PemObject;
    use sha2::{Digest, Sha256};
    match CertificateDer::pem_slice_iter(cert_pem.as_bytes()).next() {
        Some(Ok(der)) => Sha256::digest(der.as_ref())
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect(),
        _ => "(unreadable)".to_owned(),
    }
}

/// What `kuryr-l7 rules` prints for `args`.
pub async fn text(args: RulesArgs) -> Result<String, RulesError> {
    let options = Options {
        ingress_class: args.ingress_class,
        gateway: nephrite_l7::gateway::Settings {
            controller_name: args.gateway_controller,
            ..nephrite_l7::gateway::Settings::default()
        },
    };
    if args.explain && args.source.is_none() {
        return Err(RulesError::ExplainNeedsSource);
    }
    let fetched = match (args.source, args.rules) {
        (Some(SourceSpec::Dir(dir)), _) => Fetched::local(snapshot_dir(&dir, &options)?),
        (Some(SourceSpec::Kube), _) => Fetched::local(kubernetes::snapshot_once(&options).await?),
        (None, Some(urls)) => {
            let mut failures = Vec::new();
            let mut found = None;
            for url in &urls {
                match fetch(url, &args.credentials).await {
                    Ok(fetched) => {
                        found = Some(Fetched::from(fetched));
                        break;
                    }
                    Err(err) => failures.push(err.to_string()),
                }
            }
            found.ok_or_else(|| RulesError::NoAnswer(failures.join("; ")))?
        }
        (None, None) => return Err(RulesError::NothingToShow),
    };
    if args.explain {
        let model = &fetched.snapshot.translation.gateway;
        return Ok(match args.output {
            Output::Table => explain::table(model),
            Output::Json => format!("{}\n", serde_json::to_string_pretty(&explain::json(model))?),
        });
    }
    Ok(match args.output {
        Output::Table => render_fetched_table(&fetched),
        Output::Json => format!(
            "{}\n",
            serde_json::to_string_pretty(&render_fetched_json(&fetched))?
        ),
    })
}

/// The rules as text: the version, the tables, the routers.
pub fn render_fetched_table(fetched: &Fetched) -> String {
    let mut out = String::new();
    if let Some(version) = &fetched.version {
        let _ = writeln!(out, "VERSION {version}");
    }
    out.push_str(&render_table(&fetched.snapshot));
    if fetched.version.is_some() {
        let _ = writeln!(out, "ROUTERS");
        if fetched.routers.is_empty() {
            let _ = writeln!(out, "  (none acknowledged a version to this controller)");
        }
        for router in &fetched.routers {
            let state = if Some(&router.version) == fetched.version.as_ref() {
                "current"
            } else {
                "behind"
            };
            let _ = writeln!(
                out,
                "  {}  {}  {}  {state}  (at {})",
                router.router, router.address, router.version, router.acknowledged_at
            );
        }
    }
    out
}

/// The rules as one JSON document (with `version` and `routers` from a controller).
pub fn render_fetched_json(fetched: &Fetched) -> serde_json::Value {
    let mut value = render_json(&fetched.snapshot);
    if let (Some(map), Some(version)) = (value.as_object_mut(), &fetched.version) {
        map.insert("version".into(), version.clone().into());
        let routers: Vec<serde_json::Value> = fetched
            .routers
            .iter()
            .map(|r| {
                serde_json::json!({
                    "router": r.router,
                    "address": r.address,
                    "version": r.version,
                    "current": &r.version == version,
                    "acknowledged_at": r.acknowledged_at,
                })
            })
            .collect();
        map.insert("routers".into(), routers.into());
    }
    value
}

fn action(action: &Action) -> String {
    match action {
        Action::Reject => "REJECT".into(),
        Action::RedirectToUrl { url, code } => format!("REDIRECT_TO_URL {code} {url}"),
        Action::RedirectPrefix { prefix, code } => format!("REDIRECT_PREFIX {code} {prefix}"),
        Action::RedirectToPool { pool } => format!("REDIRECT_TO_POOL {pool}"),
        Action::Redirect {
            scheme,
            host,
            port,
            path,
            code,
        } => {
            let host = host.as_deref().unwrap_or("<request host>");
            let port = port.map_or_else(String::new, |p| format!(":{p}"));
            let path = match path {
                None => "<request path>".to_owned(),
                Some(PathChange::Full(full)) => full.clone(),
                Some(PathChange::Prefix {
                    matched,
                    replacement,
                }) => format!("<{matched}… with {replacement}>"),
            };
            format!("REDIRECT {code} {scheme}://{host}{port}{path}")
        }
    }
}

fn listener(out: &mut String, name: &str, listener: &Listener) {
    let _ = writeln!(
        out,
        "LISTENER {name}: {} policies",
        listener.policies().len()
    );
    for policy in listener.policies() {
        let _ = writeln!(
            out,
            "  {:>4}  {}  {}",
            policy.position,
            policy.name,
            action(&policy.action)
        );
        let _ = writeln!(out, "        from {}", policy.origin);
        for rule in &policy.rules {
            let _ = writeln!(out, "        {rule}");
        }
        if !policy.filters.is_empty() {
            let filters = serde_json::to_string(&policy.filters).unwrap_or_default();
            let _ = writeln!(out, "        filters {filters}");
        }
    }
    match &listener.default_pool {
        Some(pool) => {
            let _ = writeln!(out, "  default pool {pool}");
        }
        None => {
            let _ = writeln!(out, "  no match: {}", listener.no_match_status);
        }
    }
}

/// The snapshot as text tables.
pub fn render_table(snapshot: &Snapshot) -> String {
    let mut out = String::new();
    let config = &snapshot.translation.config;
    listener(&mut out, "http", &config.http);
    listener(&mut out, "https", &config.https);
    let _ = writeln!(out, "POOLS");
    for pool in config.pools.values() {
        let members: Vec<String> = pool
            .members
            .iter()
            .map(|m| format!("{} w{}", m.address, m.weight))
            .collect();
        let status = if pool.has_weight() {
            ""
        } else {
            "  (no live member: 503)"
        };
        let _ = writeln!(out, "  {}  [{}]{status}", pool.id, members.join(", "));
    }
    for (host, pool) in &config.passthrough {
        let _ = writeln!(out, "PASSTHROUGH {host} -> {pool}");
    }
    for certificate in &config.certificates {
        let _ = writeln!(
            out,
            "CERTIFICATE {} for [{}] sha256:{}",
            certificate.origin,
            certificate.hosts.join(", "),
            fingerprint(&certificate.cert_pem)
        );
    }
    let t = &snapshot.translation;
    for c in &t.conflicts {
        let _ = writeln!(
            out,
            "CONFLICT {} {}: {} wins over {} ({})",
            c.host, c.path, c.winner, c.loser, c.origin
        );
    }
    for r in &t.rejections {
        let _ = writeln!(out, "REJECTED {} ({}): {}", r.object, r.origin, r.reason);
    }
    for w in &t.warnings {
        let _ = writeln!(out, "WARNING {} ({}): {}", w.object, w.origin, w.message);
    }
    for i in &t.ignored {
        let _ = writeln!(out, "IGNORED {} ({}): {}", i.object, i.origin, i.reason);
    }
    for e in &snapshot.read_errors {
        let _ = writeln!(out, "ERROR {e}");
    }
    out
}

/// The snapshot as one JSON document.
pub fn render_json(snapshot: &Snapshot) -> serde_json::Value {
    let mut value = serde_json::to_value(&snapshot.translation).unwrap_or_default();
    if let Some(map) = value.as_object_mut() {
        map.insert(
            "read_errors".into(),
            serde_json::json!(snapshot.read_errors),
        );
    }
    value
}
