//! The board: every template, site, plugin and deployment a dashboard knows, changed only by
//! [`Update`]s (from the feed), with the deployments matching the current filter kept sorted
//! by id so that a screen can show any slice of 100,000 of them without sorting or scanning.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use super::filter::DeploymentFilter;

/// One deployment as the dashboards show it: the Data API's own row (of `ListDeployments` or
/// of a `Watch` change).
pub type DeploymentRow = nephrite_preparer_client::DeploymentInfo;

/// The catalogs besides deployments.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum CatalogKind {
    /// Templates.
    Templates,
    /// Sites.
    Sites,
    /// Preparation plugins.
    Plugins,
}

/// A template, site or plugin: its id and a one-line description.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CatalogEntry {
    /// Id (the plugin's name for plugins).
    pub id: String,
    /// A one-line summary: metadata, or a plugin's endpoint and triggers.
    pub summary: String,
}

/// The state of the feed's connection to the Data API.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Connection {
    /// Dialling, or listing after a (re)connection.
    Connecting,
    /// Listed and watching.
    Live,
    /// The daemon went away; the feed retries.
    Lost {
        /// What failed.
        reason: String,
    },
}

/// A change to the board.
#[derive(Debug, Clone, PartialEq)]
pub enum Update {
    /// The connection changed state.
    Connection(Connection),
    /// A (re)listing starts: rows not put again before [`Update::Listed`] are gone.
    Relisting,
    /// Every deployment, template, site and plugin has been listed since
    /// [`Update::Relisting`].
    Listed,
    /// Deployments created or changed.
    Deployments(Vec<DeploymentRow>),
    /// A deployment was deleted.
    DeploymentDeleted(String),
    /// Catalog entries created or changed.
    Catalog(CatalogKind, Vec<CatalogEntry>),
    /// A catalog entry was deleted.
    CatalogDeleted(CatalogKind, String),
    /// A catalog listed whole: it replaces what was known of it.
    CatalogListed(CatalogKind, Vec<CatalogEntry>),
}

struct Stored {
    row: DeploymentRow,
    listing: u64,
}

/// Everything a dashboard shows, and the deployments the filter lets through, sorted by id.
pub struct Board {
    deployments: HashMap<String, Stored>,
    children: HashMap<String, BTreeSet<String>>,
    catalogs: BTreeMap<CatalogKind, BTreeMap<String, (CatalogEntry, u64)>>,
    filter: DeploymentFilter,
    visible: Vec<String>,
    listing: u64,
    connection: Connection,
    revision: u64,
    prepared: usize,
}

impl Default for Board {
    fn default() -> Self {
        Board {
            deployments: HashMap::new(),
            children: HashMap::new(),
            catalogs: BTreeMap::new(),
            filter: DeploymentFilter::default(),
            visible: Vec::new(),
            listing: 0,
            connection: Connection::Connecting,
            revision: 0,
            prepared: 0,
        }
    }
}

impl Board {
    /// Applies one update.
    pub fn apply(&mut self, update: Update) {
        self.revision += 1;
        match update {
            Update::Connection(connection) => self.connection = connection,
            Update::Relisting => self.listing += 1,
            Update::Listed => self.drop_unlisted(),
            Update::Deployments(rows) => {
                for row in rows {
                    self.put(row);
                }
            }
            Update::DeploymentDeleted(id) => self.delete(&id),
            Update::Catalog(kind, entries) => {
                let catalog = self.catalogs.entry(kind).or_default();
                for entry in entries {
                    catalog.insert(entry.id.clone(), (entry, self.listing));
                }
            }
            Update::CatalogListed(kind, entries) => {
                let listing = self.listing;
                self.catalogs.insert(
                    kind,
                    entries
                        .into_iter()
                        .map(|entry| (entry.id.clone(), (entry, listing)))
                        .collect(),
                );
            }
            Update::CatalogDeleted(kind, id) => {
                if let Some(catalog) = self.catalogs.get_mut(&kind) {
                    catalog.remove(&id);
                }
            }
        }
    }

    /// Counts the updates applied so far (a change counter for redraws).
    pub fn revision(&self) -> u64 {
        self.revision
    }

    /// The connection's state.
    pub fn connection(&self) -> &Connection {
        &self.connection
    }

    /// Replaces the filter, recomputing the visible deployments.
    pub fn set_filter(&mut self, filter: DeploymentFilter) {
        self.filter = filter;
        self.revision += 1;
        let mut visible: Vec<String> = self
            .deployments
            .values()
            .filter(|stored| self.filter.matches(&stored.row))
            .map(|stored| stored.row.id.clone())
            .collect();
        visible.sort_unstable();
        self.visible = visible;
    }

    /// The current filter.
    pub fn filter(&self) -> &DeploymentFilter {
        &self.filter
    }

    /// Ids of the deployments the filter lets through, sorted.
    pub fn visible(&self) -> &[String] {
        &self.visible
    }

    /// How many deployments there are in all.
    pub fn deployment_count(&self) -> usize {
        self.deployments.len()
    }

    /// One deployment.
    pub fn deployment(&self, id: &str) -> Option<&DeploymentRow> {
        self.deployments.get(id).map(|stored| &stored.row)
    }

    /// The children of a deployment, sorted by id.
    pub fn children(&self, id: &str) -> impl Iterator<Item = &DeploymentRow> {
        self.children
            .get(id)
            .into_iter()
            .flatten()
            .filter_map(|child| self.deployment(child))
    }

    /// How many children a deployment has.
    pub fn child_count(&self, id: &str) -> usize {
        self.children.get(id).map_or(0, BTreeSet::len)
    }

    /// A catalog's entries, sorted by id.
    pub fn catalog(&self, kind: CatalogKind) -> Vec<&CatalogEntry> {
        self.catalogs
            .get(&kind)
            .map(|c| c.values().map(|(entry, _)| entry).collect())
            .unwrap_or_default()
    }

    /// How many deployments are prepared, of all.
    pub fn prepared_count(&self) -> usize {
        self.prepared
    }

    fn put(&mut self, row: DeploymentRow) {
        let id = row.id.clone();
        let shown = self.filter.matches(&row);
        self.prepared += usize::from(row.prepared);
        let old = self.deployments.insert(
            id.clone(),
            Stored {
                row,
                listing: self.listing,
            },
        );
        if let Some(old) = &old {
            self.prepared -= usize::from(old.row.prepared);
        }
        if let Some(old) = &old
            && !old.row.parent_id.is_empty()
        {
            self.unlink_child(&old.row.parent_id.clone(), &id);
        }
        let parent = self.deployments[&id].row.parent_id.clone();
        if !parent.is_empty() {
            self.children.entry(parent).or_default().insert(id.clone());
        }
        match (self.visible.binary_search(&id), shown) {
            (Err(at), true) => self.visible.insert(at, id),
            (Ok(at), false) => {
                self.visible.remove(at);
            }
            _ => {}
        }
    }

    fn delete(&mut self, id: &str) {
        if let Some(old) = self.deployments.remove(id) {
            self.prepared -= usize::from(old.row.prepared);
            if !old.row.parent_id.is_empty() {
                self.unlink_child(&old.row.parent_id, id);
            }
            if let Ok(at) = self.visible.binary_search_by(|v| v.as_str().cmp(id)) {
                self.visible.remove(at);
            }
        }
    }

    fn unlink_child(&mut self, parent: &str, id: &str) {
        if let Some(siblings) = self.children.get_mut(parent) {
            siblings.remove(id);
            if siblings.is_empty() {
                self.children.remove(parent);
            }
        }
    }

    /// Drops what the last listing did not see (deleted while the feed was away).
    fn drop_unlisted(&mut self) {
        let listing = self.listing;
        let gone: Vec<String> = self
            .deployments
            .values()
            .filter(|stored| stored.listing != listing)
            .map(|stored| stored.row.id.clone())
            .collect();
        for id in gone {
            self.delete(&id);
        }
        for catalog in self.catalogs.values_mut() {
            catalog.retain(|_, (_, seen)| *seen == listing);
        }
    }
}

#[cfg(test)]
#[path = "model_tests.rs"]
mod tests;
