//! Reads: get one object, and list with selectors and `limit`/`continue` paging.

use serde_json::{Value, json};

use super::{Filter, ObjectKey, Store};
use crate::error::ApiError;
use crate::resources::ResourceType;

impl Store {
    /// GET one object.
    pub fn get(
        &self,
        rt: &ResourceType,
        ns: Option<&str>,
        name: &str,
    ) -> Result<nephrite_krm::Object, ApiError> {
        self.stored(&rt.storage(), &Self::key(rt, ns, name))
            .map(|o| Self::present(rt, o))
            .ok_or_else(|| ApiError::not_found(&rt.group_resource(), name))
    }

    /// LIST with selectors and paging. Continue tokens page through the current state (not a
    /// snapshot) in (namespace, name) order; the list's resourceVersion stays the first page's.
    pub fn list(
        &self,
        rt: &ResourceType,
        filter: &Filter,
        limit: Option<usize>,
        continue_token: Option<&str>,
    ) -> Result<Value, ApiError> {
        let (list_rv, after) = match continue_token.filter(|t| !t.is_empty()) {
            None => (self.rv, None),
            Some(token) => {
                let (rv, key) = ContinueToken::decode(token)?;
                (rv, Some(key))
            }
        };
        let empty = Default::default();
        let objects = self.objects.get(&rt.storage()).unwrap_or(&empty);
        let mut matching = objects
            .iter()
            .filter(|(k, _)| after.as_ref().is_none_or(|a| *k > a))
            .filter(|(_, o)| filter.matches(o));
        let mut items = Vec::new();
        let mut last_key = None;
        let limit = limit.filter(|l| *l > 0);
        for (k, o) in matching.by_ref() {
            items.push(Self::present(rt, o));
            last_key = Some(k.clone());
            if limit.is_some_and(|l| items.len() >= l) {
                break;
            }
        }
        let remaining = matching.count();
        let mut list_meta = json!({"resourceVersion": list_rv.to_string()});
        if remaining > 0
            && let (Some(key), Some(m)) = (last_key, list_meta.as_object_mut())
        {
            m.insert(
                "continue".into(),
                json!(ContinueToken::encode(list_rv, &key)),
            );
            // Kubernetes only counts the rest of an unfiltered list.
            if !filter.has_selectors() {
                m.insert("remainingItemCount".into(), json!(remaining));
            }
        }
        Ok(json!({
            "kind": format!("{}List", rt.kind),
            "apiVersion": rt.api_version(),
            "metadata": list_meta,
            "items": items,
        }))
    }
}

/// A `continue` token: the first page's resourceVersion and the last key sent, hex-encoded.
struct ContinueToken;

impl ContinueToken {
    fn encode(rv: u64, last: &ObjectKey) -> String {
        format!("{rv}\0{}\0{}", last.namespace, last.name)
            .bytes()
            .map(|b| format!("{b:02x}"))
            .collect()
    }

    fn decode(token: &str) -> Result<(u64, ObjectKey), ApiError> {
        let invalid = || ApiError::bad_request(format!("invalid continue token {token:?}"));
        let decoded = hex_decode(token).ok_or_else(invalid)?;
        let mut parts = decoded.splitn(3, '\0');
        let rv = parts.next().and_then(|r| r.parse::<u64>().ok());
        match (rv, parts.next(), parts.next()) {
            (Some(rv), Some(ns), Some(name)) => Ok((rv, ObjectKey::new(ns, name))),
            _ => Err(invalid()),
        }
    }
}

fn hex_decode(s: &str) -> Option<String> {
    if !s.len().is_multiple_of(2) {
        return None;
    }
    let bytes: Option<Vec<u8>> = (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(s.get(i..i + 2)?, 16).ok())
        .collect();
    String::from_utf8(bytes?).ok()
}
