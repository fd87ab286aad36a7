//! The rules on the wire: a [`Translation`] as a `kuryr.l7.v1.Snapshot` and back, and the
//! snapshot's version.
//!
//! The version is the lowercase hex SHA-256 of the snapshot's protobuf encoding with `version`
//! empty. Everything in the snapshot is ordered (pools by id, passthrough by host, reports
//! sorted) and the message has no map fields, so the encoding — and the version — depends only on
//! the translation's content: any controller, restarted or not, names the same rules the same
//! way, and a router can check that what it received is what the version says.

use std::sync::Arc;

use nephrite_l7::{
    Action, Certificate, Conflict, L7Config, Listener, Member, Policy, Pool, PoolProtocol,
    Rejection, RouteTable, Rule, Translation, Warning,
};
use nephrite_proto::kuryr::l7::v1 as pb;
use prost::Message as _;
use sha2::{Digest as _, Sha256};

use crate::source::Snapshot;

pub mod delta;

#[cfg(test)]
mod tests;

/// Why a received snapshot cannot be served.
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
    #[error("snapshot {version}: {what}")]
    Invalid {
        /// The version in the message.
        version: String,
        /// What is wrong.
        what: String,
    },
}

/// The version of `snapshot`'s content (its `version` field is ignored).
pub fn version_of(snapshot: &pb::Snapshot) -> String {
    let mut unversioned = snapshot.clone();
    unversioned.version.clear();
    let digest = Sha256::digest(unversioned.encode_to_vec());
    digest.iter().map(|byte| format!("{byte:02x}")).collect()
}

/// A version shortened for people (the first 12 hex digits).
pub fn short(version: &str) -> &str {
    version.get(..12).unwrap_or(version)
}

fn action_fields(action: &Action) -> (&'static str, String, String, u32) {
    match action {
        Action::Reject => ("REJECT", String::new(), String::new(), 0),
        Action::RedirectToUrl { url, code } => (
            "REDIRECT_TO_URL",
            String::new(),
            url.clone(),
            u32::from(*code),
        ),
        Action::RedirectPrefix { prefix, code } => (
            "REDIRECT_PREFIX",
            String::new(),
            prefix.clone(),
            u32::from(*code),
        ),
        Action::RedirectToPool { pool } => ("REDIRECT_TO_POOL", pool.clone(), String::new(), 0),
    }
}

fn listener_to_wire(listener: &Listener) -> pb::Listener {
    pb::Listener {
        policies: listener
            .policies()
            .iter()
            .map(|policy| {
                let (action, redirect_pool, redirect_target, redirect_code) =
                    action_fields(&policy.action);
                pb::Policy {
                    name: policy.name.clone(),
                    position: u32::try_from(policy.position).unwrap_or(u32::MAX),
                    action: action.to_owned(),
                    redirect_pool,
                    redirect_target,
                    redirect_code,
                    rules: policy
                        .rules
                        .iter()
                        .map(|rule| pb::Rule {
                            r#type: rule.rule_type.as_str().to_owned(),
                            compare_type: rule.compare_type.as_str().to_owned(),
                            key: rule.key.clone(),
                            value: rule.value.clone(),
                            invert: rule.invert,
                        })
                        .collect(),
                    origin: policy.origin.clone(),
                }
            })
            .collect(),
        default_pool: listener.default_pool.clone().unwrap_or_default(),
        no_match_status: u32::from(listener.no_match_status),
    }
}

fn report(kind: &str, object: &str, origin: &str, message: &str) -> pb::Report {
    pb::Report {
        kind: kind.to_owned(),
        object: object.to_owned(),
        origin: origin.to_owned(),
        message: message.to_owned(),
        ..pb::Report::default()
    }
}

/// The kinds of [`pb::Report`].
pub mod report_kind {
    /// An object refused as a whole.
    pub const REJECTED: &str = "REJECTED";
    /// A (host, path) lost to an older object.
    pub const CONFLICT: &str = "CONFLICT";
    /// Served, but not as asked.
    pub const WARNING: &str = "WARNING";
    /// Left out on purpose (another IngressClass, …).
    pub const IGNORED: &str = "IGNORED";
    /// A file or document of the source that could not be read.
    pub const ERROR: &str = "ERROR";
}

/// The translation (and what could not be read) as a snapshot, with its version.
pub fn to_wire(translation: &Translation, read_errors: &[String]) -> pb::Snapshot {
    use report_kind::*;
    let config = &translation.config;
    let mut reports: Vec<pb::Report> = Vec::new();
    for r in &translation.rejections {
        reports.push(report(REJECTED, &r.object, &r.origin, &r.reason));
    }
    for c in &translation.conflicts {
        reports.push(pb::Report {
            kind: CONFLICT.to_owned(),
            object: c.loser.clone(),
            origin: c.origin.clone(),
            message: String::new(),
            winner: c.winner.clone(),
            host: c.host.clone(),
            path: c.path.clone(),
        });
    }
    for w in &translation.warnings {
        reports.push(report(WARNING, &w.object, &w.origin, &w.message));
    }
    for i in &translation.ignored {
        reports.push(report(IGNORED, &i.object, &i.origin, &i.reason));
    }
    for e in read_errors {
        reports.push(report(ERROR, "", "", e));
    }
    reports.sort_by(|a, b| {
        (&a.kind, &a.object, &a.host, &a.path, &a.message, &a.origin)
            .cmp(&(&b.kind, &b.object, &b.host, &b.path, &b.message, &b.origin))
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

fn action_from_wire(policy: &pb::Policy) -> Result<Action, String> {
    let code = || {
        u16::try_from(policy.redirect_code)
            .map_err(|_| format!("redirect code {} out of range", policy.redirect_code))
    };
    Ok(match policy.action.as_str() {
        "REJECT" => Action::Reject,
        "REDIRECT_TO_URL" => Action::RedirectToUrl {
            url: policy.redirect_target.clone(),
            code: code()?,
        },
        "REDIRECT_PREFIX" => Action::RedirectPrefix {
            prefix: policy.redirect_target.clone(),
            code: code()?,
        },
        "REDIRECT_TO_POOL" => Action::RedirectToPool {
            pool: policy.redirect_pool.clone(),
        },
        other => return Err(format!("unknown action {other:?}")),
    })
}

fn listener_from_wire(listener: Option<&pb::Listener>) -> Result<Listener, String> {
    let Some(listener) = listener else {
        return Ok(Listener::new(404));
    };
    let status = u16::try_from(listener.no_match_status)
        .map_err(|_| format!("no-match status {} out of range", listener.no_match_status))?;
    let mut out = Listener::new(status);
    out.default_pool = Some(listener.default_pool.clone()).filter(|p| !p.is_empty());
    let mut policies: Vec<&pb::Policy> = listener.policies.iter().collect();
    policies.sort_by_key(|p| p.position);
    for policy in policies {
        let rules = policy
            .rules
            .iter()
            .map(|rule| {
                Ok(Rule {
                    rule_type: rule.r#type.parse().map_err(|e| format!("{e}"))?,
                    compare_type: rule.compare_type.parse().map_err(|e| format!("{e}"))?,
                    key: rule.key.clone(),
                    value: rule.value.clone(),
                    invert: rule.invert,
                })
            })
            .collect::<Result<Vec<_>, String>>()
            .map_err(|e| format!("policy {}: {e}", policy.name))?;
        let mut model = Policy::new(policy.name.clone(), action_from_wire(policy)?, rules);
        model.origin = policy.origin.clone();
        out.insert_policy(model, None)
            .map_err(|err| err.to_string())?;
    }
    Ok(out)
}

/// The translation a snapshot carries, compiled, after checking its version.
pub fn from_wire(snapshot: &pb::Snapshot) -> Result<Snapshot, WireError> {
    let actual = version_of(snapshot);
    if actual != snapshot.version {
        return Err(WireError::VersionMismatch {
            claimed: snapshot.version.clone(),
            actual,
        });
    }
    let invalid = |what: String| WireError::Invalid {
        version: snapshot.version.clone(),
        what,
    };
    let mut config = L7Config {
        http: listener_from_wire(snapshot.http.as_ref()).map_err(invalid)?,
        https: listener_from_wire(snapshot.https.as_ref()).map_err(invalid)?,
        ..L7Config::default()
    };
    for pool in &snapshot.pools {
        let members = pool
            .members
            .iter()
            .map(|m| {
                Ok(Member {
                    address: m.address.parse().map_err(|_| {
                        invalid(format!(
                            "pool {}: bad member address {:?}",
                            pool.id, m.address
                        ))
                    })?,
                    weight: m.weight,
                })
            })
            .collect::<Result<Vec<_>, WireError>>()?;
        let protocol = if pool.https {
            PoolProtocol::Https {
                ca_pem: pool.ca_pem.clone(),
            }
        } else {
            PoolProtocol::Http
        };
        config.pools.insert(
            pool.id.clone(),
            Pool {
                id: pool.id.clone(),
                members,
                protocol,
            },
        );
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
        match r.kind.as_str() {
            report_kind::REJECTED => translation.rejections.push(rejection()),
            report_kind::IGNORED => translation.ignored.push(rejection()),
            report_kind::ERROR => read_errors.push(r.message.clone()),
            report_kind::CONFLICT => translation.conflicts.push(Conflict {
                host: r.host.clone(),
                path: r.path.clone(),
                winner: r.winner.clone(),
                loser: r.object.clone(),
                origin: r.origin.clone(),
            }),
            _ => translation.warnings.push(Warning {
                object: r.object.clone(),
                origin: r.origin.clone(),
                message: r.message.clone(),
            }),
        }
    }
    let table = Arc::new(RouteTable::compile(&translation.config));
    Ok(Snapshot {
        translation,
        table,
        read_errors,
    })
}
