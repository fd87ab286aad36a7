//! Deltas on the rules service: a new version as the changes from the version a Watch stream
//! sent before — listeners, certificates, passthrough hosts and reports when they changed,
//! pools by id — so a change to one Service's endpoints sends one pool, not the whole table.
//!
//! [`apply`] gives back exactly the new snapshot and checks it against the version it claims
//! (the version is a content hash), so a router never serves a wrongly patched table. Snapshots
//! always carry both listeners ([`to_wire`](super::to_wire) writes them); a listener that went
//! missing could not be said in a delta, and its hash check would refuse it.

use std::collections::BTreeMap;

use nephrite_proto::kuryr::l7::v1 as pb;

use super::{WireError, version_of};

#[cfg(test)]
mod tests;

/// The changes from `base` to `next`.
pub fn delta(base: &pb::Snapshot, next: &pb::Snapshot) -> pb::Delta {
    let changed = |a: &Option<pb::Listener>, b: &Option<pb::Listener>| {
        (a != b).then(|| b.clone().unwrap_or_default())
    };
    let before: BTreeMap<&str, &pb::Pool> = base.pools.iter().map(|p| (p.id.as_str(), p)).collect();
    let after: BTreeMap<&str, &pb::Pool> = next.pools.iter().map(|p| (p.id.as_str(), p)).collect();
    pb::Delta {
        base_version: base.version.clone(),
        version: next.version.clone(),
        http: changed(&base.http, &next.http),
        https: changed(&base.https, &next.https),
        pools: next
            .pools
            .iter()
            .filter(|pool| before.get(pool.id.as_str()) != Some(pool))
            .cloned()
            .collect(),
        removed_pools: base
            .pools
            .iter()
            .filter(|pool| !after.contains_key(pool.id.as_str()))
            .map(|pool| pool.id.clone())
            .collect(),
        certificates: (base.certificates != next.certificates).then(|| pb::Certificates {
            certificates: next.certificates.clone(),
        }),
        passthrough: (base.passthrough != next.passthrough).then(|| pb::PassthroughHosts {
            passthrough: next.passthrough.clone(),
        }),
        reports: (base.reports != next.reports).then(|| pb::Reports {
            reports: next.reports.clone(),
        }),
    }
}

/// `base` with `delta` applied, checked against `delta.version`.
pub fn apply(base: &pb::Snapshot, delta: &pb::Delta) -> Result<pb::Snapshot, WireError> {
    if base.version != delta.base_version {
        return Err(WireError::WrongBase {
            base: delta.base_version.clone(),
            version: delta.version.clone(),
            applied_to: base.version.clone(),
        });
    }
    let mut pools: BTreeMap<String, pb::Pool> = base
        .pools
        .iter()
        .map(|p| (p.id.clone(), p.clone()))
        .collect();
    for id in &delta.removed_pools {
        pools.remove(id);
    }
    for pool in &delta.pools {
        pools.insert(pool.id.clone(), pool.clone());
    }
    let next = pb::Snapshot {
        version: delta.version.clone(),
        http: delta.http.clone().or_else(|| base.http.clone()),
        https: delta.https.clone().or_else(|| base.https.clone()),
        pools: pools.into_values().collect(),
        certificates: delta
            .certificates
            .as_ref()
            .map_or_else(|| base.certificates.clone(), |c| c.certificates.clone()),
        passthrough: delta
            .passthrough
            .as_ref()
            .map_or_else(|| base.passthrough.clone(), |p| p.passthrough.clone()),
        reports: delta
            .reports
            .as_ref()
            .map_or_else(|| base.reports.clone(), |r| r.reports.clone()),
    };
    let actual = version_of(&next);
    if actual != delta.version {
        return Err(WireError::VersionMismatch {
            claimed: delta.version.clone(),
            actual,
        });
    }
    Ok(next)
}
