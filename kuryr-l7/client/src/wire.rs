//! The rules on the wire: a [`Snapshot`] as a `kuryr.l7.v1.Snapshot` and back, a router's
//! acknowledgement as a `RouterStatus`, and the snapshot's version. Both ends use this module:
//! the controller's rules service to write snapshots, and this crate's clients (the routers'
//! [`Subscription`](crate::Subscription), [`fetch`](crate::fetch)) to read them, so a change
//! of wire format is made once. Wire to domain is `TryFrom` with a typed [`WireError`] naming
//! the field the model refuses; domain to wire cannot fail.
//!
//! The version is the lowercase hex SHA-256 of the snapshot's protobuf encoding with `version`
//! empty. Everything in the snapshot is ordered (pools by id, passthrough by host, reports
//! sorted) and the message has no map fields, so the encoding — and the version — depends only on
//! the translation's content: any controller, restarted or not, names the same rules the same
//! way, and a router can check that what it received is what the version says.

use std::sync::Arc;

use nephrite_l7::{
    Action, Certificate, CompareType, Conflict, L7Config, Listener, Member, ModelError, Policy,
    Pool, PoolProtocol, Rejection, RouteTable, Rule, RuleType, Translation, Warning,
};

mod filters;

use filters::{filters_from_wire, filters_to_wire, path_from_wire, path_to_wire};
use nephrite_proto::kuryr::l7::v1 as pb;
use prost::Message as _;
use sha2::{Digest as _, Sha256};

use crate::snapshot::{RouterAck, Snapshot};

pub mod delta;

#[cfg(test)]
mod tests;

/// Why a received snapshot (or delta) cannot be served.
#[derive(Debug, thiserror::Error)]
pub enum WireError {
    /// The content does not hash to the version it carries.
    #[error("snapshot {claimed} does not match its content (hashes to {actual})")]
    VersionMismatch {
        /// The version in the message.
        claimed: String,
        /// What the content hashes to.
        actual: String,
    },
    /// A field holds something the model refuses.
    #[error("snapshot {version}: {invalid}")]
    Invalid {
        /// The version in the message.
        version: String,
        /// What is wrong.
        #[source]
        invalid: Invalid,
    },
    /// A delta was applied to another version than its base.
    #[error("a delta from version {base} to {version} applied to version {applied_to}")]
    WrongBase {
        /// The delta's base version.
        base: String,
        /// The version the delta gives.
        version: String,
        /// The version it was applied to.
        applied_to: String,
    },
}

/// A field of a snapshot the model refuses.
#[derive(Debug, thiserror::Error)]
pub enum Invalid {
    /// A policy without an action.
    #[error("policy {policy}: no action")]
    NoAction {
        /// The policy.
        policy: String,
    },
    /// A redirect code that does not fit an HTTP status.
    #[error("policy {policy}: redirect code {code} out of range")]
    RedirectCode {
        /// The policy.
        policy: String,
        /// The code.
        code: u32,
    },
    /// A rule type that is unset or unknown.
    #[error("policy {policy}: unknown rule type {value}")]
    RuleType {
        /// The policy.
        policy: String,
        /// The enum number received.
        value: i32,
    },
    /// A compare type that is unset or unknown.
    #[error("policy {policy}: unknown compare type {value}")]
    CompareType {
        /// The policy.
        policy: String,
        /// The enum number received.
        value: i32,
    },
    /// A policy field that does not fit the model.
    #[error("policy {policy}: {field}: {message}")]
    Field {
        /// The policy.
        policy: String,
        /// The field (`filters.rewrite_path`, `redirect.port`, …).
        field: &'static str,
        /// What is wrong.
        message: String,
    },
    /// A policy the model refuses (bad rule, duplicate name, …).
    #[error(transparent)]
    Policy(#[from] ModelError),
    /// A listener's no-match status that does not fit an HTTP status.
    #[error("no-match status {0} out of range")]
    NoMatchStatus(u32),
    /// A member address that is not `IP:port`.
    #[error("pool {pool}: bad member address {address:?}")]
    MemberAddress {
        /// The pool.
        pool: String,
        /// The address received.
        address: String,
    },
    /// A report kind that is unset or unknown.
    #[error("report on {object:?}: unknown kind {value}")]
    ReportKind {
        /// The object the report is about.
        object: String,
        /// The enum number received.
        value: i32,
    },
}

/// The prefix of a private key's fingerprint.
pub const KEY_FINGERPRINT: &str = "sha256:";

/// A private key's fingerprint, `sha256:<hex>` (a fingerprint is its own): what the version
/// hashes in place of the key, and what a caller not allowed keys receives instead.
pub fn key_fingerprint(key_pem: &str) -> String {
    if key_pem.starts_with(KEY_FINGERPRINT) {
        return key_pem.to_owned();
    }
    let digest = Sha256::digest(key_pem.as_bytes());
    let hex: String = digest.iter().map(|byte| format!("{byte:02x}")).collect();
    format!("{KEY_FINGERPRINT}{hex}")
}

/// The version of `snapshot`'s content (its `version` field is ignored; each private key
/// counts by its [`key_fingerprint`], so the snapshot a `read` caller gets, fingerprints in
/// place of keys, has the same version and still checks).
pub fn version_of(snapshot: &pb::Snapshot) -> String {
    let mut unversioned = snapshot.clone();
    unversioned.version.clear();
    for certificate in &mut unversioned.certificates {
        certificate.key_pem = key_fingerprint(&certificate.key_pem);
    }
    let digest = Sha256::digest(unversioned.encode_to_vec());
    digest.iter().map(|byte| format!("{byte:02x}")).collect()
}

/// A version shortened for people (the first 12 hex digits).
pub fn short(version: &str) -> &str {
    version.get(..12).unwrap_or(version)
}

fn action_to_wire(action: &Action) -> pb::policy::Action {
    use pb::policy::Action as A;
    match action {
        Action::Reject => A::Reject(pb::Reject {}),
        Action::RedirectToUrl { url, code } => A::RedirectToUrl(pb::RedirectToUrl {
            url: url.clone(),
            code: u32::from(*code),
        }),
        Action::RedirectPrefix { prefix, code } => A::RedirectPrefix(pb::RedirectPrefix {
            prefix: prefix.clone(),
            code: u32::from(*code),
        }),
        Action::RedirectToPool { pool } => {
            A::RedirectToPool(pb::RedirectToPool { pool: pool.clone() })
        }
        Action::Redirect {
            scheme,
            host,
            port,
            path,
            code,
        } => A::Redirect(pb::RedirectRequest {
            scheme: scheme.clone(),
            host: host.clone(),
            port: port.map(u32::from),
            path: path.as_ref().map(path_to_wire),
            code: u32::from(*code),
        }),
    }
}

fn rule_type_to_wire(rule_type: RuleType) -> pb::RuleType {
    match rule_type {
        RuleType::HostName => pb::RuleType::HostName,
        RuleType::Path => pb::RuleType::Path,
        RuleType::FileType => pb::RuleType::FileType,
        RuleType::Header => pb::RuleType::Header,
        RuleType::Cookie => pb::RuleType::Cookie,
        RuleType::SslConnHasCert => pb::RuleType::SslConnHasCert,
        RuleType::SslVerifyResult => pb::RuleType::SslVerifyResult,
        RuleType::SslDnField => pb::RuleType::SslDnField,
        RuleType::Method => pb::RuleType::Method,
        RuleType::QueryParam => pb::RuleType::QueryParam,
    }
}

fn compare_type_to_wire(compare_type: CompareType) -> pb::CompareType {
    match compare_type {
        CompareType::EqualTo => pb::CompareType::EqualTo,
        CompareType::StartsWith => pb::CompareType::StartsWith,
        CompareType::EndsWith => pb::CompareType::EndsWith,
        CompareType::Contains => pb::CompareType::Contains,
        CompareType::Regex => pb::CompareType::Regex,
    }
}

fn listener_to_wire(listener: &Listener) -> pb::Listener {
    pb::Listener {
        policies: listener
            .policies()
            .iter()
            .map(|policy| pb::Policy {
                name: policy.name.clone(),
                position: u32::try_from(policy.position).unwrap_or(u32::MAX),
                action: Some(action_to_wire(&policy.action)),
                rules: policy
                    .rules
                    .iter()
                    .map(|rule| pb::Rule {
                        rule_type: rule_type_to_wire(rule.rule_type).into(),
                        compare_type: compare_type_to_wire(rule.compare_type).into(),
                        key: rule.key.clone(),
                        value: rule.value.clone(),
                        invert: rule.invert,
                    })
                    .collect(),
                origin: policy.origin.clone(),
                filters: filters_to_wire(&policy.filters),
            })
            .collect(),
        default_pool: listener.default_pool.clone().unwrap_or_default(),
        no_match_status: u32::from(listener.no_match_status),
    }
}

fn report(kind: pb::ReportKind, object: &str, origin: &str, message: &str) -> pb::Report {
    pb::Report {
        report_kind: kind.into(),
        object: object.to_owned(),
        origin: origin.to_owned(),
        message: message.to_owned(),
        ..pb::Report::default()
    }
}

impl From<&Snapshot> for pb::Snapshot {
    fn from(snapshot: &Snapshot) -> Self {
        to_wire(&snapshot.translation, &snapshot.read_errors)
    }
}

/// The translation (and what could not be read) as a snapshot, with its version.
pub fn to_wire(translation: &Translation, read_errors: &[String]) -> pb::Snapshot {
    use pb::ReportKind as K;
    let config = &translation.config;
    let mut reports: Vec<pb::Report> = Vec::new();
    for r in &translation.rejections {
        reports.push(report(K::Rejected, &r.object, &r.origin, &r.reason));
    }
    for c in &translation.conflicts {
        reports.push(pb::Report {
            report_kind: K::Conflict.into(),
            object: c.loser.clone(),
            origin: c.origin.clone(),
            message: String::new(),
            winner: c.winner.clone(),
            host: c.host.clone(),
            path: c.path.clone(),
        });
    }
    for w in &translation.warnings {
        reports.push(report(K::Warning, &w.object, &w.origin, &w.message));
    }
    for i in &translation.ignored {
        reports.push(report(K::Ignored, &i.object, &i.origin, &i.reason));
    }
    for e in read_errors {
        reports.push(report(K::Error, "", "", e));
    }
    reports.sort_by(|a, b| {
        (
            a.report_kind,
            &a.object,
            &a.host,
            &a.path,
            &a.message,
            &a.origin,
        )
            .cmp(&(
                b.report_kind,
                &b.object,
                &b.host,
                &b.path,
                &b.message,
                &b.origin,
            ))
    });
    reports.dedup();
    let mut snapshot = pb::Snapshot {
        version: String::new(),
        http: Some(listener_to_wire(&config.http)),
        https: Some(listener_to_wire(&config.https)),
        pools: config
            .pools
            .values()
            .map(|pool| {
                let (https, ca_pem) = match &pool.protocol {
                    PoolProtocol::Http => (false, None),
                    PoolProtocol::Https { ca_pem } => (true, ca_pem.clone()),
                };
                pb::Pool {
                    id: pool.id.clone(),
                    members: pool
                        .members
                        .iter()
                        .map(|m| pb::Member {
                            address: m.address.to_string(),
                            weight: m.weight,
                        })
                        .collect(),
                    https,
                    ca_pem,
                    unavailable_weight: pool.unavailable_weight,
                }
            })
            .collect(),
        certificates: config
            .certificates
            .iter()
            .map(|c| pb::Certificate {
                hosts: c.hosts.clone(),
                cert_pem: c.cert_pem.clone(),
                key_pem: c.key_pem.clone(),
                origin: c.origin.clone(),
            })
            .collect(),
        passthrough: config
            .passthrough
            .iter()
            .map(|(host, pool)| pb::Passthrough {
                host: host.clone(),
                pool: pool.clone(),
            })
            .collect(),
        reports,
    };
    snapshot.version = version_of(&snapshot);
    snapshot
}

fn redirect_code(policy: &pb::Policy, code: u32) -> Result<u16, Invalid> {
    u16::try_from(code).map_err(|_| Invalid::RedirectCode {
        policy: policy.name.clone(),
        code,
    })
}

fn action_from_wire(policy: &pb::Policy) -> Result<Action, Invalid> {
    use pb::policy::Action as A;
    Ok(match &policy.action {
        None => {
            return Err(Invalid::NoAction {
                policy: policy.name.clone(),
            });
        }
        Some(A::Reject(_)) => Action::Reject,
        Some(A::RedirectToUrl(r)) => Action::RedirectToUrl {
            url: r.url.clone(),
            code: redirect_code(policy, r.code)?,
        },
        Some(A::RedirectPrefix(r)) => Action::RedirectPrefix {
            prefix: r.prefix.clone(),
            code: redirect_code(policy, r.code)?,
        },
        Some(A::RedirectToPool(r)) => Action::RedirectToPool {
            pool: r.pool.clone(),
        },
        Some(A::Redirect(r)) => Action::Redirect {
            scheme: r.scheme.clone(),
            host: r.host.clone(),
            port: r
                .port
                .map(|port| {
                    u16::try_from(port).map_err(|_| Invalid::Field {
                        policy: policy.name.clone(),
                        field: "redirect.port",
                        message: format!("{port} is not a port"),
                    })
                })
                .transpose()?,
            path: r
                .path
                .as_ref()
                .map(|p| path_from_wire(policy, "redirect.path", p))
                .transpose()?,
            code: redirect_code(policy, r.code)?,
        },
    })
}

fn rule_from_wire(policy: &pb::Policy, rule: &pb::Rule) -> Result<Rule, Invalid> {
    let rule_type = match pb::RuleType::try_from(rule.rule_type) {
        Ok(pb::RuleType::HostName) => RuleType::HostName,
        Ok(pb::RuleType::Path) => RuleType::Path,
        Ok(pb::RuleType::FileType) => RuleType::FileType,
        Ok(pb::RuleType::Header) => RuleType::Header,
        Ok(pb::RuleType::Cookie) => RuleType::Cookie,
        Ok(pb::RuleType::SslConnHasCert) => RuleType::SslConnHasCert,
        Ok(pb::RuleType::SslVerifyResult) => RuleType::SslVerifyResult,
        Ok(pb::RuleType::SslDnField) => RuleType::SslDnField,
        Ok(pb::RuleType::Method) => RuleType::Method,
        Ok(pb::RuleType::QueryParam) => RuleType::QueryParam,
        Ok(pb::RuleType::Unspecified) | Err(_) => {
            return Err(Invalid::RuleType {
                policy: policy.name.clone(),
                value: rule.rule_type,
            });
        }
    };
    let compare_type = match pb::CompareType::try_from(rule.compare_type) {
        Ok(pb::CompareType::EqualTo) => CompareType::EqualTo,
        Ok(pb::CompareType::StartsWith) => CompareType::StartsWith,
        Ok(pb::CompareType::EndsWith) => CompareType::EndsWith,
        Ok(pb::CompareType::Contains) => CompareType::Contains,
        Ok(pb::CompareType::Regex) => CompareType::Regex,
        Ok(pb::CompareType::Unspecified) | Err(_) => {
            return Err(Invalid::CompareType {
                policy: policy.name.clone(),
                value: rule.compare_type,
            });
        }
    };
    Ok(Rule {
        rule_type,
        compare_type,
        key: rule.key.clone(),
        value: rule.value.clone(),
        invert: rule.invert,
    })
}

fn listener_from_wire(listener: Option<&pb::Listener>) -> Result<Listener, Invalid> {
    let Some(listener) = listener else {
        return Ok(Listener::new(404));
    };
    let status = u16::try_from(listener.no_match_status)
        .map_err(|_| Invalid::NoMatchStatus(listener.no_match_status))?;
    let mut out = Listener::new(status);
    out.default_pool = Some(listener.default_pool.clone()).filter(|p| !p.is_empty());
    let mut policies: Vec<&pb::Policy> = listener.policies.iter().collect();
    policies.sort_by_key(|p| p.position);
    for policy in policies {
        let rules = policy
            .rules
            .iter()
            .map(|rule| rule_from_wire(policy, rule))
            .collect::<Result<Vec<_>, _>>()?;
        let mut model = Policy::new(policy.name.clone(), action_from_wire(policy)?, rules);
        model.origin = policy.origin.clone();
        if let Some(filters) = &policy.filters {
            model.filters = filters_from_wire(policy, filters)?;
        }
        out.insert_policy(model, None)?;
    }
    Ok(out)
}

fn pool_from_wire(pool: &pb::Pool) -> Result<Pool, Invalid> {
    let members = pool
        .members
        .iter()
        .map(|m| {
            Ok(Member {
                address: m.address.parse().map_err(|_| Invalid::MemberAddress {
                    pool: pool.id.clone(),
                    address: m.address.clone(),
                })?,
                weight: m.weight,
            })
        })
        .collect::<Result<Vec<_>, Invalid>>()?;
    let protocol = if pool.https {
        PoolProtocol::Https {
            ca_pem: pool.ca_pem.clone(),
        }
    } else {
        PoolProtocol::Http
    };
    Ok(Pool {
        id: pool.id.clone(),
        members,
        protocol,
        unavailable_weight: pool.unavailable_weight,
    })
}

/// The translation and read errors a snapshot carries (its version not checked).
fn content_from_wire(snapshot: &pb::Snapshot) -> Result<(Translation, Vec<String>), Invalid> {
    let mut config = L7Config {
        http: listener_from_wire(snapshot.http.as_ref())?,
        https: listener_from_wire(snapshot.https.as_ref())?,
        ..L7Config::default()
    };
    for pool in &snapshot.pools {
        config.pools.insert(pool.id.clone(), pool_from_wire(pool)?);
    }
    config.certificates = snapshot
        .certificates
        .iter()
        .map(|c| Certificate {
            hosts: c.hosts.clone(),
            cert_pem: c.cert_pem.clone(),
            key_pem: c.key_pem.clone(),
            origin: c.origin.clone(),
        })
        .collect();
    config.passthrough = snapshot
        .passthrough
        .iter()
        .map(|p| (p.host.clone(), p.pool.clone()))
        .collect();
    let mut translation = Translation {
        config,
        ..Translation::default()
    };
    let mut read_errors = Vec::new();
    for r in &snapshot.reports {
        let rejection = || Rejection {
            object: r.object.clone(),
            origin: r.origin.clone(),
            reason: r.message.clone(),
        };
        match pb::ReportKind::try_from(r.report_kind) {
            Ok(pb::ReportKind::Rejected) => translation.rejections.push(rejection()),
            Ok(pb::ReportKind::Ignored) => translation.ignored.push(rejection()),
            Ok(pb::ReportKind::Error) => read_errors.push(r.message.clone()),
            Ok(pb::ReportKind::Conflict) => translation.conflicts.push(Conflict {
                host: r.host.clone(),
                path: r.path.clone(),
                winner: r.winner.clone(),
                loser: r.object.clone(),
                origin: r.origin.clone(),
            }),
            Ok(pb::ReportKind::Warning) => translation.warnings.push(Warning {
                object: r.object.clone(),
                origin: r.origin.clone(),
                message: r.message.clone(),
            }),
            Ok(pb::ReportKind::Unspecified) | Err(_) => {
                return Err(Invalid::ReportKind {
                    object: r.object.clone(),
                    value: r.report_kind,
                });
            }
        }
    }
    Ok((translation, read_errors))
}

/// The translation a snapshot carries, compiled, after checking its version.
impl TryFrom<&pb::Snapshot> for Snapshot {
    type Error = WireError;

    fn try_from(snapshot: &pb::Snapshot) -> Result<Self, WireError> {
        let actual = version_of(snapshot);
        if actual != snapshot.version {
            return Err(WireError::VersionMismatch {
                claimed: snapshot.version.clone(),
                actual,
            });
        }
        let (translation, read_errors) =
            content_from_wire(snapshot).map_err(|invalid| WireError::Invalid {
                version: snapshot.version.clone(),
                invalid,
            })?;
        let table = Arc::new(RouteTable::compile(&translation.config));
        Ok(Snapshot {
            translation,
            table,
            read_errors,
        })
    }
}

impl From<&RouterAck> for pb::RouterStatus {
    fn from(ack: &RouterAck) -> Self {
        pb::RouterStatus {
            router: ack.router.clone(),
            version: ack.version.clone(),
            address: ack.address.clone(),
            acknowledged_at: ack.acknowledged_at.clone(),
        }
    }
}

impl From<pb::RouterStatus> for RouterAck {
    fn from(status: pb::RouterStatus) -> Self {
        RouterAck {
            router: status.router,
            version: status.version,
            address: status.address,
            acknowledged_at: status.acknowledged_at,
        }
    }
}
