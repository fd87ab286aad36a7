//! Kubernetes' object-metadata validation (`ValidateObjectMeta`), so that what a real cluster
//! refuses is refused here too, with the same 422 Invalid wording:
//!
//! | what | rule |
//! |---|---|
//! | `metadata.name` of a Namespace | RFC 1123 label, at most 63 characters |
//! | `metadata.name` of a Service | RFC 1035 label (starts with a letter), at most 63 characters |
//! | `metadata.name` of an RBAC object | a path segment: not `.` or `..`, no `/` or `%` |
//! | `metadata.name` of anything else | RFC 1123 subdomain, at most 253 characters |
//! | `metadata.labels` | keys as qualified names, values as label values (`qualified`) |
//! | `metadata.annotations` | keys as qualified names (case-insensitive), 256 KiB in all |
//! | `metadata.finalizers` | qualified names |
//! | `metadata.ownerReferences` | apiVersion, kind, name and uid not empty |

use nephrite_krm::ObjectMeta;

use super::qualified::{key_problems, value_problems};
use crate::error::{ApiError, FieldProblem};
use crate::resources::{self, ResourceType};

/// The longest name a generated name's prefix keeps (63 minus the five random characters).
pub(super) const MAX_GENERATED_PREFIX: usize = 58;

/// The most bytes all annotations of an object may take (keys plus values).
const MAX_ANNOTATIONS_BYTES: usize = 256 * 1024;

const SUBDOMAIN_MSG: &str = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')";
const LABEL_MSG: &str = "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')";
const DNS1035_MSG: &str = "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')";

const PATH_SEGMENT_MSG: &str = "may not be '.' or '..' and may not contain '/' or '%'";

/// Which rule a kind's names follow.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum NameRule {
    /// RFC 1123 subdomain: lowercase alphanumerics, `-` and `.`, at most 253 characters.
    Subdomain,
    /// RFC 1123 label: lowercase alphanumerics and `-`, at most 63 characters.
    Label,
    /// RFC 1035 label: an RFC 1123 label that starts with a letter.
    Dns1035Label,
    /// A path segment (RBAC objects, e.g. `system:controller:x`): not `.` or `..`, no `/` or
    /// `%`.
    PathSegment,
}

impl NameRule {
    /// The rule for a resource's names, as Kubernetes' validation picks it.
    pub fn of(rt: &ResourceType) -> Self {
        match (rt.crd.is_none(), rt.group.as_str(), rt.plural.as_str()) {
            (true, "", "namespaces") => Self::Label,
            (true, "", "services") => Self::Dns1035Label,
            (true, resources::RBAC_GROUP, _) => Self::PathSegment,
            _ => Self::Subdomain,
        }
    }

    /// Every problem with `name` under this rule, worded as Kubernetes words them.
    pub fn problems(self, name: &str) -> Vec<String> {
        let (max, ok, msg) = match self {
            Self::Subdomain => (253, is_subdomain(name), SUBDOMAIN_MSG),
            Self::Label => (63, is_label(name), LABEL_MSG),
            Self::Dns1035Label => (
                63,
                is_label(name) && name.starts_with(|c: char| c.is_ascii_lowercase()),
                DNS1035_MSG,
            ),
            Self::PathSegment => (
                usize::MAX,
                !matches!(name, "." | "..") && !name.contains(['/', '%']),
                PATH_SEGMENT_MSG,
            ),
        };
        let mut out = Vec::new();
        if name.len() > max {
            out.push(format!("must be no more than {max} characters"));
        }
        if !ok {
            out.push(msg.to_string());
        }
        out
    }
}

fn is_label(s: &str) -> bool {
    let b = s.as_bytes();
    let edge = |c: &u8| c.is_ascii_lowercase() || c.is_ascii_digit();
    match (b.first(), b.last()) {
        (Some(first), Some(last)) => {
            edge(first) && edge(last) && b.iter().all(|c| edge(c) || *c == b'-')
        }
        _ => false,
    }
}

fn is_subdomain(s: &str) -> bool {
    s.split('.').all(is_label)
}

/// The problems with a new object's name.
pub(super) fn name_problems(rt: &ResourceType, name: &str) -> Vec<FieldProblem> {
    NameRule::of(rt)
        .problems(name)
        .into_iter()
        .map(|p| FieldProblem::new("metadata.name", format!("Invalid value: {name:?}: {p}")))
        .collect()
}

/// The problems with an object's labels, annotations, finalizers and owner references.
pub(super) fn metadata_problems(meta: &ObjectMeta) -> Vec<FieldProblem> {
    let mut out = Vec::new();
    let mut invalid = |field: &str, value: &str, problems: Vec<String>| {
        for problem in problems {
            out.push(FieldProblem::new(
                field,
                format!("Invalid value: {value:?}: {problem}"),
            ));
        }
    };
    for (key, value) in meta.labels.iter().flatten() {
        invalid("metadata.labels", key, key_problems(key));
        invalid("metadata.labels", value, value_problems(value));
    }
    let mut total = 0;
    for (key, value) in meta.annotations.iter().flatten() {
        total += key.len() + value.len();
        invalid(
            "metadata.annotations",
            key,
            key_problems(&key.to_ascii_lowercase()),
        );
    }
    for finalizer in meta.details().finalizers.iter().flatten() {
        invalid("metadata.finalizers", finalizer, key_problems(finalizer));
    }
    for owner in meta.details().owner_references.iter().flatten() {
        for (field, value, what) in [
            ("apiVersion", &owner.api_version, "version"),
            ("kind", &owner.kind, "kind"),
            ("name", &owner.name, "name"),
            ("uid", &owner.uid, "uid"),
        ] {
            if value.is_empty() {
                out.push(FieldProblem::new(
                    format!("metadata.ownerReferences.{field}"),
                    format!("Invalid value: \"\": {what} must not be empty"),
                ));
            }
        }
    }
    if total > MAX_ANNOTATIONS_BYTES {
        out.push(FieldProblem::new(
            "metadata.annotations",
            format!("Too long: must have at most {MAX_ANNOTATIONS_BYTES} bytes"),
        ));
    }
    out
}

/// 422 Invalid naming every problem, or nothing when there are none.
pub(super) fn refuse(
    rt: &ResourceType,
    name: &str,
    problems: &[FieldProblem],
) -> Result<(), ApiError> {
    if problems.is_empty() {
        Ok(())
    } else {
        Err(ApiError::invalid_fields(
            &rt.qualified_kind(),
            name,
            problems,
        ))
    }
}

#[cfg(test)]
mod tests;
