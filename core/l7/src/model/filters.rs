//! What a policy does to a request besides choosing where it goes, beyond Octavia's L7 model:
//! header changes on the request and the response, a rewritten host and path, mirrors, and the
//! path change of a request-relative redirect ([`Action::Redirect`](super::Action::Redirect)).
//! Gateway API's filters are lowered into these; Ingresses and Routes never set them, and the
//! Octavia driver refuses a policy that has them (Octavia has no such fields).

use serde::{Deserialize, Serialize};

/// Header changes: remove, then set (replacing every value), then add (appended to an
/// existing value with `,`, else added).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct HeaderChanges {
    /// Replaced or added.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub set: Vec<(String, String)>,
    /// Appended or added.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub add: Vec<(String, String)>,
    /// Removed (names, any case).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub remove: Vec<String>,
}

impl HeaderChanges {
    /// Whether it changes nothing.
    pub fn is_empty(&self) -> bool {
        self.set.is_empty() && self.add.is_empty() && self.remove.is_empty()
    }

    /// Applies the changes to `headers` (names compared case-insensitively).
    pub fn apply(&self, headers: &mut Vec<(String, String)>) {
        change_headers(headers, &self.set, &self.add, &self.remove);
    }

    /// Whether a header `name` is touched (removed, set or added).
    pub fn touches(&self, name: &str) -> bool {
        self.remove.iter().any(|r| r.eq_ignore_ascii_case(name))
            || self.set.iter().any(|(n, _)| n.eq_ignore_ascii_case(name))
            || self.add.iter().any(|(n, _)| n.eq_ignore_ascii_case(name))
    }

    fn check(&self, what: &str) -> Result<(), String> {
        let names = self
            .set
            .iter()
            .chain(&self.add)
            .map(|(n, v)| (n, Some(v)))
            .chain(self.remove.iter().map(|n| (n, None)));
        for (name, value) in names {
            if !super::is_token(name) {
                return Err(format!("{what}: {name:?} is not a header name"));
            }
            if ["host", "content-length", "transfer-encoding", "connection"]
                .iter()
                .any(|h| h.eq_ignore_ascii_case(name))
            {
                return Err(format!("{what}: {name} may not be changed"));
            }
            if value.is_some_and(|v| v.chars().any(|c| c.is_control() && c != '\t')) {
                return Err(format!(
                    "{what}: the value of {name} holds a control character"
                ));
            }
        }
        Ok(())
    }
}

/// A path change (of a rewrite or a redirect); the query is kept either way.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PathChange {
    /// The whole path becomes this.
    Full(String),
    /// The element-wise prefix `matched` (the policy's PATH match, `""` for `/`) becomes
    /// `replacement`.
    Prefix {
        /// The prefix the policy matched, without trailing slash.
        matched: String,
        /// What replaces it (`/` strips it).
        replacement: String,
    },
}

impl PathChange {
    /// `path` (normalized, no query) changed. A path the prefix does not start (a policy whose
    /// rules do not guarantee it) is left as it is.
    pub fn apply(&self, path: &str) -> String {
        match self {
            PathChange::Full(full) => full.clone(),
            PathChange::Prefix {
                matched,
                replacement,
            } => {
                let Some(rest) = path.strip_prefix(matched.as_str()) else {
                    return path.to_owned();
                };
                let joined = format!("{}{rest}", replacement.trim_end_matches('/'));
                if joined.is_empty() {
                    "/".to_owned()
                } else {
                    joined
                }
            }
        }
    }

    /// `path` changed, followed by the query of `target` (if any).
    pub fn apply_to_target(&self, path: &str, target: &str) -> String {
        let changed = self.apply(path);
        match target.split_once('?') {
            Some((_, query)) => format!("{changed}?{query}"),
            None => changed,
        }
    }

    fn check(&self, what: &str) -> Result<(), String> {
        let (text, extra) = match self {
            PathChange::Full(full) => (full, None),
            PathChange::Prefix {
                matched,
                replacement,
            } => (replacement, Some(matched)),
        };
        for value in std::iter::once(text).chain(extra) {
            let bad = value
                .chars()
                .any(|c| c.is_whitespace() || c.is_control() || c == '?');
            if bad || (!value.is_empty() && !value.starts_with('/')) {
                return Err(format!("{what}: {value:?} is not an absolute path"));
            }
        }
        if text.is_empty() {
            return Err(format!("{what}: the new path is empty"));
        }
        Ok(())
    }
}

/// What a policy changes in the request it forwards and the answer the client gets, and where
/// copies go.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Filters {
    /// Request header changes (before forwarding).
    #[serde(default, skip_serializing_if = "HeaderChanges::is_empty")]
    pub request_headers: HeaderChanges,
    /// Response header changes (on the member's answer, or on a redirect).
    #[serde(default, skip_serializing_if = "HeaderChanges::is_empty")]
    pub response_headers: HeaderChanges,
    /// The `Host` the member sees.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rewrite_host: Option<String>,
    /// The path the member sees.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rewrite_path: Option<PathChange>,
    /// Where copies of the request go (their answers are dropped).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub mirrors: Vec<Mirror>,
}

/// A copy of a share of the requests sent to a pool.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Mirror {
    /// The pool's id.
    pub pool: String,
    /// The share mirrored is `numerator / denominator` (1/1 = every request).
    pub numerator: u32,
    /// See `numerator`; never 0.
    pub denominator: u32,
}

impl Filters {
    /// Whether it changes nothing.
    pub fn is_empty(&self) -> bool {
        self.request_headers.is_empty()
            && self.response_headers.is_empty()
            && self.rewrite_host.is_none()
            && self.rewrite_path.is_none()
            && self.mirrors.is_empty()
    }

    /// What is wrong, if anything.
    pub fn check(&self) -> Result<(), String> {
        self.request_headers.check("request header change")?;
        self.response_headers.check("response header change")?;
        if let Some(host) = &self.rewrite_host
            && (host.is_empty()
                || !host
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"-.:[]".contains(&b)))
        {
            return Err(format!("host rewrite {host:?} is not a host name"));
        }
        if let Some(path) = &self.rewrite_path {
            path.check("path rewrite")?;
        }
        for mirror in &self.mirrors {
            if mirror.pool.is_empty() {
                return Err("a mirror needs a pool".into());
            }
            if mirror.denominator == 0 || mirror.numerator > mirror.denominator {
                return Err(format!(
                    "mirror to {}: share {}/{} is not a fraction of 0 to 1",
                    mirror.pool, mirror.numerator, mirror.denominator
                ));
            }
        }
        Ok(())
    }

    pub(super) fn check_redirect_path(path: &PathChange) -> Result<(), String> {
        path.check("redirect path")
    }
}

/// Removes the headers named in `remove`, then replaces each of `set` (every value), then
/// appends each of `add` to an existing value with `,` or adds it; names compared
/// case-insensitively. The one implementation of Gateway API's header modifiers.
pub(crate) fn change_headers(
    headers: &mut Vec<(String, String)>,
    set: &[(String, String)],
    add: &[(String, String)],
    remove: &[String],
) {
    headers.retain(|(name, _)| !remove.iter().any(|r| r.eq_ignore_ascii_case(name)));
    for (name, value) in set {
        headers.retain(|(existing, _)| !existing.eq_ignore_ascii_case(name));
        headers.push((name.clone(), value.clone()));
    }
    for (name, value) in add {
        match headers
            .iter_mut()
            .find(|(existing, _)| existing.eq_ignore_ascii_case(name))
        {
            Some((_, existing)) => {
                existing.push(',');
                existing.push_str(value);
            }
            None => headers.push((name.clone(), value.clone())),
        }
    }
}
