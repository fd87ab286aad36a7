//! Label keys and values: Kubernetes' validation rules and the [`LabelLookup`] trait that
//! selectors match against.

use std::collections::{BTreeMap, HashMap};
use std::hash::BuildHasher;

use indexmap::IndexMap;

/// A label key or value that breaks Kubernetes' rules.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LabelError {
    /// The key is not `[prefix/]name` with a DNS-subdomain prefix and a qualified name.
    #[error("invalid label key {key:?}: {reason}")]
    InvalidKey {
        /// The key as given.
        key: String,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// The value is longer than 63 characters or has characters a label value may not have.
    #[error("invalid value {value:?} for label {key:?}: {reason}")]
    InvalidValue {
        /// The key the value belongs to.
        key: String,
        /// The value as given.
        value: String,
        /// What is wrong with it.
        reason: &'static str,
    },
}

const NAME_CHARS: &str = "must be 63 characters or less, consist of alphanumeric characters, '-', '_' or '.', and start and end with an alphanumeric character";

/// Checks a label (or annotation) key: an optional prefix that is a lowercase DNS subdomain of at
/// most 253 characters followed by `/`, then a name of 1–63 characters made of alphanumerics,
/// `-`, `_` and `.`, starting and ending with an alphanumeric.
///
/// ```
/// use nephrite_krm::label::validate_label_key;
/// assert!(validate_label_key("nephio.org/prepared").is_ok());
/// assert!(validate_label_key("app").is_ok());
/// assert!(validate_label_key("-app").is_err());
/// assert!(validate_label_key("Example.com/app").is_err());
/// ```
pub fn validate_label_key(key: &str) -> Result<(), LabelError> {
    let invalid = |reason| {
        Err(LabelError::InvalidKey {
            key: key.to_owned(),
            reason,
        })
    };
    let (prefix, name) = match key.split_once('/') {
        Some((prefix, name)) => (Some(prefix), name),
        None => (None, key),
    };
    if let Some(prefix) = prefix {
        if prefix.is_empty() {
            return invalid("the prefix before '/' is empty");
        }
        if prefix.len() > 253 {
            return invalid("the prefix must be 253 characters or less");
        }
        if !is_dns_subdomain(prefix) {
            return invalid(
                "the prefix must be a lowercase DNS subdomain: labels of 'a-z', '0-9' and '-', starting and ending with an alphanumeric, joined by '.'",
            );
        }
    }
    if name.is_empty() {
        return invalid("the name part is empty");
    }
    if !is_qualified_name(name) {
        return invalid(if name.contains('/') {
            "a key may contain at most one '/'"
        } else {
            "the name part must be 63 characters or less, consist of alphanumeric characters, '-', '_' or '.', and start and end with an alphanumeric character"
        });
    }
    Ok(())
}

/// Checks a label value: empty, or at most 63 characters made of alphanumerics, `-`, `_` and
/// `.`, starting and ending with an alphanumeric. `key` only names the label in the error.
pub fn validate_label_value(key: &str, value: &str) -> Result<(), LabelError> {
    if value.is_empty() || is_qualified_name(value) {
        Ok(())
    } else {
        Err(LabelError::InvalidValue {
            key: key.to_owned(),
            value: value.to_owned(),
            reason: NAME_CHARS,
        })
    }
}

/// Checks every key and value of a label map.
pub fn validate_labels<'a>(
    labels: impl IntoIterator<Item = (&'a String, &'a String)>,
) -> Result<(), LabelError> {
    for (key, value) in labels {
        validate_label_key(key)?;
        validate_label_value(key, value)?;
    }
    Ok(())
}

fn is_qualified_name(name: &str) -> bool {
    let bytes = name.as_bytes();
    match (bytes.first(), bytes.last()) {
        (Some(first), Some(last)) => {
            bytes.len() <= 63
                && first.is_ascii_alphanumeric()
                && last.is_ascii_alphanumeric()
                && bytes
                    .iter()
                    .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
        }
        _ => false,
    }
}

fn is_dns_subdomain(prefix: &str) -> bool {
    prefix.split('.').all(|label| {
        let bytes = label.as_bytes();
        let edge = |b: &u8| b.is_ascii_lowercase() || b.is_ascii_digit();
        match (bytes.first(), bytes.last()) {
            (Some(first), Some(last)) => {
                edge(first) && edge(last) && bytes.iter().all(|b| edge(b) || *b == b'-')
            }
            _ => false,
        }
    })
}

/// Something labels can be looked up in: label maps and objects. Selectors match against it.
pub trait LabelLookup {
    /// The value of label `key`, if the label is present.
    fn label_value(&self, key: &str) -> Option<&str>;
}

impl<S: BuildHasher> LabelLookup for IndexMap<String, String, S> {
    fn label_value(&self, key: &str) -> Option<&str> {
        self.get(key).map(String::as_str)
    }
}

impl<S: BuildHasher> LabelLookup for HashMap<String, String, S> {
    fn label_value(&self, key: &str) -> Option<&str> {
        self.get(key).map(String::as_str)
    }
}

impl LabelLookup for BTreeMap<String, String> {
    fn label_value(&self, key: &str) -> Option<&str> {
        self.get(key).map(String::as_str)
    }
}

impl LabelLookup for [(&str, &str)] {
    fn label_value(&self, key: &str) -> Option<&str> {
        self.iter().find(|(k, _)| *k == key).map(|(_, v)| *v)
    }
}

impl<const N: usize> LabelLookup for [(&str, &str); N] {
    fn label_value(&self, key: &str) -> Option<&str> {
        self.as_slice().label_value(key)
    }
}

impl<T: LabelLookup + ?Sized> LabelLookup for &T {
    fn label_value(&self, key: &str) -> Option<&str> {
        (**self).label_value(key)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys() {
        for good in [
            "a",
            "app.kubernetes.io/name",
            "nephio.org/prepare",
            "A_b-c.D",
            "x/y",
            "0",
            &"a".repeat(63),
            &format!("{}/n", "a".repeat(253)),
        ] {
            assert_eq!(validate_label_key(good), Ok(()), "{good:?}");
        }
        for bad in [
            "",
            "/a",
            "a/",
            "a/b/c",
            "-a",
            "a-",
            "a b",
            "Nephio.org/x",
            "nephio..org/x",
            "-x.org/y",
            "é",
            &"a".repeat(64),
            &format!("{}/n", "a".repeat(254)),
        ] {
            let err = validate_label_key(bad).unwrap_err();
            assert!(err.to_string().contains(&format!("{bad:?}")), "{err}");
        }
    }

    #[test]
    fn values() {
        for good in ["", "a", "1.0", "v1_2-3", &"z".repeat(63)] {
            assert_eq!(validate_label_value("k", good), Ok(()), "{good:?}");
        }
        for bad in ["-", "a ", "a/b", ".a", &"z".repeat(64), "yes!"] {
            let err = validate_label_value("k", bad).unwrap_err();
            assert!(matches!(err, LabelError::InvalidValue { .. }), "{bad:?}");
        }
    }

    #[test]
    fn lookups() {
        let pairs = [("a", "1"), ("b", "2")];
        assert_eq!(pairs.label_value("b"), Some("2"));
        assert_eq!(pairs.label_value("c"), None);
        let map: BTreeMap<String, String> = [("a".to_owned(), "1".to_owned())].into();
        assert_eq!(map.label_value("a"), Some("1"));
        fn owned(labels: impl LabelLookup) -> Option<String> {
            labels.label_value("a").map(str::to_owned)
        }
        assert_eq!(owned(&map), Some("1".to_owned()));
    }
}
