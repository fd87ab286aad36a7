//! The set of preparers known at one moment: the built-in topology kinds plus every registered
//! `prepare` plugin's triggers (registering one makes its trigger GVKs preparable), and the
//! registered `validate` plugins by trigger (which make nothing preparable: they are asked
//! about a package once it is prepared), and the registered `schedule` plugins by trigger
//! (asked to choose a Placement's sites).

use std::collections::HashMap;

use nephrite_krm::Gvk;
use nephrite_merge::topology::is_built_in;

use crate::store::{PluginRecord, Store, StoreError};

/// Plugins by trigger, as of when it was loaded.
#[derive(Debug, Clone, Default)]
pub struct PreparerSet {
    by_trigger: HashMap<Gvk, PluginRecord>,
    validators: HashMap<Gvk, Vec<PluginRecord>>,
    schedulers: HashMap<Gvk, Vec<PluginRecord>>,
}

impl PreparerSet {
    /// Loads the registered `prepare`, `validate` and `schedule` plugins.
    pub async fn load(store: &dyn Store) -> Result<Self, StoreError> {
        let mut by_trigger = HashMap::new();
        let mut validators: HashMap<Gvk, Vec<PluginRecord>> = HashMap::new();
        let mut schedulers: HashMap<Gvk, Vec<PluginRecord>> = HashMap::new();
        for plugin in store.list_plugins().await? {
            for trigger in &plugin.triggers {
                let gvk = Gvk::new(&trigger.group, &trigger.version, &trigger.kind);
                match plugin.plugin_type.as_str() {
                    "prepare" => {
                        by_trigger.entry(gvk).or_insert_with(|| plugin.clone());
                    }
                    "validate" => validators.entry(gvk).or_default().push(plugin.clone()),
                    "schedule" => schedulers.entry(gvk).or_default().push(plugin.clone()),
                    _ => {}
                }
            }
        }
        Ok(PreparerSet {
            by_trigger,
            validators,
            schedulers,
        })
    }

    /// The schedulers triggered by `gvk` (a Placement's).
    pub fn schedulers_for(&self, gvk: &Gvk) -> &[PluginRecord] {
        self.schedulers
            .get(gvk)
            .map(Vec::as_slice)
            .unwrap_or_default()
    }

    /// The validators triggered by `gvk`, by name.
    pub fn validators_for(&self, gvk: &Gvk) -> &[PluginRecord] {
        self.validators
            .get(gvk)
            .map(Vec::as_slice)
            .unwrap_or_default()
    }

    /// Whether a validator is triggered by `gvk`.
    pub fn has_validator(&self, gvk: &Gvk) -> bool {
        self.validators.contains_key(gvk)
    }

    /// Whether `gvk` has a preparer.
    pub fn has_preparer(&self, gvk: &Gvk) -> bool {
        is_built_in(gvk) || self.by_trigger.contains_key(gvk)
    }

    /// The plugin triggered by `gvk` (built-ins win over plugins).
    pub fn plugin_for(&self, gvk: &Gvk) -> Option<&PluginRecord> {
        if is_built_in(gvk) {
            return None;
        }
        self.by_trigger.get(gvk)
    }
}
