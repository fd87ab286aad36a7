//! The feed: keeps a [`Board`](super::Board) live from the Data API. It opens `Watch` from
//! revision 0 first, then lists every catalog and deployment (1,000 a page), then applies the
//! watched changes; a change always carries the row as of its delivery and every later write
//! has a later revision, so the board converges on the store's state whatever the listing and
//! the replay overlap. The stream and the listing use two connections (two calls of the
//! [`Connector`]), so that the unread stream cannot hold up the listing. When the stream fails it reports [`Connection::Lost`], waits (doubling
//! from `retry_min` to `retry_max`) and starts over, keeping the old rows on screen until the
//! new listing replaces them. Nothing is polled.
//!
//! Wire types end here: the board receives [`DeploymentRow`]s and [`CatalogEntry`]s.

use std::collections::{BTreeMap, BTreeSet};
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::FutureExt as _;
use nephrite_proto::nephrite::preparer::data::v1 as pb;
use nephrite_proto::nephrite::preparer::data::v1::data_client::DataClient;
use tokio::sync::mpsc;
use tokio_stream::StreamExt as _;

use super::model::{CatalogEntry, CatalogKind, Connection, DeploymentRow, Update};

/// A boxed gRPC transport: a network [`tonic::transport::Channel`] (the terminal UI) or the
/// daemon's own service in process (the web page).
pub type DataService = tower::util::BoxCloneService<
    http::Request<tonic::body::Body>,
    http::Response<tonic::body::Body>,
    TransportError,
>;

/// A transport failure, as text (a concrete type: boxed trait-object errors here defeat the
/// compiler's `Send` proof for the client's futures).
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct TransportError(pub String);

/// A Data API client over any transport.
pub type Client = DataClient<DataService>;

/// Makes a client: dials the daemon (or wraps the in-process service).
pub type Connector =
    Arc<dyn Fn() -> Pin<Box<dyn Future<Output = Result<Client, String>> + Send>> + Send + Sync>;

/// A client over a network channel (with the caller's credentials, if any).
pub fn channel_client(channel: nephrite_runtime::AuthChannel) -> Client {
    use tower::ServiceExt as _;
    DataClient::new(DataService::new(
        channel.map_err(|e| TransportError(e.to_string())),
    ))
}

/// How the feed retries.
#[derive(Debug, Clone, Copy)]
pub struct FeedConfig {
    /// First wait after a failure.
    pub retry_min: Duration,
    /// Longest wait.
    pub retry_max: Duration,
}

impl Default for FeedConfig {
    fn default() -> Self {
        FeedConfig {
            retry_min: Duration::from_millis(250),
            retry_max: Duration::from_secs(5),
        }
    }
}

/// Lists and watches the Data API, sending [`Update`]s until the receiver goes away.
pub struct Feed {
    connect: Connector,
    config: FeedConfig,
}

const PAGE: u32 = 1000;

impl Feed {
    /// A feed over clients from `connect`.
    pub fn new(connect: Connector, config: FeedConfig) -> Feed {
        Feed { connect, config }
    }

    /// Runs until `updates` is closed.
    pub async fn run(self, updates: mpsc::Sender<Update>) {
        let mut wait = self.config.retry_min;
        loop {
            if updates
                .send(Update::Connection(Connection::Connecting))
                .await
                .is_err()
            {
                return;
            }
            let reason = match self.follow(&updates, &mut wait).await {
                Ok(()) => return,
                Err(reason) => reason,
            };
            if updates
                .send(Update::Connection(Connection::Lost { reason }))
                .await
                .is_err()
            {
                return;
            }
            tokio::time::sleep(wait).await;
            wait = (wait * 2).min(self.config.retry_max);
        }
    }

    /// One connection's life: `Ok` when the receiver went away, `Err` with the reason when
    /// the daemon did.
    async fn follow(
        &self,
        updates: &mpsc::Sender<Update>,
        wait: &mut Duration,
    ) -> Result<(), String> {
        // `Watch` gets a connection of its own: nothing reads the stream while the listing
        // runs, and on a shared connection its unread changes (up to a stream window) would
        // count against the receive window the listing's responses need too.
        let mut watcher = (self.connect)().await?;
        let mut client = (self.connect)().await?;
        let mut changes = watcher
            .watch(pb::WatchRequest {
                from_revision: 0,
                kinds: Vec::new(),
            })
            .await
            .map_err(|s| format!("Watch: {}", s.message()))?
            .into_inner();
        async fn send_to(updates: &mpsc::Sender<Update>, update: Update) -> Result<(), ()> {
            updates.send(update).await.map_err(|_| ())
        }
        let send = |update: Update| send_to(updates, update);
        let closed = || Ok(());
        if send(Update::Relisting).await.is_err() {
            return closed();
        }
        for kind in [
            CatalogKind::Templates,
            CatalogKind::Sites,
            CatalogKind::Plugins,
        ] {
            let entries = list_catalog(&mut client, kind).await?;
            if send(Update::Catalog(kind, entries)).await.is_err() {
                return closed();
            }
        }
        let mut after_id = String::new();
        loop {
            let page = client
                .list_deployments(pb::ListDeploymentsRequest {
                    window: Some(pb::Window {
                        offset: 0,
                        max_count: PAGE,
                        after_id: after_id.clone(),
                    }),
                    ..Default::default()
                })
                .await
                .map_err(|s| format!("ListDeployments: {}", s.message()))?
                .into_inner();
            let rows = page.deployments.into_iter().map(row).collect();
            if send(Update::Deployments(rows)).await.is_err() {
                return closed();
            }
            if page.next_after_id.is_empty() {
                break;
            }
            after_id = page.next_after_id;
        }
        if send(Update::Listed).await.is_err()
            || send(Update::Connection(Connection::Live)).await.is_err()
        {
            return closed();
        }
        *wait = self.config.retry_min;
        // Catalog changes name only an id: they wait here, deduplicated, until the stream has
        // nothing ready, then are fetched one by one or, when many, by listing their catalog
        // again, at most once a second per catalog. A replay of 10,000 site registrations
        // costs a listing or two, not 10,000 calls, and never holds up deployment changes.
        let mut pending: BTreeMap<CatalogKind, BTreeSet<String>> = BTreeMap::new();
        let mut relisted: BTreeMap<CatalogKind, Instant> = BTreeMap::new();
        loop {
            let next = match changes.next().now_or_never() {
                Some(next) => next,
                None if !pending.is_empty() => {
                    let now = Instant::now();
                    let due = |kind: &CatalogKind, ids: &BTreeSet<String>| {
                        ids.len() <= FETCH_ONE_BY_ONE
                            || relisted
                                .get(kind)
                                .is_none_or(|at| now >= *at + RELIST_EVERY)
                    };
                    let ready: Vec<CatalogKind> = pending
                        .iter()
                        .filter(|(kind, ids)| due(kind, ids))
                        .map(|(kind, _)| *kind)
                        .collect();
                    if ready.is_empty() {
                        let wake = pending
                            .keys()
                            .filter_map(|kind| relisted.get(kind))
                            .map(|at| *at + RELIST_EVERY)
                            .min()
                            .unwrap_or(now);
                        tokio::select! {
                            next = changes.next() => next,
                            _ = tokio::time::sleep_until(wake.into()) => continue,
                        }
                    } else {
                        let batch: BTreeMap<CatalogKind, BTreeSet<String>> = ready
                            .into_iter()
                            .filter_map(|kind| pending.remove_entry(&kind))
                            .collect();
                        for (kind, ids) in &batch {
                            if ids.len() > FETCH_ONE_BY_ONE {
                                relisted.insert(*kind, now);
                            }
                        }
                        for update in flush(&mut client, batch).await? {
                            if send(update).await.is_err() {
                                return closed();
                            }
                        }
                        continue;
                    }
                }
                None => changes.next().await,
            };
            let Some(change) = next else {
                return Err("the daemon closed the Watch stream".to_owned());
            };
            let change = change.map_err(|s| format!("Watch: {}", s.message()))?;
            let deleted = change.r#type() == pb::ChangeType::Delete;
            let kind = match change.kind() {
                pb::EntityKind::Deployment => {
                    let update = if deleted {
                        Update::DeploymentDeleted(change.id)
                    } else if let Some(info) = change.deployment {
                        Update::Deployments(vec![row(info)])
                    } else {
                        // No row: deleted before delivery; its delete follows.
                        continue;
                    };
                    if send(update).await.is_err() {
                        return closed();
                    }
                    continue;
                }
                pb::EntityKind::Template => CatalogKind::Templates,
                pb::EntityKind::Site => CatalogKind::Sites,
                pb::EntityKind::Plugin => CatalogKind::Plugins,
                pb::EntityKind::Unspecified => continue,
            };
            pending.entry(kind).or_default().insert(change.id);
        }
    }
}

/// More changed entries of one catalog than this are read by listing the catalog again.
const FETCH_ONE_BY_ONE: usize = 32;

/// The shortest time between two listings of one catalog for its changes.
const RELIST_EVERY: Duration = Duration::from_secs(1);

/// The updates for catalog entries that changed: each fetched (gone when not found), or the
/// whole catalog listed again.
async fn flush(
    client: &mut Client,
    pending: BTreeMap<CatalogKind, BTreeSet<String>>,
) -> Result<Vec<Update>, String> {
    let mut updates = Vec::new();
    for (kind, ids) in pending {
        if ids.len() > FETCH_ONE_BY_ONE {
            updates.push(Update::CatalogListed(
                kind,
                list_catalog(client, kind).await?,
            ));
            continue;
        }
        for id in ids {
            let request = pb::GetRequest { id: id.clone() };
            let entry = match kind {
                CatalogKind::Templates => client
                    .get_template(request)
                    .await
                    .map(|r| r.into_inner().info.map(template)),
                CatalogKind::Sites => client
                    .get_site(request)
                    .await
                    .map(|r| r.into_inner().info.map(site)),
                CatalogKind::Plugins => client
                    .get_plugin(request)
                    .await
                    .map(|r| Some(plugin(r.into_inner()))),
            };
            updates.push(match entry {
                Ok(Some(entry)) => Update::Catalog(kind, vec![entry]),
                Ok(None) => continue,
                Err(status) if status.code() == tonic::Code::NotFound => {
                    Update::CatalogDeleted(kind, id)
                }
                Err(status) => return Err(format!("Get: {}", status.message())),
            });
        }
    }
    Ok(updates)
}

async fn list_catalog(client: &mut Client, kind: CatalogKind) -> Result<Vec<CatalogEntry>, String> {
    let mut entries = Vec::new();
    let mut after_id = String::new();
    loop {
        let window = Some(pb::Window {
            offset: 0,
            max_count: PAGE,
            after_id: after_id.clone(),
        });
        let page: Vec<CatalogEntry> = match kind {
            CatalogKind::Templates => {
                collect(
                    client
                        .list_templates(pb::ListTemplatesRequest {
                            window,
                            ..Default::default()
                        })
                        .await,
                    template,
                )
                .await?
            }
            CatalogKind::Sites => {
                collect(
                    client
                        .list_sites(pb::ListSitesRequest {
                            window,
                            ..Default::default()
                        })
                        .await,
                    site,
                )
                .await?
            }
            CatalogKind::Plugins => {
                collect(
                    client
                        .list_plugins(pb::ListPluginsRequest {
                            window,
                            ..Default::default()
                        })
                        .await,
                    plugin,
                )
                .await?
            }
        };
        let full = page.len() == PAGE as usize;
        if let Some(last) = page.last() {
            after_id = last.id.clone();
        }
        entries.extend(page);
        if !full {
            return Ok(entries);
        }
    }
}

async fn collect<T>(
    response: Result<tonic::Response<tonic::Streaming<T>>, tonic::Status>,
    entry: fn(T) -> CatalogEntry,
) -> Result<Vec<CatalogEntry>, String> {
    let mut stream = response.map_err(|s| s.message().to_owned())?.into_inner();
    let mut entries = Vec::new();
    while let Some(item) = stream.next().await {
        entries.push(entry(item.map_err(|s| s.message().to_owned())?));
    }
    Ok(entries)
}

fn pairs(metadata: impl IntoIterator<Item = (String, String)>) -> String {
    let mut pairs: Vec<String> = metadata
        .into_iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect();
    pairs.sort();
    pairs.join(" ")
}

fn template(info: pb::TemplateInfo) -> CatalogEntry {
    CatalogEntry {
        id: info.id,
        summary: pairs(info.metadata),
    }
}

fn site(info: pb::SiteInfo) -> CatalogEntry {
    let mut summary = pairs(info.metadata);
    if !info.deployment_id.is_empty() {
        summary = format!("provisioned by {} {summary}", info.deployment_id);
    }
    CatalogEntry {
        id: info.id,
        summary,
    }
}

fn plugin(plugin: pb::Plugin) -> CatalogEntry {
    let triggers: Vec<String> = plugin
        .triggers
        .iter()
        .map(|t| {
            if t.group.is_empty() {
                format!("{}/{}", t.version, t.kind)
            } else {
                format!("{}/{}/{}", t.group, t.version, t.kind)
            }
        })
        .collect();
    CatalogEntry {
        id: plugin.name,
        summary: format!("{} on {}", triggers.join(", "), plugin.endpoint),
    }
}

/// A deployment row from its wire form.
pub(crate) fn row(info: pb::DeploymentInfo) -> DeploymentRow {
    DeploymentRow {
        id: info.deployment_id,
        parent: info.parent_deployment_id,
        template: info.template_id,
        site: info.site_id,
        metadata: info.metadata.into_iter().collect(),
        created: info.created,
        updated: info.updated,
        prepared: info.prepared,
        approved: info.approved,
        error: info.error,
    }
}
