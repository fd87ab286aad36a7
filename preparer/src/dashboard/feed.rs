//! The feed: keeps a [`Board`](super::Board) live from the Data API by list + watch. It lists
//! every deployment (1,000 a page) and catalog, then opens `Watch` from the revision the
//! listing reflects (its first page's), so the stream starts with the changes made since the
//! listing began, not with a replay of the kept log. Every change up to that revision is in
//! the listing; a later one may be too, and is then applied again: a change always carries the
//! row as of its delivery and every later write has a later revision, so the board converges
//! on the store's state whatever the overlap. (From a daemon that names no revision the watch
//! starts at 0: a replay of every change kept, with the same result.) The stream and the
//! other calls use two connections (two calls of the [`Connector`]), so that an unread stream
//! cannot hold up the calls. When the stream fails it reports [`Connection::Lost`], waits
//! (doubling from `retry_min` to `retry_max`) and starts over, keeping the old rows on screen
//! until the new listing replaces them. Nothing is polled.
//!
//! The board receives the Data API's deployment rows as they come and [`CatalogEntry`]s made
//! here from its catalog values.

use std::collections::{BTreeMap, BTreeSet};
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::FutureExt as _;
use nephrite_preparer_client::{
    CatalogQuery, DataApi, DataError, DeploymentPage, DeploymentQuery, EntityKind, Plugin,
    PluginQuery, SiteInfo, TemplateInfo, Window,
};
use tokio::sync::mpsc;
use tokio_stream::StreamExt as _;

use super::model::{CatalogEntry, CatalogKind, Connection, Update};

/// Makes a Data API to follow: dials the daemon (the terminal UI) or hands out the daemon's
/// own service (the web page). Each call is a connection of its own.
pub type Connector = Arc<
    dyn Fn() -> Pin<Box<dyn Future<Output = Result<Arc<dyn DataApi>, String>> + Send>>
        + Send
        + Sync,
>;

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
        let client = (self.connect)().await?;
        async fn send_to(updates: &mpsc::Sender<Update>, update: Update) -> Result<(), ()> {
            updates.send(update).await.map_err(|_| ())
        }
        let send = |update: Update| send_to(updates, update);
        let closed = || Ok(());
        if send(Update::Relisting).await.is_err() {
            return closed();
        }
        // The first page of deployments names the revision the whole listing reflects: every
        // other read (the catalogs, the later pages) comes after it.
        let mut window = Window::largest_after("");
        let first = list_page(client.as_ref(), &window).await?;
        let revision = first.revision;
        let mut next_after_id = first.next_after_id;
        if send(Update::Deployments(first.deployments)).await.is_err() {
            return closed();
        }
        for kind in [
            CatalogKind::Templates,
            CatalogKind::Sites,
            CatalogKind::Plugins,
        ] {
            let entries = list_catalog(client.as_ref(), kind).await?;
            if send(Update::Catalog(kind, entries)).await.is_err() {
                return closed();
            }
        }
        // Page by page, so the board fills while the rest is read.
        while let Some(after_id) = next_after_id {
            window.after_id = after_id;
            let page = list_page(client.as_ref(), &window).await?;
            next_after_id = page.next_after_id;
            if send(Update::Deployments(page.deployments)).await.is_err() {
                return closed();
            }
        }
        // The changes after the listing, on a connection of their own (so that an unread
        // stream never holds up the catalog fetches below).
        let watcher = (self.connect)().await?;
        let mut changes = watcher.watch(revision, &[]).await.map_err(failed)?;
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
                        for update in flush(client.as_ref(), batch).await? {
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
            let change = change.map_err(failed)?;
            let deleted = change.deleted;
            let kind = match change.kind {
                EntityKind::Deployment => {
                    let update = if deleted {
                        Update::DeploymentDeleted(change.id)
                    } else if let Some(info) = change.deployment {
                        Update::Deployments(vec![info])
                    } else {
                        // No row: deleted before delivery; its delete follows.
                        continue;
                    };
                    if send(update).await.is_err() {
                        return closed();
                    }
                    continue;
                }
                EntityKind::Template => CatalogKind::Templates,
                EntityKind::Site => CatalogKind::Sites,
                EntityKind::Plugin => CatalogKind::Plugins,
                // The dashboards show no leases.
                EntityKind::Lease => continue,
            };
            pending.entry(kind).or_default().insert(change.id);
        }
    }
}

/// More changed entries of one catalog than this are read by listing the catalog again.
const FETCH_ONE_BY_ONE: usize = 32;

/// The shortest time between two listings of one catalog for its changes.
const RELIST_EVERY: Duration = Duration::from_secs(1);

/// One page of every deployment.
async fn list_page(client: &dyn DataApi, window: &Window) -> Result<DeploymentPage, String> {
    client
        .list_deployments(DeploymentQuery {
            window: window.clone(),
            ..DeploymentQuery::default()
        })
        .await
        .map_err(failed)
}

/// A failed call as the banner shows it: the call, then why.
fn failed(error: DataError) -> String {
    format!("{}: {error}", error.call())
}

/// The updates for catalog entries that changed: each fetched (gone when not found), or the
/// whole catalog listed again.
async fn flush(
    client: &dyn DataApi,
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
            let entry = match kind {
                CatalogKind::Templates => client.get_template(&id).await.map(|t| template(t.info)),
                CatalogKind::Sites => client.get_site(&id).await.map(|s| site(s.info)),
                CatalogKind::Plugins => client.get_plugin(&id).await.map(plugin),
            };
            updates.push(match entry {
                Ok(entry) => Update::Catalog(kind, vec![entry]),
                Err(error) if error.is_not_found() => Update::CatalogDeleted(kind, id),
                Err(error) => return Err(failed(error)),
            });
        }
    }
    Ok(updates)
}

/// Every entry of a catalog.
async fn list_catalog(
    client: &dyn DataApi,
    kind: CatalogKind,
) -> Result<Vec<CatalogEntry>, String> {
    let entries = match kind {
        CatalogKind::Templates => client
            .all_templates(CatalogQuery::default())
            .await
            .map(|rows| rows.into_iter().map(template).collect()),
        CatalogKind::Sites => client
            .all_sites(CatalogQuery::default())
            .await
            .map(|rows| rows.into_iter().map(site).collect()),
        CatalogKind::Plugins => client
            .all_plugins(PluginQuery::default())
            .await
            .map(|rows| rows.into_iter().map(plugin).collect()),
    };
    entries.map_err(failed)
}

fn pairs(metadata: impl IntoIterator<Item = (String, String)>) -> String {
    let mut pairs: Vec<String> = metadata
        .into_iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect();
    pairs.sort();
    pairs.join(" ")
}

fn template(info: TemplateInfo) -> CatalogEntry {
    CatalogEntry {
        id: info.id,
        summary: pairs(info.metadata),
    }
}

fn site(info: SiteInfo) -> CatalogEntry {
    let mut summary = pairs(info.metadata);
    if !info.deployment_id.is_empty() {
        summary = format!("provisioned by {} {summary}", info.deployment_id);
    }
    CatalogEntry {
        id: info.id,
        summary,
    }
}

fn plugin(plugin: Plugin) -> CatalogEntry {
    CatalogEntry {
        summary: format!(
            "{} on {}",
            plugin.trigger_texts(true).join(", "),
            plugin.endpoint
        ),
        id: plugin.name,
    }
}
