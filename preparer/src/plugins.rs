//! The set of preparers known at one moment: the built-in topology kinds plus every registered
//! plugin's triggers. Registering a plugin makes its trigger GVKs preparable.

use std::collections::HashMap;

use nephrite_krm::Gvk;
use nephrite_merge::topology::is_built_in;

use crate::store::{PluginRecord, Store, StoreError};

/// Plugins by trigger, as of when it was loaded.
#[derive(Debug, Clone, Default)]
pub struct PreparerSet {
    by_trigger: HashMap<Gvk, PluginRecord>,
}

impl PreparerSet {
    /// Loads the registered `prepare` plugins.
    pub async fn load(store: &dyn Store) -> Result<Self, StoreError> {
        let mut by_trigger = HashMap::new();
        for plugin in store.list_plugins().await? {
            if plugin.plugin_type != "prepare" {
                continue;
            }
            for trigger in &plugin.triggers {
                by_trigger
                    .entry(Gvk::new(&trigger.group, &trigger.version, &trigger.kind))
                    .or_insert_with(|| plugin.clone());
            }
        }
        Ok(PreparerSet { by_trigger })
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
