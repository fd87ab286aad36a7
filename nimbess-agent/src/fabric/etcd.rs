//! A minimal etcd v3 client over tonic: the KV operations and the watch the
//! fabric needs, on the generated `etcdserverpb` stubs (etcd's own package
//! and field numbers, so any etcd v3 server answers; no `protoc` needed).
//!
//! Endpoints are tried in order until one connects; the channel reconnects
//! by itself afterwards.

use nephrite_proto::etcdserverpb::{
    self as pb, compare, kv_client::KvClient, lease_client::LeaseClient, request_op,
    watch_client::WatchClient,
};
use nephrite_proto::mvccpb;
use nephrite_runtime::{Endpoint, dial};
use tonic::transport::Channel;

/// Why the store could not be used.
#[derive(Debug, thiserror::Error)]
pub enum EtcdError {
    /// `--store` is not `etcd://HOST:PORT[,HOST:PORT…]`.
    #[error("store {input:?}: {why}")]
    InvalidStore {
        /// The flag's value.
        input: String,
        /// What is wrong.
        why: String,
    },
    /// No endpoint answered.
    #[error("store {endpoints}: no endpoint reachable: {detail}")]
    Unreachable {
        /// The endpoints tried.
        endpoints: String,
        /// The last endpoint's error.
        detail: String,
    },
    /// A request failed.
    #[error("etcd {what}: {source}")]
    Request {
        /// What was asked, naming the key.
        what: String,
        /// The server's status.
        source: tonic::Status,
    },
    /// The watch stream ended or was cancelled.
    #[error("etcd watch on {prefix}: {why}")]
    Watch {
        /// The watched prefix.
        prefix: String,
        /// Why it ended.
        why: String,
    },
}

/// The endpoints of an `etcd://HOST:PORT[,HOST:PORT…]` store URL.
///
/// # Errors
/// Another scheme, an empty list, or an endpoint that does not parse.
pub fn parse_store(url: &str) -> Result<Vec<Endpoint>, EtcdError> {
    let invalid = |why: String| EtcdError::InvalidStore {
        input: url.to_string(),
        why,
    };
    let rest = url
        .strip_prefix("etcd://")
        .ok_or_else(|| invalid("expected etcd://HOST:PORT[,HOST:PORT]".into()))?;
    let endpoints = rest
        .split(',')
        .filter(|s| !s.trim().is_empty())
        .map(|hp| {
            format!("http://{}", hp.trim())
                .parse::<Endpoint>()
                .map_err(|e| invalid(e.to_string()))
        })
        .collect::<Result<Vec<_>, _>>()?;
    if endpoints.is_empty() {
        return Err(invalid("no endpoint".into()));
    }
    Ok(endpoints)
}

/// The first key after every key with `prefix` (etcd's prefix range end).
pub fn prefix_end(prefix: &str) -> Vec<u8> {
    let mut end = prefix.as_bytes().to_vec();
    while let Some(last) = end.pop() {
        if last < 0xff {
            end.push(last + 1);
            return end;
        }
    }
    vec![0]
}

/// A key-value read from etcd.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// The key.
    pub key: String,
    /// The value.
    pub value: Vec<u8>,
}

/// One change seen by a watch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Change {
    /// The key now holds the value.
    Put(Entry),
    /// The key is gone.
    Delete(String),
}

/// The outcome of a create-if-absent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Claim {
    /// The key was absent and now holds our value.
    Created,
    /// The key exists with this value.
    Held(Vec<u8>),
}

/// A connected etcd client.
#[derive(Debug, Clone)]
pub struct Etcd {
    channel: Channel,
    endpoints: String,
}

fn request(what: impl Into<String>) -> impl FnOnce(tonic::Status) -> EtcdError {
    let what = what.into();
    move |source| EtcdError::Request { what, source }
}

fn entry(kv: mvccpb::KeyValue) -> Entry {
    Entry {
        key: String::from_utf8_lossy(&kv.key).into_owned(),
        value: kv.value,
    }
}

impl Etcd {
    /// Connect to the first endpoint of `url` that answers.
    ///
    /// # Errors
    /// An invalid URL, or no endpoint reachable.
    pub async fn connect(url: &str) -> Result<Self, EtcdError> {
        let endpoints = parse_store(url)?;
        let mut detail = String::new();
        for endpoint in &endpoints {
            match dial(endpoint).await {
                Ok(channel) => {
                    return Ok(Etcd {
                        channel,
                        endpoints: url.to_string(),
                    });
                }
                Err(e) => detail = e.to_string(),
            }
        }
        Err(EtcdError::Unreachable {
            endpoints: url.to_string(),
            detail,
        })
    }

    /// The store URL this client was connected with.
    pub fn endpoints(&self) -> &str {
        &self.endpoints
    }

    fn kv(&self) -> KvClient<Channel> {
        KvClient::new(self.channel.clone())
    }

    /// Every key with `prefix`, and the store's revision of that read.
    ///
    /// # Errors
    /// The request failed.
    pub async fn list(&self, prefix: &str) -> Result<(Vec<Entry>, i64), EtcdError> {
        let reply = self
            .kv()
            .range(pb::RangeRequest {
                key: prefix.as_bytes().to_vec(),
                range_end: prefix_end(prefix),
                ..Default::default()
            })
            .await
            .map_err(request(format!("range {prefix}")))?
            .into_inner();
        let revision = reply.header.map_or(0, |h| h.revision);
        Ok((reply.kvs.into_iter().map(entry).collect(), revision))
    }

    /// Store `value` at `key`.
    ///
    /// # Errors
    /// The request failed.
    pub async fn put(&self, key: &str, value: Vec<u8>) -> Result<(), EtcdError> {
        self.put_leased(key, value, 0).await
    }

    /// Store `value` at `key`, attached to `lease` (0: none): the key is
    /// deleted when the lease expires.
    ///
    /// # Errors
    /// The request failed (an expired lease is refused).
    pub async fn put_leased(&self, key: &str, value: Vec<u8>, lease: i64) -> Result<(), EtcdError> {
        self.kv()
            .put(pb::PutRequest {
                key: key.as_bytes().to_vec(),
                value,
                lease,
                ..Default::default()
            })
            .await
            .map_err(request(format!("put {key}")))?;
        Ok(())
    }

    /// Delete `key`.
    ///
    /// # Errors
    /// The request failed.
    pub async fn delete(&self, key: &str) -> Result<(), EtcdError> {
        self.kv()
            .delete_range(pb::DeleteRangeRequest {
                key: key.as_bytes().to_vec(),
                ..Default::default()
            })
            .await
            .map_err(request(format!("delete {key}")))?;
        Ok(())
    }

    /// Delete every key with `prefix`; returns how many there were.
    ///
    /// # Errors
    /// The request failed.
    pub async fn delete_prefix(&self, prefix: &str) -> Result<i64, EtcdError> {
        let reply = self
            .kv()
            .delete_range(pb::DeleteRangeRequest {
                key: prefix.as_bytes().to_vec(),
                range_end: prefix_end(prefix),
                ..Default::default()
            })
            .await
            .map_err(request(format!("delete {prefix}*")))?;
        Ok(reply.into_inner().deleted)
    }

    fn lease(&self) -> LeaseClient<Channel> {
        LeaseClient::new(self.channel.clone())
    }

    /// A new lease of `ttl` seconds; returns its id and the TTL the server
    /// granted (it may raise a TTL below its minimum).
    ///
    /// # Errors
    /// The request failed or the server refused the lease.
    pub async fn grant(&self, ttl: i64) -> Result<(i64, i64), EtcdError> {
        let reply = self
            .lease()
            .lease_grant(pb::LeaseGrantRequest { ttl, id: 0 })
            .await
            .map_err(request(format!("grant a lease of {ttl} s")))?
            .into_inner();
        if !reply.error.is_empty() {
            return Err(EtcdError::Request {
                what: format!("grant a lease of {ttl} s"),
                source: tonic::Status::failed_precondition(reply.error),
            });
        }
        Ok((reply.id, reply.ttl))
    }

    /// Renew `lease` once; returns its new TTL in seconds (0 or less: the
    /// lease expired and its keys are gone).
    ///
    /// # Errors
    /// The request failed.
    pub async fn keep_alive(&self, lease: i64) -> Result<i64, EtcdError> {
        let what = || format!("keep lease {lease:x} alive");
        let (requests, rx) = tokio::sync::mpsc::channel(1);
        requests
            .send(pb::LeaseKeepAliveRequest { id: lease })
            .await
            .map_err(|_| EtcdError::Watch {
                prefix: what(),
                why: "request stream closed".into(),
            })?;
        let mut replies = self
            .lease()
            .lease_keep_alive(tokio_stream_of(rx))
            .await
            .map_err(request(what()))?
            .into_inner();
        let reply = replies.message().await.map_err(request(what()))?;
        drop(requests);
        match reply {
            Some(r) => Ok(r.ttl),
            None => Err(EtcdError::Watch {
                prefix: what(),
                why: "the server closed the stream".into(),
            }),
        }
    }

    /// Revoke `lease` now: its keys are deleted.
    ///
    /// # Errors
    /// The request failed.
    pub async fn revoke(&self, lease: i64) -> Result<(), EtcdError> {
        self.lease()
            .lease_revoke(pb::LeaseRevokeRequest { id: lease })
            .await
            .map_err(request(format!("revoke lease {lease:x}")))?;
        Ok(())
    }

    /// One transaction: if `key`'s `target` equals `operand`, `success`, else `failure`.
    async fn txn(
        &self,
        key: &str,
        target: pb::compare::CompareTarget,
        operand: compare::TargetUnion,
        success: request_op::Request,
        failure: Option<request_op::Request>,
    ) -> Result<pb::TxnResponse, EtcdError> {
        let op = |request| pb::RequestOp {
            request: Some(request),
        };
        self.kv()
            .txn(pb::TxnRequest {
                compare: vec![pb::Compare {
                    result: pb::compare::CompareResult::Equal as i32,
                    target: target as i32,
                    key: key.as_bytes().to_vec(),
                    target_union: Some(operand),
                }],
                success: vec![op(success)],
                failure: failure.into_iter().map(op).collect(),
            })
            .await
            .map_err(request(format!("transaction on {key}")))
            .map(tonic::Response::into_inner)
    }

    /// Compare-and-swap: store `value` at `key` only when the key does not
    /// exist (its create revision is 0); otherwise read what it holds, in
    /// the same transaction.
    ///
    /// # Errors
    /// The request failed.
    pub async fn create(&self, key: &str, value: Vec<u8>) -> Result<Claim, EtcdError> {
        let k = key.as_bytes().to_vec();
        let reply = self
            .txn(
                key,
                pb::compare::CompareTarget::Create,
                compare::TargetUnion::CreateRevision(0),
                request_op::Request::RequestPut(pb::PutRequest {
                    key: k.clone(),
                    value,
                    ..Default::default()
                }),
                Some(request_op::Request::RequestRange(pb::RangeRequest {
                    key: k,
                    ..Default::default()
                })),
            )
            .await?;
        if reply.succeeded {
            return Ok(Claim::Created);
        }
        let held = reply
            .responses
            .into_iter()
            .find_map(|r| match r.response {
                Some(pb::response_op::Response::ResponseRange(range)) => {
                    range.kvs.into_iter().next().map(|kv| kv.value)
                }
                _ => None,
            })
            .unwrap_or_default();
        Ok(Claim::Held(held))
    }

    /// Delete `key` only while it holds `value` (never someone else's key).
    ///
    /// # Errors
    /// The request failed.
    pub async fn delete_if(&self, key: &str, value: Vec<u8>) -> Result<bool, EtcdError> {
        let reply = self
            .txn(
                key,
                pb::compare::CompareTarget::Value,
                compare::TargetUnion::Value(value),
                request_op::Request::RequestDeleteRange(pb::DeleteRangeRequest {
                    key: key.as_bytes().to_vec(),
                    ..Default::default()
                }),
                None,
            )
            .await?;
        Ok(reply.succeeded)
    }

    /// Watch every key with `prefix` from `revision` (inclusive); changes
    /// arrive on the returned channel in order until the stream fails (the
    /// last item is then the error).
    ///
    /// # Errors
    /// The watch could not be created.
    pub async fn watch(
        &self,
        prefix: &str,
        revision: i64,
    ) -> Result<tokio::sync::mpsc::Receiver<Result<(Vec<Change>, i64), EtcdError>>, EtcdError> {
        let create = pb::WatchRequest {
            request_union: Some(pb::watch_request::RequestUnion::CreateRequest(
                pb::WatchCreateRequest {
                    key: prefix.as_bytes().to_vec(),
                    range_end: prefix_end(prefix),
                    start_revision: revision,
                    ..Default::default()
                },
            )),
        };
        // The request stream stays open (closing it ends the watch).
        let (requests, rx) = tokio::sync::mpsc::channel(1);
        requests.send(create).await.map_err(|_| EtcdError::Watch {
            prefix: prefix.to_string(),
            why: "request stream closed".into(),
        })?;
        let mut stream = WatchClient::new(self.channel.clone())
            .watch(tokio_stream_of(rx))
            .await
            .map_err(request(format!("watch {prefix}")))?
            .into_inner();
        let (tx, out) = tokio::sync::mpsc::channel(64);
        let prefix = prefix.to_string();
        tokio::spawn(async move {
            let _keep_open = requests;
            loop {
                let item = match stream.message().await {
                    Ok(Some(reply)) if reply.canceled => Err(EtcdError::Watch {
                        prefix: prefix.clone(),
                        why: format!(
                            "cancelled ({}; compacted at {})",
                            reply.cancel_reason, reply.compact_revision
                        ),
                    }),
                    Ok(Some(reply)) => {
                        if reply.events.is_empty() {
                            continue;
                        }
                        let revision = reply.header.map_or(0, |h| h.revision);
                        let changes = reply
                            .events
                            .into_iter()
                            .filter_map(|ev| {
                                let kv = ev.kv?;
                                Some(if ev.r#type == mvccpb::event::EventType::Delete as i32 {
                                    Change::Delete(String::from_utf8_lossy(&kv.key).into_owned())
                                } else {
                                    Change::Put(entry(kv))
                                })
                            })
                            .collect();
                        Ok((changes, revision))
                    }
                    Ok(None) => Err(EtcdError::Watch {
                        prefix: prefix.clone(),
                        why: "stream ended".into(),
                    }),
                    Err(source) => Err(EtcdError::Request {
                        what: format!("watch {prefix}"),
                        source,
                    }),
                };
                let failed = item.is_err();
                if tx.send(item).await.is_err() || failed {
                    return;
                }
            }
        });
        Ok(out)
    }
}

/// A receiver as a request stream for tonic.
fn tokio_stream_of<T: Send + 'static>(
    mut rx: tokio::sync::mpsc::Receiver<T>,
) -> impl futures::Stream<Item = T> + Send + 'static {
    futures::stream::poll_fn(move |cx| rx.poll_recv(cx))
}

#[cfg(test)]
mod tests;
