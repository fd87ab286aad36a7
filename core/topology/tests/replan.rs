//! Property tests for re-planning (issue #37): whatever the old topology, sites and children,
//! and whatever edits turn them into the new ones, carrying out `diff(old children →
//! plan(new))` gives exactly the new plan's children, in the fewest changes, never touching a
//! child that is already right; under `deletionPolicy: orphan` nothing is deleted.

use std::collections::{BTreeMap, BTreeSet};

use nephrite_topology::api::{Cluster, DeletionPolicy, NFClass, NFTopology};
use nephrite_topology::replan::{
    ChildChanges, ChildKey, ChildSpec, ExistingChild, Fingerprint, GateState, PlannedChild, apply,
    desired_children, diff, new_child_gates,
};
use nephrite_topology::{Plan, RolloutPolicy, plan};
use proptest::prelude::*;
use serde_json::json;

const TYPES: [&str; 3] = ["upf", "smf", "amf"];
const ZONES: usize = 3;

#[derive(Debug, Clone)]
struct Instance {
    name: String,
    nf_type: usize,
    class: usize,
    zone: usize,
    networks: Vec<usize>,
    sessions: Option<u64>,
}

#[derive(Debug, Clone)]
struct World {
    instances: Vec<Instance>,
    clusters: Vec<(String, Vec<usize>)>,
}

#[derive(Debug, Clone)]
enum Edit {
    AddInstance(usize, usize, Vec<usize>),
    RemoveInstance(prop::sample::Index),
    Capacity(prop::sample::Index, Option<u64>),
    Networks(prop::sample::Index, Vec<usize>),
    Selector(prop::sample::Index, usize),
    Class(prop::sample::Index),
    AddSite(Vec<usize>),
    RemoveSite(prop::sample::Index),
    RelabelSite(prop::sample::Index, Vec<usize>),
}

fn networks() -> impl Strategy<Value = Vec<usize>> {
    prop::collection::vec(0..5usize, 0..3)
}

fn zones() -> impl Strategy<Value = Vec<usize>> {
    prop::collection::vec(0..ZONES, 0..3)
}

fn world() -> impl Strategy<Value = World> {
    let instance = (
        0..3usize,
        0..2usize,
        0..ZONES,
        networks(),
        prop::option::of(1..4u64),
    );
    (
        prop::collection::vec(instance, 1..7),
        prop::collection::vec(zones(), 1..6),
    )
        .prop_map(|(instances, clusters)| World {
            instances: instances
                .into_iter()
                .enumerate()
                .map(|(i, (nf_type, class, zone, networks, sessions))| Instance {
                    name: format!("nf{i}"),
                    nf_type,
                    class,
                    zone,
                    networks,
                    sessions,
                })
                .collect(),
            clusters: clusters
                .into_iter()
                .enumerate()
                .map(|(c, z)| (format!("c{c}"), z))
                .collect(),
        })
}

fn edit() -> impl Strategy<Value = Edit> {
    let index = any::<prop::sample::Index>;
    prop_oneof![
        (0..3usize, 0..ZONES, networks()).prop_map(|(t, z, n)| Edit::AddInstance(t, z, n)),
        index().prop_map(Edit::RemoveInstance),
        (index(), prop::option::of(1..4u64)).prop_map(|(i, s)| Edit::Capacity(i, s)),
        (index(), networks()).prop_map(|(i, n)| Edit::Networks(i, n)),
        (index(), 0..ZONES).prop_map(|(i, z)| Edit::Selector(i, z)),
        index().prop_map(Edit::Class),
        zones().prop_map(Edit::AddSite),
        index().prop_map(Edit::RemoveSite),
        (index(), zones()).prop_map(|(i, z)| Edit::RelabelSite(i, z)),
    ]
}

impl World {
    fn edited(&self, edits: &[Edit]) -> World {
        let mut world = self.clone();
        for (n, edit) in edits.iter().enumerate() {
            let count = world.instances.len();
            let sites = world.clusters.len();
            match edit {
                Edit::AddInstance(nf_type, zone, networks) => world.instances.push(Instance {
                    name: format!("new{n}"),
                    nf_type: *nf_type,
                    class: 0,
                    zone: *zone,
                    networks: networks.clone(),
                    sessions: None,
                }),
                Edit::RemoveInstance(i) if count > 0 => {
                    world.instances.remove(i.index(count));
                }
                Edit::Capacity(i, sessions) if count > 0 => {
                    world.instances[i.index(count)].sessions = *sessions;
                }
                Edit::Networks(i, networks) if count > 0 => {
                    world.instances[i.index(count)].networks = networks.clone();
                }
                Edit::Selector(i, zone) if count > 0 => {
                    world.instances[i.index(count)].zone = *zone
                }
                Edit::Class(i) if count > 0 => {
                    let instance = &mut world.instances[i.index(count)];
                    instance.class = 1 - instance.class;
                }
                Edit::AddSite(zones) => world.clusters.push((format!("s{n}"), zones.clone())),
                Edit::RemoveSite(i) if sites > 0 => {
                    world.clusters.remove(i.index(sites));
                }
                Edit::RelabelSite(i, zones) if sites > 0 => {
                    world.clusters[i.index(sites)].1 = zones.clone();
                }
                _ => {}
            }
        }
        world
    }

    fn plan(&self, policy: DeletionPolicy) -> Plan {
        let nf_instances: Vec<_> = self
            .instances
            .iter()
            .map(|i| {
                let mut template = json!({
                    "nfType": TYPES[i.nf_type],
                    "className": format!("{}-{}", TYPES[i.nf_type], i.class),
                    "nfInterfaces": i.networks.iter().map(|n| json!({"name": format!("if{n}"), "networkInstanceName": format!("net{n}")})).collect::<Vec<_>>(),
                });
                if let Some(sessions) = i.sessions {
                    template["capacity"] = json!({"maxSessions": sessions});
                }
                json!({
                    "name": i.name,
                    "clusterSelector": {"matchLabels": {format!("z{}", i.zone): "yes"}},
                    "nfTemplate": template,
                })
            })
            .collect();
        let topology: NFTopology = serde_json::from_value(json!({
            "metadata": {"name": "t"},
            "spec": {"deletionPolicy": policy.as_str(), "nfInstances": nf_instances}
        }))
        .unwrap();
        let clusters: Vec<Cluster> = self
            .clusters
            .iter()
            .map(|(name, zones)| {
                Cluster::new(name.clone(), zones.iter().map(|z| (format!("z{z}"), "yes")))
            })
            .collect();
        plan::plan(&topology, &classes(), &clusters, &RolloutPolicy::default()).unwrap()
    }
}

fn classes() -> Vec<NFClass> {
    TYPES
        .iter()
        .flat_map(|t| (0..2).map(move |k| (t, k)))
        .map(|(t, k)| {
            serde_json::from_value(json!({
                "metadata": {"name": format!("{t}-{k}")},
                "spec": {"packageRef": {"repository": "catalog", "packageName": format!("{t}-pkg-{k}")}}
            }))
            .unwrap()
        })
        .collect()
}

/// How an old child is observed.
#[derive(Debug, Clone, Copy)]
enum Observed {
    /// As created, with its fingerprint.
    AsCreated,
    /// Never created (an interrupted run).
    Missing,
    /// Without a fingerprint (made before fingerprints).
    Unstamped,
    /// Twice (an interrupted earlier run).
    Twice,
}

fn observed() -> impl Strategy<Value = Observed> {
    prop_oneof![
        6 => Just(Observed::AsCreated),
        1 => Just(Observed::Missing),
        1 => Just(Observed::Unstamped),
        1 => Just(Observed::Twice),
    ]
}

/// The old plan's children as created, every one stamped and approved as `approved` says.
fn created(old: &[PlannedChild], approved: &[bool]) -> Vec<ExistingChild> {
    old.iter()
        .enumerate()
        .map(|(i, c)| ExistingChild {
            id: format!("d{i}"),
            key: c.key.clone(),
            fingerprint: Some(c.fingerprint),
            prepared: true,
            approved: approved.get(i).copied().unwrap_or(false),
        })
        .collect()
}

/// The old plan's children as `how` says they are observed.
fn perturbed(old: &[PlannedChild], how: &[Observed], approved: &[bool]) -> Vec<ExistingChild> {
    let mut children = Vec::new();
    for (i, child) in created(old, approved).into_iter().enumerate() {
        match how.get(i).copied().unwrap_or(Observed::AsCreated) {
            Observed::AsCreated => children.push(child),
            Observed::Missing => {}
            Observed::Unstamped => children.push(ExistingChild {
                fingerprint: None,
                ..child
            }),
            Observed::Twice => {
                children.push(ExistingChild {
                    id: format!("{}-copy", child.id),
                    ..child.clone()
                });
                children.push(child);
            }
        }
    }
    children
}

fn wanted(desired: &[PlannedChild]) -> Vec<(ChildKey, Option<Fingerprint>)> {
    let mut wanted: Vec<_> = desired
        .iter()
        .map(|c| (c.key.clone(), Some(c.fingerprint)))
        .collect();
    wanted.sort();
    wanted
}

fn touched(changes: &ChildChanges) -> BTreeSet<ChildKey> {
    changes
        .create
        .iter()
        .map(|c| c.key.clone())
        .chain(changes.update.iter().map(|u| u.child.key.clone()))
        .chain(
            changes
                .delete
                .iter()
                .chain(&changes.orphan)
                .map(|c| c.key.clone()),
        )
        .collect()
}

fn specs(children: &[PlannedChild]) -> BTreeMap<&ChildKey, &ChildSpec> {
    children.iter().map(|c| (&c.key, &c.spec)).collect()
}

fn policy() -> impl Strategy<Value = DeletionPolicy> {
    prop_oneof![Just(DeletionPolicy::Delete), Just(DeletionPolicy::Orphan)]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn applying_the_diff_gives_exactly_the_new_plans_children(
        old in world(),
        edits in prop::collection::vec(edit(), 0..6),
        how in prop::collection::vec(observed(), 0..30),
        approved in prop::collection::vec(any::<bool>(), 0..30),
        policy in policy(),
    ) {
        let new = old.edited(&edits);
        let before = desired_children(&old.plan(policy));
        let after = desired_children(&new.plan(policy));
        let existing = perturbed(&before, &how, &approved);
        let changes = diff(&existing, &after, policy);
        let applied = apply(&existing, &changes);
        prop_assert_eq!(&applied.children, &wanted(&after));
        // Carried out, nothing is left to do.
        let next: Vec<ExistingChild> = applied.children.iter().enumerate().map(|(i, (key, fingerprint))| ExistingChild {
            id: format!("n{i}"), key: key.clone(), fingerprint: *fingerprint, prepared: true, approved: false,
        }).collect();
        prop_assert_eq!(diff(&next, &after, policy), ChildChanges::default());
        // Every existing child is kept, updated, deleted or orphaned: none is lost or named twice.
        let mut named: Vec<&str> = changes.delete.iter().chain(&changes.orphan).map(|c| c.id.as_str())
            .chain(changes.update.iter().map(|u| u.id.as_str())).collect();
        let len = named.len();
        named.sort();
        named.dedup();
        prop_assert_eq!(named.len(), len, "an existing child is named twice");
    }

    #[test]
    fn only_what_changed_is_touched_and_in_the_fewest_changes(
        old in world(),
        edits in prop::collection::vec(edit(), 0..6),
        approved in prop::collection::vec(any::<bool>(), 0..30),
    ) {
        let new = old.edited(&edits);
        let before = desired_children(&old.plan(DeletionPolicy::Delete));
        let after = desired_children(&new.plan(DeletionPolicy::Delete));
        let existing = created(&before, &approved);
        let changes = diff(&existing, &after, DeletionPolicy::Delete);
        let (old_specs, new_specs) = (specs(&before), specs(&after));
        let old_keys: BTreeSet<&ChildKey> = old_specs.keys().copied().collect();
        let new_keys: BTreeSet<&ChildKey> = new_specs.keys().copied().collect();
        let changed: BTreeSet<&ChildKey> = old_keys.intersection(&new_keys)
            .filter(|k| old_specs[*k] != new_specs[*k]).copied().collect();
        let touched = touched(&changes);
        for key in old_keys.intersection(&new_keys) {
            if !changed.contains(key) {
                prop_assert!(!touched.contains(*key), "unchanged {} is touched", key);
            }
        }
        let created: BTreeSet<&ChildKey> = changes.create.iter().map(|c| &c.key).collect();
        let updated: BTreeSet<&ChildKey> = changes.update.iter().map(|u| &u.child.key).collect();
        let deleted: BTreeSet<&ChildKey> = changes.delete.iter().map(|c| &c.key).collect();
        prop_assert_eq!(created, new_keys.difference(&old_keys).copied().collect::<BTreeSet<_>>());
        prop_assert_eq!(&deleted, &old_keys.difference(&new_keys).copied().collect::<BTreeSet<_>>());
        prop_assert_eq!(&updated, &changed);
        prop_assert_eq!(
            changes.action_count(),
            new_keys.symmetric_difference(&old_keys).count() + changed.len()
        );
        prop_assert!(changes.orphan.is_empty());
        // A recreation is exactly a change of deployed id or template.
        for update in &changes.update {
            let was = old_specs[&update.child.key];
            let moved = was.deployed_id != update.child.spec.deployed_id
                || was.package_ref.package_name != update.child.spec.package_ref.package_name;
            prop_assert_eq!(update.recreate, moved, "{}", update.child.key);
        }
    }

    #[test]
    fn under_orphan_nothing_is_deleted_and_the_orphans_are_exactly_the_unwanted(
        old in world(),
        edits in prop::collection::vec(edit(), 0..6),
        how in prop::collection::vec(observed(), 0..30),
    ) {
        let new = old.edited(&edits);
        let before = desired_children(&old.plan(DeletionPolicy::Orphan));
        let after = desired_children(&new.plan(DeletionPolicy::Orphan));
        let existing = perturbed(&before, &how, &[]);
        let orphaning = diff(&existing, &after, DeletionPolicy::Orphan);
        let deleting = diff(&existing, &after, DeletionPolicy::Delete);
        prop_assert!(orphaning.delete.is_empty());
        prop_assert_eq!(&orphaning.orphan, &deleting.delete);
        prop_assert_eq!(&orphaning.create, &deleting.create);
        prop_assert_eq!(&orphaning.update, &deleting.update);
        let new_keys: BTreeSet<&ChildKey> = after.iter().map(|c| &c.key).collect();
        let unwanted: BTreeSet<&str> = existing.iter().filter(|c| !new_keys.contains(&c.key))
            .map(|c| c.id.as_str()).collect();
        let orphans: BTreeSet<&str> = orphaning.orphan.iter().map(|c| c.id.as_str()).collect();
        // The unwanted, plus the surplus copies of children that are still wanted.
        prop_assert!(unwanted.is_subset(&orphans));
        for surplus in orphans.difference(&unwanted) {
            let copy = format!("{surplus}-copy");
            let doubled = surplus.ends_with("-copy") || existing.iter().any(|c| c.id == copy);
            prop_assert!(doubled, "{} is orphaned but wanted and not doubled", surplus);
        }
    }

    #[test]
    fn a_new_child_waits_for_what_the_change_creates(
        old in world(),
        edits in prop::collection::vec(edit(), 0..6),
        approved in prop::collection::vec(any::<bool>(), 0..30),
    ) {
        let new = old.edited(&edits);
        let before = desired_children(&old.plan(DeletionPolicy::Delete));
        let new_plan = new.plan(DeletionPolicy::Delete);
        let after = desired_children(&new_plan);
        let existing = created(&before, &approved);
        let changes = diff(&existing, &after, DeletionPolicy::Delete);
        let coming: BTreeSet<&ChildKey> = changes.create.iter().map(|c| &c.key)
            .chain(changes.update.iter().filter(|u| u.recreate).map(|u| &u.child.key)).collect();
        let gates = new_child_gates(&new_plan, &existing, &changes);
        prop_assert_eq!(gates.len(), coming.len());
        for child in &gates {
            let v = after.iter().find(|c| c.key == child.key).unwrap().variant;
            prop_assert_eq!(child.waits.len(), new_plan.gates(v).len());
            for wait in &child.waits {
                let expected = if coming.contains(&wait.waits_for) {
                    GateState::AwaitingCreation
                } else if existing.iter().any(|c| c.key == wait.waits_for && c.approved) {
                    GateState::Open
                } else {
                    GateState::AwaitingApproval
                };
                prop_assert_eq!(wait.state, expected, "{} waiting for {}", child.key, wait.waits_for);
            }
        }
    }
}
