//! Translation of Kubernetes Ingress and OpenShift Route objects into the L7 model.
//!
//! One policy per (host, path, backend) and one pool per `<namespace>/<service>:<port>` (a
//! Route gets its own pool `route:<namespace>/<name>`, since it mixes weighted services): Octavia
//! ANDs the rules of a policy, so the rules of one Ingress cannot share a policy.
//!
//! - Hosts: `HOST_NAME EQUAL_TO h` for an exact host; a one-label wildcard `*.example.com`
//!   becomes `HOST_NAME REGEX (?s)^[^.]+\.example\.com$`; no host, no host rule.
//! - Paths: `Exact` is `PATH EQUAL_TO p`; `Prefix` (and `ImplementationSpecific`, which this
//!   implementation treats as `Prefix`) is the element-wise `PATH REGEX (?s)^/foo(?:/.*)?$`, a
//!   trailing slash in the rule ignored; a Route's `path` is an element-wise prefix too.
//! - Positions give Ingress precedence under first-match evaluation: exact hosts, then
//!   wildcards, then no host; within a host the longest path first, `Exact` before `Prefix` at
//!   equal length. A less specific host's policies come later, so they apply when nothing of a
//!   more specific host matches. `defaultBackend` is the listener's default pool; without one,
//!   404.
//! - Two objects claiming the same host and path (and path type): the oldest
//!   `creationTimestamp` wins, then `namespace/name`; the loser is reported naming the winner.

use std::collections::BTreeMap;

use nephrite_krm::Object;
use serde::Serialize;

use crate::backends::{Backends, SERVICE_NAME_LABEL};
use crate::model::{Action, Certificate, CompareType, L7Config, Policy, Pool, Rule, RuleType};
use crate::objects::{EndpointSliceBody, IngressClassSpec, SecretBody, ServiceSpec};
use crate::table::{path_prefix_regex, wildcard_host_regex};

mod ingress;
mod route;
#[cfg(test)]
mod tests;

/// The annotation holding extra Octavia rules (a JSON or YAML flow list of
/// `{type, compare_type, key, value, invert}`) ANDed into every policy of the object.
pub const EXTRA_RULES_ANNOTATION: &str = "l7.kuryr.nephrite.io/rules";
/// The IngressClass annotation marking the default class.
pub const DEFAULT_CLASS_ANNOTATION: &str = "ingressclass.kubernetes.io/is-default-class";
/// The legacy Ingress class annotation.
pub const LEGACY_CLASS_ANNOTATION: &str = "kubernetes.io/ingress.class";
/// The default `--ingress-class`.
pub const DEFAULT_INGRESS_CLASS: &str = "kuryr-l7";

/// An object with where it came from (a file path, or `kube`).
#[derive(Debug, Clone)]
pub struct SourceObject {
    /// The object.
    pub object: Object,
    /// Where it came from, for reports.
    pub origin: String,
}

/// Translation settings.
#[derive(Debug, Clone)]
pub struct Options {
    /// Our IngressClass name.
    pub ingress_class: String,
    /// Gateway API settings (our GatewayClasses' `controllerName`).
    pub gateway: crate::gateway::Settings,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            ingress_class: DEFAULT_INGRESS_CLASS.to_owned(),
            gateway: crate::gateway::Settings::default(),
        }
    }
}

/// An object refused as a whole.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Rejection {
    /// `Ingress default/web`.
    pub object: String,
    /// Where it came from.
    pub origin: String,
    /// Why.
    pub reason: String,
}

/// A (host, path) claimed by more than one object.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Conflict {
    /// The host (`*` for any).
    pub host: String,
    /// The path and its type.
    pub path: String,
    /// The object that serves it.
    pub winner: String,
    /// The object that lost.
    pub loser: String,
    /// Where the loser came from.
    pub origin: String,
}

/// Something served, but not as asked (a missing Service, a missing Secret, …).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Warning {
    /// The object.
    pub object: String,
    /// Where it came from.
    pub origin: String,
    /// What.
    pub message: String,
}

/// The outcome of a translation.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Translation {
    /// The model to serve.
    pub config: L7Config,
    /// Objects refused.
    pub rejections: Vec<Rejection>,
    /// Conflicts and their winners.
    pub conflicts: Vec<Conflict>,
    /// Warnings.
    pub warnings: Vec<Warning>,
    /// Objects left out on purpose (another IngressClass, a kind not read), with why.
    pub ignored: Vec<Rejection>,
    /// The Gateway API objects' model (for their status), its compiled Gateways lowered into
    /// `config` ([`gateway::lower`](crate::gateway::lower)).
    #[serde(skip)]
    pub gateway: crate::gateway::Model,
    /// How much of each HTTPRoute rule the lowering serves, per Gateway listener.
    #[serde(skip)]
    pub gateway_support: Vec<crate::gateway::lower::ListenerSupport>,
}

/// The host part of an entry.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum HostMatch {
    Exact(String),
    Wildcard(String),
    Any,
}

impl HostMatch {
    fn rank(&self) -> u8 {
        match self {
            HostMatch::Exact(_) => 0,
            HostMatch::Wildcard(_) => 1,
            HostMatch::Any => 2,
        }
    }

    fn display(&self) -> String {
        match self {
            HostMatch::Exact(host) => host.clone(),
            HostMatch::Wildcard(suffix) => format!("*.{suffix}"),
            HostMatch::Any => "*".to_owned(),
        }
    }

    fn rule(&self) -> Option<Rule> {
        match self {
            HostMatch::Exact(host) => {
                Some(Rule::new(RuleType::HostName, CompareType::EqualTo, host))
            }
            HostMatch::Wildcard(suffix) => Some(Rule::new(
                RuleType::HostName,
                CompareType::Regex,
                wildcard_host_regex(suffix),
            )),
            HostMatch::Any => None,
        }
    }
}

/// The path part of an entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum PathMatch {
    Exact(String),
    /// Without trailing slash; `""` is `/`. The string says how it was asked for.
    Prefix(String, &'static str),
}

impl PathMatch {
    fn len(&self) -> usize {
        match self {
            PathMatch::Exact(p) => p.len(),
            PathMatch::Prefix(p, _) => p.len().max(1),
        }
    }

    fn display(&self) -> String {
        match self {
            PathMatch::Exact(p) => format!("{p} (Exact)"),
            PathMatch::Prefix(p, how) => {
                format!("{} ({how})", if p.is_empty() { "/" } else { p })
            }
        }
    }

    fn key(&self) -> (bool, &str) {
        match self {
            PathMatch::Exact(p) => (true, p),
            PathMatch::Prefix(p, _) => (false, p),
        }
    }

    fn rule(&self) -> Rule {
        match self {
            PathMatch::Exact(p) => Rule::new(RuleType::Path, CompareType::EqualTo, p),
            PathMatch::Prefix(p, _) => {
                Rule::new(RuleType::Path, CompareType::Regex, path_prefix_regex(p))
            }
        }
    }
}

/// Who an entry belongs to.
#[derive(Debug, Clone)]
pub(crate) struct Owner {
    pub kind: &'static str,
    pub namespace: String,
    pub name: String,
    pub created: Option<String>,
    pub origin: String,
}

impl Owner {
    fn display(&self) -> String {
        format!("{} {}/{}", self.kind, self.namespace, self.name)
    }

    /// Older first (a missing timestamp last), then namespace/name.
    fn seniority(&self) -> (bool, &str, &str, &str, &str) {
        (
            self.created.is_none(),
            self.created.as_deref().unwrap_or_default(),
            &self.namespace,
            &self.name,
            self.kind,
        )
    }
}

/// One (host, path, backend) of an object, with what each listener does with it.
#[derive(Debug, Clone)]
pub(crate) struct Entry {
    pub host: HostMatch,
    pub path: PathMatch,
    pub extra: Vec<Rule>,
    pub http: Option<Action>,
    pub https: Option<Action>,
    pub owner: usize,
}

/// What one object contributes.
#[derive(Debug, Default)]
pub(crate) struct Contribution {
    pub entries: Vec<Entry>,
    pub pools: Vec<Pool>,
    pub certificates: Vec<Certificate>,
    pub passthrough: Vec<(String, String)>,
    pub default_pool: Option<String>,
    pub warnings: Vec<String>,
}

/// Checks and normalizes an Ingress or Route host: lower case, exact or `*.` + one or more
/// labels; `Any` for none.
pub(crate) fn parse_host(host: Option<&str>) -> Result<HostMatch, String> {
    let Some(host) = host.filter(|h| !h.is_empty()) else {
        return Ok(HostMatch::Any);
    };
    let lower = host.to_ascii_lowercase();
    let (wildcard, rest) = match lower.strip_prefix("*.") {
        Some(rest) => (true, rest),
        None => (false, lower.as_str()),
    };
    let valid_label = |label: &str| {
        !label.is_empty()
            && label.len() <= 63
            && label
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-')
            && !label.starts_with('-')
            && !label.ends_with('-')
    };
    if rest.is_empty() || !rest.split('.').all(valid_label) {
        return Err(format!(
            "host {host:?} is not a DNS name or a wildcard covering one label (*.example.com)"
        ));
    }
    Ok(if wildcard {
        HostMatch::Wildcard(rest.to_owned())
    } else {
        HostMatch::Exact(rest.to_owned())
    })
}

/// Reads the extra-rules annotation.
pub(crate) fn extra_rules(object: &Object) -> Result<Vec<Rule>, String> {
    let Some(text) = object.annotation(EXTRA_RULES_ANNOTATION) else {
        return Ok(Vec::new());
    };
    let rules: Vec<Rule> = serde_json::from_str(text)
        .map_err(|err| format!("annotation {EXTRA_RULES_ANNOTATION}: {err}"))?;
    for rule in &rules {
        rule.validate()
            .map_err(|err| format!("annotation {EXTRA_RULES_ANNOTATION}: {err}"))?;
    }
    Ok(rules)
}

/// How reports name an object: `Ingress shop/web` (namespace `default` when absent).
pub fn describe(object: &Object) -> String {
    format!(
        "{} {}/{}",
        object.kind,
        object.namespace().unwrap_or("default"),
        object.name().unwrap_or("<no name>")
    )
}

fn spec<T: serde::de::DeserializeOwned + Default>(object: &Object) -> Result<T, String> {
    match object.spec() {
        None => Ok(T::default()),
        Some(value) => serde_json::from_value(value.clone()).map_err(|err| format!("spec: {err}")),
    }
}

fn body<T: serde::de::DeserializeOwned>(object: &Object) -> Result<T, String> {
    serde_json::from_value(serde_json::Value::Object(
        object
            .body
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect(),
    ))
    .map_err(|err| err.to_string())
}

/// Which Ingress classes we serve.
struct ClassFilter {
    any_classes: bool,
    served: Vec<String>,
    default_exists: bool,
    ours: String,
}

impl ClassFilter {
    fn new(objects: &[SourceObject], ours: &str) -> Self {
        let mut filter = ClassFilter {
            any_classes: false,
            served: vec![ours.to_owned()],
            default_exists: false,
            ours: ours.to_owned(),
        };
        for source in objects {
            let object = &source.object;
            if object.kind != "IngressClass"
                || !object.api_version.starts_with("networking.k8s.io/")
            {
                continue;
            }
            filter.any_classes = true;
            let _: Result<IngressClassSpec, _> = spec(object);
            if object.annotation(DEFAULT_CLASS_ANNOTATION) == Some("true") {
                filter.default_exists = true;
                if let Some(name) = object.name() {
                    filter.served.push(name.to_owned());
                }
            }
        }
        filter
    }

    /// `None` when served; otherwise why not.
    fn refuses(&self, class: Option<&str>) -> Option<String> {
        match class {
            None if !self.any_classes || self.default_exists => None,
            None => Some("no IngressClass given and no default IngressClass exists".into()),
            Some(class) if !self.any_classes && class == self.ours => None,
            Some(class) if self.any_classes && self.served.iter().any(|s| s == class) => None,
            Some(class) => Some(format!(
                "IngressClass {class:?} is not ours ({:?}) nor the default",
                self.ours
            )),
        }
    }
}

/// Translates the objects of one source into the model, with rejections, conflicts and
/// warnings. Deterministic: the same objects (in any order) give the same result.
pub fn translate(objects: &[SourceObject], options: &Options) -> Translation {
    let mut translation = Translation::default();
    let mut backends = Backends::default();
    let classes = ClassFilter::new(objects, &options.ingress_class);

    // Backends first: Services, slices and Secrets.
    for source in objects {
        let object = &source.object;
        let namespace = object.namespace().unwrap_or("default");
        let name = object.name().unwrap_or_default();
        let reject = |reason: String| Rejection {
            object: describe(object),
            origin: source.origin.clone(),
            reason,
        };
        match (object.api_version.as_str(), object.kind.as_str()) {
            ("v1", "Service") => match spec::<ServiceSpec>(object) {
                Ok(service) => backends.add_service(namespace, name, service),
                Err(reason) => translation.rejections.push(reject(reason)),
            },
            ("discovery.k8s.io/v1", "EndpointSlice") => match body::<EndpointSliceBody>(object) {
                Ok(slice) => match object.label(SERVICE_NAME_LABEL) {
                    Some(service) => backends.add_slice(namespace, service, slice),
                    None => translation.ignored.push(reject(format!(
                        "EndpointSlice without the {SERVICE_NAME_LABEL} label"
                    ))),
                },
                Err(reason) => translation.rejections.push(reject(reason)),
            },
            ("v1", "Secret") => match body::<SecretBody>(object) {
                Ok(secret) => backends.add_secret(namespace, name, secret),
                Err(reason) => translation.rejections.push(reject(reason)),
            },
            _ => {}
        }
    }

    let mut owners: Vec<Owner> = Vec::new();
    let mut entries: Vec<Entry> = Vec::new();
    let mut defaults: Vec<(usize, String)> = Vec::new();
    for source in objects {
        let object = &source.object;
        let owner_of = |kind: &'static str| Owner {
            kind,
            namespace: object.namespace().unwrap_or("default").to_owned(),
            name: object.name().unwrap_or_default().to_owned(),
            created: object.metadata.details().creation_timestamp.clone(),
            origin: source.origin.clone(),
        };
        let result = match (object.api_version.as_str(), object.kind.as_str()) {
            ("networking.k8s.io/v1", "Ingress") => {
                let class = spec::<crate::objects::IngressSpec>(object)
                    .ok()
                    .and_then(|s| s.ingress_class_name)
                    .or_else(|| {
                        object
                            .annotation(LEGACY_CLASS_ANNOTATION)
                            .map(str::to_owned)
                    });
                if let Some(reason) = classes.refuses(class.as_deref()) {
                    translation.ignored.push(Rejection {
                        object: describe(object),
                        origin: source.origin.clone(),
                        reason,
                    });
                    continue;
                }
                Some((
                    owner_of("Ingress"),
                    ingress::translate(object, owners.len(), &backends),
                ))
            }
            ("route.openshift.io/v1", "Route") => Some((
                owner_of("Route"),
                route::translate(object, owners.len(), &backends),
            )),
            ("v1", "Service" | "Secret" | "Namespace")
            | ("discovery.k8s.io/v1", "EndpointSlice")
            | ("networking.k8s.io/v1", "IngressClass") => None,
            (api_version, "GatewayClass" | "Gateway" | "HTTPRoute" | "ReferenceGrant")
                if api_version.starts_with("gateway.networking.k8s.io/") =>
            {
                None
            }
            (api_version, kind) => {
                translation.ignored.push(Rejection {
                    object: describe(object),
                    origin: source.origin.clone(),
                    reason: format!("{api_version} {kind} is not read by kuryr-l7"),
                });
                None
            }
        };
        let Some((owner, result)) = result else {
            continue;
        };
        match result {
            Err(reason) => translation.rejections.push(Rejection {
                object: owner.display(),
                origin: owner.origin.clone(),
                reason,
            }),
            Ok(contribution) => {
                let index = owners.len();
                for message in contribution.warnings {
                    translation.warnings.push(Warning {
                        object: owner.display(),
                        origin: owner.origin.clone(),
                        message,
                    });
                }
                for pool in contribution.pools {
                    translation.config.pools.insert(pool.id.clone(), pool);
                }
                translation
                    .config
                    .certificates
                    .extend(contribution.certificates);
                for (host, pool) in contribution.passthrough {
                    translation.config.passthrough.entry(host).or_insert(pool);
                }
                if let Some(pool) = contribution.default_pool {
                    defaults.push((index, pool));
                }
                entries.extend(contribution.entries);
                owners.push(owner);
            }
        }
    }
    assemble(&mut translation, owners, entries, defaults);
    let objects: Vec<Object> = objects.iter().map(|s| s.object.clone()).collect();
    let mut model = crate::gateway::build(&objects, &options.gateway);
    for crate::gateway::GatewayError::Invalid {
        object,
        field,
        message,
    } in &model.errors
    {
        translation.rejections.push(Rejection {
            object: object.clone(),
            origin: crate::gateway::lower::ORIGIN.into(),
            reason: format!("{field}: {message}"),
        });
    }
    translation.gateway_support = crate::gateway::lower::lower(
        &mut model,
        &objects,
        options.gateway.driver,
        &mut translation,
    );
    translation.gateway = model;
    translation
}

fn assemble(
    translation: &mut Translation,
    owners: Vec<Owner>,
    mut entries: Vec<Entry>,
    mut defaults: Vec<(usize, String)>,
) {
    // Certificates: the oldest owner's first (by origin order they were added; keep stable).
    translation
        .config
        .certificates
        .sort_by(|a, b| a.origin.cmp(&b.origin));

    // Default backend: the oldest Ingress wins.
    defaults.sort_by(|a, b| owners[a.0].seniority().cmp(&owners[b.0].seniority()));
    if let Some((winner, pool)) = defaults.first() {
        translation.config.http.default_pool = Some(pool.clone());
        translation.config.https.default_pool = Some(pool.clone());
        for (loser, _) in &defaults[1..] {
            translation.conflicts.push(Conflict {
                host: "*".into(),
                path: "defaultBackend".into(),
                winner: owners[*winner].display(),
                loser: owners[*loser].display(),
                origin: owners[*loser].origin.clone(),
            });
        }
    }

    // Precedence order; conflicts keep the most senior.
    entries.sort_by(|a, b| {
        let (a_exact, a_path) = a.path.key();
        let (b_exact, b_path) = b.path.key();
        (a.host.rank(), &a.host)
            .cmp(&(b.host.rank(), &b.host))
            .then(b.path.len().cmp(&a.path.len()))
            .then(b_exact.cmp(&a_exact))
            .then(a_path.cmp(b_path))
            .then(b.extra.len().cmp(&a.extra.len()))
            .then(a.extra.cmp(&b.extra))
            .then(
                owners[a.owner]
                    .seniority()
                    .cmp(&owners[b.owner].seniority()),
            )
    });
    let mut kept: Vec<Entry> = Vec::with_capacity(entries.len());
    for entry in entries {
        if let Some(previous) = kept.last()
            && previous.host == entry.host
            && previous.path.key() == entry.path.key()
            && previous.extra == entry.extra
        {
            if previous.owner != entry.owner {
                let loser = &owners[entry.owner];
                translation.conflicts.push(Conflict {
                    host: entry.host.display(),
                    path: entry.path.display(),
                    winner: owners[previous.owner].display(),
                    loser: loser.display(),
                    origin: loser.origin.clone(),
                });
            }
            continue;
        }
        kept.push(entry);
    }

    let mut counters: BTreeMap<usize, usize> = BTreeMap::new();
    for entry in kept {
        let owner = &owners[entry.owner];
        let counter = counters.entry(entry.owner).or_default();
        *counter += 1;
        let mut rules: Vec<Rule> = entry.host.rule().into_iter().collect();
        rules.push(entry.path.rule());
        rules.extend(entry.extra.iter().cloned());
        let name = format!(
            "{}/{}/{}#{}",
            owner.kind.to_ascii_lowercase(),
            owner.namespace,
            owner.name,
            counter
        );
        let origin = format!(
            "{} {} {}",
            owner.display(),
            entry.host.display(),
            entry.path.display()
        );
        for (listener, action) in [
            (&mut translation.config.http, entry.http),
            (&mut translation.config.https, entry.https),
        ] {
            let Some(action) = action else { continue };
            let mut policy = Policy::new(name.clone(), action, rules.clone());
            policy.origin = origin.clone();
            // Validated at entry construction; a failure here would be a translation bug, and
            // the policy is then left out rather than served wrongly.
            if let Err(err) = listener.insert_policy(policy, None) {
                translation.warnings.push(Warning {
                    object: owner.display(),
                    origin: owner.origin.clone(),
                    message: format!("policy left out: {err}"),
                });
            }
        }
    }
}
