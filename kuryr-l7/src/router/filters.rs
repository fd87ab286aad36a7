//! What a policy's [`Filters`] do on the embedded router: request and response header
//! changes (on the head as written for the member, and on the member's answer or a redirect),
//! and mirrors. Rewrites of host and path are applied where the member's head is written
//! ([`Forwarding::rewrite_host`], the target [`route`](super::proxy::route) computes).
//!
//! A mirror gets a copy of the request head, sent from a task of its own to a member of the
//! mirror's pool: the main request never waits for it, and the mirror's answer is read and
//! dropped. A request with a body is not mirrored (the body streams to the member once, it is
//! not buffered for a copy). A mirror of `numerator / denominator` takes that share of the
//! requests reaching it, spread evenly by a counter.

use std::sync::atomic::{AtomicU64, Ordering};

use bytes::Bytes;
use http::header::{HeaderMap, HeaderName, HeaderValue};
use http_body_util::{BodyExt as _, Empty};
use nephrite_l7::{Filters, HeaderChanges};

use super::RouterState;
use super::upstream::head::{Forwarding, RequestFraming, write_request_head_from};

/// Headers as (name, value) bytes, owned.
pub(crate) type OwnedHeaders = Vec<(Vec<u8>, Vec<u8>)>;

/// `headers` with `changes` applied: remove, set, then add (appended with `,` to the first
/// value of a name, else added). Names compare case-insensitively.
pub(crate) fn changed<'h>(
    headers: impl Iterator<Item = (&'h [u8], &'h [u8])>,
    changes: &HeaderChanges,
) -> OwnedHeaders {
    let named = |n: &[u8], name: &str| n.eq_ignore_ascii_case(name.as_bytes());
    let mut out: OwnedHeaders = headers
        .filter(|(n, _)| !changes.remove.iter().any(|r| named(n, r)))
        .map(|(n, v)| (n.to_vec(), v.to_vec()))
        .collect();
    for (name, value) in &changes.set {
        out.retain(|(n, _)| !named(n, name));
        out.push((name.as_bytes().to_vec(), value.as_bytes().to_vec()));
    }
    for (name, value) in &changes.add {
        match out.iter_mut().find(|(n, _)| named(n, name)) {
            Some((_, existing)) => {
                existing.push(b',');
                existing.extend_from_slice(value.as_bytes());
            }
            None => out.push((name.as_bytes().to_vec(), value.as_bytes().to_vec())),
        }
    }
    out
}

/// [`changed`] on a header map (names and values the model checked; one that still does not
/// fit a header is skipped).
pub(crate) fn change_map(headers: &mut HeaderMap, changes: &HeaderChanges) {
    if changes.is_empty() {
        return;
    }
    for name in &changes.remove {
        if let Ok(name) = HeaderName::from_bytes(name.as_bytes()) {
            headers.remove(name);
        }
    }
    let parse = |name: &str, value: &str| {
        Some((
            HeaderName::from_bytes(name.as_bytes()).ok()?,
            HeaderValue::from_str(value).ok()?,
        ))
    };
    for (name, value) in &changes.set {
        if let Some((name, value)) = parse(name, value) {
            headers.insert(name, value);
        }
    }
    for (name, value) in &changes.add {
        let joined = match headers.get(name.as_str()).map(HeaderValue::as_bytes) {
            Some(existing) => {
                let mut joined = existing.to_vec();
                joined.push(b',');
                joined.extend_from_slice(value.as_bytes());
                HeaderValue::from_bytes(&joined).ok()
            }
            None => HeaderValue::from_str(value).ok(),
        };
        if let (Ok(name), Some(value)) = (HeaderName::from_bytes(name.as_bytes()), joined) {
            headers.insert(name, value);
        }
    }
}

/// Requests that reached a mirror, for its share.
static MIRROR_TURNS: AtomicU64 = AtomicU64::new(0);

/// Sends copies of a body-less request (`method target`, `headers` as the member gets them)
/// to `filters`' mirrors, each from a task of its own.
pub(crate) fn mirror<'h, I>(
    state: &RouterState,
    filters: &Filters,
    method: &str,
    target: &str,
    headers: I,
    forwarding: &Forwarding<'_>,
) where
    I: Iterator<Item = (&'h [u8], &'h [u8])> + Clone,
{
    for mirror in &filters.mirrors {
        let turn = MIRROR_TURNS.fetch_add(1, Ordering::Relaxed);
        if turn % u64::from(mirror.denominator.max(1)) >= u64::from(mirror.numerator) {
            continue;
        }
        let Some(pool) = state.pools.get(&mirror.pool) else {
            continue;
        };
        let Some(member) = pool.balancer.pick() else {
            continue;
        };
        let Some(connections) = state.connections.get(&member).cloned() else {
            continue;
        };
        let mut head = Vec::with_capacity(512);
        let copy = Forwarding {
            upgrade: None,
            ..*forwarding
        };
        write_request_head_from(
            &mut head,
            method,
            target,
            headers.clone(),
            &copy,
            RequestFraming::Empty,
        );
        let head_request = method == "HEAD";
        let pool_id = mirror.pool.clone();
        tokio::spawn(async move {
            let answer = connections
                .exchange(
                    head_request,
                    &head,
                    Empty::<Bytes>::new(),
                    RequestFraming::Empty,
                )
                .await;
            match answer {
                // Read to the end, so the connection goes back to the pool.
                Ok(response) => {
                    let _ = response.into_body().collect().await;
                }
                Err(err) => tracing::debug!(pool = %pool_id, %member, "mirror: {err}"),
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn changes() -> HeaderChanges {
        HeaderChanges {
            set: vec![("X-Set".into(), "new".into())],
            add: vec![
                ("x-add".into(), "two".into()),
                ("x-fresh".into(), "1".into()),
            ],
            remove: vec!["X-Gone".into()],
        }
    }

    #[test]
    fn header_changes_remove_then_set_then_append_or_add() {
        let headers: Vec<(&[u8], &[u8])> = vec![
            (b"x-set", b"old"),
            (b"X-Add", b"one"),
            (b"x-gone", b"a"),
            (b"keep", b"k"),
        ];
        let out = changed(headers.into_iter(), &changes());
        let text: Vec<(String, String)> = out
            .iter()
            .map(|(n, v)| {
                (
                    String::from_utf8_lossy(n).into_owned(),
                    String::from_utf8_lossy(v).into_owned(),
                )
            })
            .collect();
        assert_eq!(
            text,
            [
                ("X-Add".to_owned(), "one,two".to_owned()),
                ("keep".to_owned(), "k".to_owned()),
                ("X-Set".to_owned(), "new".to_owned()),
                ("x-fresh".to_owned(), "1".to_owned()),
            ]
        );
    }

    #[test]
    fn a_header_map_gets_the_same_changes() {
        let mut map = HeaderMap::new();
        map.insert("x-set", HeaderValue::from_static("old"));
        map.insert("x-add", HeaderValue::from_static("one"));
        map.insert("x-gone", HeaderValue::from_static("a"));
        change_map(&mut map, &changes());
        assert_eq!(map["x-set"], "new");
        assert_eq!(map["x-add"], "one,two");
        assert_eq!(map["x-fresh"], "1");
        assert!(!map.contains_key("x-gone"));
    }
}
