//! The difference between the children that exist and the children a plan wants, and the model
//! of carrying it out.
//!
//! Children are matched by [`ChildKey`], never by deployed id or backend id, so that an edit
//! to an instance's capacity, networks or class — or a new site that changes which deployed
//! ids collide — is an update of the same child rather than a delete and a create. A child
//! whose stored fingerprint equals the planned one appears in no list: it is not touched.
//!
//! Two children with the same key (left by an interrupted earlier run, or by a deployed id
//! that changed) are one too many: the one to keep is the one already right, else an approved
//! one, else the one with the smallest id; the others are retired like children no longer
//! wanted — deleted, or under [`DeletionPolicy::Orphan`] left and flagged.
//!
//! An orphan is a flag, not an action: it stays where it is, and the next re-plan, observing it
//! again, names it again. Should its site match again, the orphan is the child of that key
//! once more and is kept or updated, not duplicated.

use std::collections::{BTreeMap, HashMap};

use crate::api::DeletionPolicy;
use crate::replan::spec::{ChildKey, Fingerprint, PlannedChild};

/// A child as observed (a TKO child deployment of the topology's deployment, a Porch package
/// revision labelled for the topology).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExistingChild {
    /// The backend's id (deployment id, PackageRevision name).
    pub id: String,
    /// Its identity.
    pub key: ChildKey,
    /// The fingerprint it carries ([`crate::replan::SPEC_FINGERPRINT_KEY`]); `None` when it
    /// carries none (made before fingerprints, or by hand), so its content is unknown and it
    /// is updated once.
    pub fingerprint: Option<Fingerprint>,
    /// Whether it is prepared.
    pub prepared: bool,
    /// Whether it is approved (TKO) or published (Porch).
    pub approved: bool,
}

/// An existing child whose content must change.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChildUpdate {
    /// The existing child's backend id.
    pub id: String,
    /// What it must become.
    pub child: PlannedChild,
    /// Whether its deployed id or template changes, which a TKO child deployment cannot do in
    /// place (delete it, then create `child`). Never set for a child without a fingerprint:
    /// what it holds is unknown, and it is updated in place.
    pub recreate: bool,
}

/// What a re-plan changes. Creates and updates come in the order of the desired children (the
/// plan's: by instance, then site); deletes and orphans by key, then id.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ChildChanges {
    /// Children to create.
    pub create: Vec<PlannedChild>,
    /// Children to update in place (same key, different content).
    pub update: Vec<ChildUpdate>,
    /// Children to delete.
    pub delete: Vec<ExistingChild>,
    /// Children no longer wanted that the deletion policy leaves in place, flagged.
    pub orphan: Vec<ExistingChild>,
}

impl ChildChanges {
    /// Whether nothing is to be created, updated or deleted (orphans need no action).
    pub fn is_noop(&self) -> bool {
        self.create.is_empty() && self.update.is_empty() && self.delete.is_empty()
    }

    /// How many creates, updates and deletes there are.
    pub fn action_count(&self) -> usize {
        self.create.len() + self.update.len() + self.delete.len()
    }
}

/// What `existing` children must undergo to become exactly the `desired` ones, retiring the
/// children no longer wanted as `policy` says. See the module docs.
pub fn diff(
    existing: &[ExistingChild],
    desired: &[PlannedChild],
    policy: DeletionPolicy,
) -> ChildChanges {
    let mut by_key: BTreeMap<&ChildKey, Vec<&ExistingChild>> = BTreeMap::new();
    for child in existing {
        by_key.entry(&child.key).or_default().push(child);
    }
    let mut changes = ChildChanges::default();
    let retire = |child: &ExistingChild, changes: &mut ChildChanges| match policy {
        DeletionPolicy::Delete => changes.delete.push(child.clone()),
        DeletionPolicy::Orphan => changes.orphan.push(child.clone()),
    };
    for planned in desired {
        let Some(copies) = by_key.remove(&planned.key) else {
            changes.create.push(planned.clone());
            continue;
        };
        let keeper = keeper(&copies, planned.fingerprint);
        match keeper.fingerprint {
            Some(fingerprint) if fingerprint == planned.fingerprint => {}
            stored => changes.update.push(ChildUpdate {
                id: keeper.id.clone(),
                child: planned.clone(),
                recreate: stored.is_some_and(|f| f.placement != planned.fingerprint.placement),
            }),
        }
        for copy in copies {
            if copy.id != keeper.id {
                retire(copy, &mut changes);
            }
        }
    }
    for copies in by_key.into_values() {
        for copy in copies {
            retire(copy, &mut changes);
        }
    }
    let by_key_then_id =
        |a: &ExistingChild, b: &ExistingChild| a.key.cmp(&b.key).then_with(|| a.id.cmp(&b.id));
    changes.delete.sort_by(by_key_then_id);
    changes.orphan.sort_by(by_key_then_id);
    changes
}

/// The copy to keep: already right, else approved, else the smallest id.
fn keeper<'a>(copies: &[&'a ExistingChild], wanted: Fingerprint) -> &'a ExistingChild {
    let rank = |c: &ExistingChild| (c.fingerprint != Some(wanted), !c.approved);
    copies
        .iter()
        .copied()
        .min_by(|a, b| rank(a).cmp(&rank(b)).then_with(|| a.id.cmp(&b.id)))
        .expect("a key is only grouped with at least one child")
}

/// The children after [`apply`]: the managed ones by key and content, and the keys of those
/// left in place as orphans.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Applied {
    /// The topology's children, sorted by key (a key appears once per child, so duplicates
    /// would show).
    pub children: Vec<(ChildKey, Option<Fingerprint>)>,
    /// Children left in place, no longer managed, sorted.
    pub orphaned: Vec<ChildKey>,
}

/// The model of carrying `changes` out on `existing`: deleted children go, orphans leave the
/// topology's care, updated ones take their new content, created ones appear.
pub fn apply(existing: &[ExistingChild], changes: &ChildChanges) -> Applied {
    let mut children: HashMap<&str, (ChildKey, Option<Fingerprint>)> = existing
        .iter()
        .map(|c| (c.id.as_str(), (c.key.clone(), c.fingerprint)))
        .collect();
    for gone in &changes.delete {
        children.remove(gone.id.as_str());
    }
    let mut orphaned: Vec<ChildKey> = changes
        .orphan
        .iter()
        .filter_map(|o| children.remove(o.id.as_str()).map(|(key, _)| key))
        .collect();
    for update in &changes.update {
        if let Some(child) = children.get_mut(update.id.as_str()) {
            *child = (update.child.key.clone(), Some(update.child.fingerprint));
        }
    }
    let mut result: Vec<(ChildKey, Option<Fingerprint>)> = children.into_values().collect();
    result.extend(
        changes
            .create
            .iter()
            .map(|c| (c.key.clone(), Some(c.fingerprint))),
    );
    result.sort();
    orphaned.sort();
    Applied {
        children: result,
        orphaned,
    }
}
