//! A policy's filters and the path change of a redirect, on the wire and back. An unset
//! `Filters` message is no filters; a `PathChange` without its `change` is refused, naming the
//! field.

use nephrite_l7::{Filters, HeaderChanges, Mirror, PathChange};
use nephrite_proto::kuryr::l7::v1 as pb;

use super::Invalid;

pub(super) fn path_to_wire(change: &PathChange) -> pb::PathChange {
    use pb::path_change::Change;
    pb::PathChange {
        change: Some(match change {
            PathChange::Full(full) => Change::Full(full.clone()),
            PathChange::Prefix {
                matched,
                replacement,
            } => Change::Prefix(pb::PrefixChange {
                matched: matched.clone(),
                replacement: replacement.clone(),
            }),
        }),
    }
}

pub(super) fn path_from_wire(
    policy: &pb::Policy,
    field: &'static str,
    change: &pb::PathChange,
) -> Result<PathChange, Invalid> {
    use pb::path_change::Change;
    match &change.change {
        Some(Change::Full(full)) => Ok(PathChange::Full(full.clone())),
        Some(Change::Prefix(prefix)) => Ok(PathChange::Prefix {
            matched: prefix.matched.clone(),
            replacement: prefix.replacement.clone(),
        }),
        None => Err(Invalid::Field {
            policy: policy.name.clone(),
            field,
            message: "no change".into(),
        }),
    }
}

fn headers_to_wire(changes: &HeaderChanges) -> Option<pb::HeaderChanges> {
    let pairs = |list: &[(String, String)]| {
        list.iter()
            .map(|(name, value)| pb::Header {
                name: name.clone(),
                value: value.clone(),
            })
            .collect()
    };
    (!changes.is_empty()).then(|| pb::HeaderChanges {
        set: pairs(&changes.set),
        add: pairs(&changes.add),
        remove: changes.remove.clone(),
    })
}

fn headers_from_wire(changes: Option<&pb::HeaderChanges>) -> HeaderChanges {
    let Some(changes) = changes else {
        return HeaderChanges::default();
    };
    let pairs = |list: &[pb::Header]| {
        list.iter()
            .map(|h| (h.name.clone(), h.value.clone()))
            .collect()
    };
    HeaderChanges {
        set: pairs(&changes.set),
        add: pairs(&changes.add),
        remove: changes.remove.clone(),
    }
}

/// `None` for no filters, so a policy without them encodes as before they existed.
pub(super) fn filters_to_wire(filters: &Filters) -> Option<pb::Filters> {
    (!filters.is_empty()).then(|| pb::Filters {
        request_headers: headers_to_wire(&filters.request_headers),
        response_headers: headers_to_wire(&filters.response_headers),
        rewrite_host: filters.rewrite_host.clone(),
        rewrite_path: filters.rewrite_path.as_ref().map(path_to_wire),
        mirrors: filters
            .mirrors
            .iter()
            .map(|m| pb::Mirror {
                pool: m.pool.clone(),
                numerator: m.numerator,
                denominator: m.denominator,
            })
            .collect(),
    })
}

pub(super) fn filters_from_wire(
    policy: &pb::Policy,
    filters: &pb::Filters,
) -> Result<Filters, Invalid> {
    Ok(Filters {
        request_headers: headers_from_wire(filters.request_headers.as_ref()),
        response_headers: headers_from_wire(filters.response_headers.as_ref()),
        rewrite_host: filters.rewrite_host.clone(),
        rewrite_path: filters
            .rewrite_path
            .as_ref()
            .map(|p| path_from_wire(policy, "filters.rewrite_path", p))
            .transpose()?,
        mirrors: filters
            .mirrors
            .iter()
            .map(|m| Mirror {
                pool: m.pool.clone(),
                numerator: m.numerator,
                denominator: m.denominator,
            })
            .collect(),
    })
}
