//! A listing and the revision it reflects: the first half of list + watch.
//!
//! As with Kubernetes' list + watch from `resourceVersion`, a caller that keeps a view of the
//! preparer lists, then watches from the listing's revision: every change up to that revision
//! is in the listing, so `Watch` sends only what came after (no replay of the kept log), and
//! none is missed. A change after the revision may already show in the listing; it is sent
//! again, and since a change carries the row as of its delivery (and every later write has a
//! later revision) the view ends the same.
//!
//! A listing of several pages reflects the revision of its first page: every later page was
//! read after it, so it holds every change up to that revision as well.

/// Entries as listed, with the revision the listing reflects.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Listing<T> {
    /// The entries, by id (or name).
    pub items: Vec<T>,
    /// Every change up to this revision is in `items`: watch from it
    /// ([`crate::DataApi::watch`]) for the changes after. 0 from a preparer that does not
    /// say (watching from 0 then replays every change kept).
    pub revision: u64,
}

impl<T> Default for Listing<T> {
    fn default() -> Self {
        Listing {
            items: Vec::new(),
            revision: 0,
        }
    }
}

/// The header in which the streamed catalog listings (`ListTemplates`, `ListSites`,
/// `ListPlugins`) send their revision, in decimal.
pub const REVISION_HEADER: &str = "nephrite-revision";
