//! Kubernetes' qualified-name and label-value rules with Kubernetes' wording (apimachinery's
//! `IsQualifiedName` as label keys, annotation keys, finalizers and selector keys are checked
//! with it, and `IsValidLabelValue`): each problem is one `Invalid value` cause, and a key can
//! have several (`""` is both empty and not matching the pattern).

/// What a name part must look like.
const NAME_MSG: &str = "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')";

/// What a label value must look like.
const VALUE_MSG: &str = "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')";

/// What a key's prefix must look like.
const PREFIX_MSG: &str = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')";

/// The longest name part of a key, and the longest label value.
const MAX_NAME: usize = 63;
/// The longest prefix of a key.
const MAX_PREFIX: usize = 253;

fn is_name(s: &str) -> bool {
    let b = s.as_bytes();
    let edge = |c: &u8| c.is_ascii_alphanumeric();
    match (b.first(), b.last()) {
        (Some(first), Some(last)) => {
            edge(first) && edge(last) && b.iter().all(|c| edge(c) || b"-_.".contains(c))
        }
        _ => false,
    }
}

fn is_subdomain(s: &str) -> bool {
    s.split('.').all(|label| {
        let b = label.as_bytes();
        let edge = |c: &u8| c.is_ascii_lowercase() || c.is_ascii_digit();
        matches!((b.first(), b.last()), (Some(f), Some(l)) if edge(f) && edge(l))
            && b.iter().all(|c| edge(c) || *c == b'-')
    })
}

/// The problems with a qualified name (`[prefix/]name`), worded as Kubernetes words them.
pub(crate) fn key_problems(key: &str) -> Vec<String> {
    let mut out = Vec::new();
    let parts: Vec<&str> = key.split('/').collect();
    let name = match parts.as_slice() {
        [name] => *name,
        [prefix, name] => {
            if prefix.is_empty() {
                out.push("prefix part must be non-empty".to_string());
            } else {
                if prefix.len() > MAX_PREFIX {
                    out.push(format!(
                        "prefix part must be no more than {MAX_PREFIX} bytes"
                    ));
                }
                if !is_subdomain(prefix) {
                    out.push(format!("prefix part {PREFIX_MSG}"));
                }
            }
            *name
        }
        _ => {
            return vec![format!(
                "a valid label key {NAME_MSG} with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"
            )];
        }
    };
    if name.is_empty() {
        out.push("name part must be non-empty".to_string());
    } else if name.len() > MAX_NAME {
        out.push(format!("name part must be no more than {MAX_NAME} bytes"));
    }
    if !is_name(name) {
        out.push(format!("name part {NAME_MSG}"));
    }
    out
}

/// The problems with a label value, worded as Kubernetes words them.
pub(crate) fn value_problems(value: &str) -> Vec<String> {
    let mut out = Vec::new();
    if value.len() > MAX_NAME {
        out.push(format!("must be no more than {MAX_NAME} bytes"));
    }
    if !value.is_empty() && !is_name(value) {
        out.push(VALUE_MSG.to_string());
    }
    out
}

#[cfg(test)]
mod tests;
