//! The parent packages the tracker wrote, parsed ahead of its next reconcile.
//!
//! A topology deployment's package holds the NFTopology, its classes, the deployed topology
//! and the status: two megabytes of YAML for 10,000 instances, half a second to read back
//! into objects and types. The tracker writes that package at the end of a reconcile and, as
//! long as nobody else writes it, reads the same text at the start of the next one. So once
//! written, the text is parsed off the async threads while nothing waits for it, and the next
//! reconcile that reads exactly that text takes the parse instead of making it (a different
//! text — an operator's edit — is parsed as before).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use nephrite_krm::Package;
use nephrite_topology::api::{NFClass, NFTopology};

use super::topology_of;

/// A parent's package text and what it reads as.
#[derive(Debug)]
pub struct Parsed {
    /// The text, as written.
    pub yaml: String,
    /// Its objects.
    pub package: Package,
    /// Its NFTopology.
    pub topology: NFTopology,
    /// Its NFClasses.
    pub classes: Vec<NFClass>,
}

/// The last package text the tracker wrote per parent, parsed (shared by clones).
#[derive(Debug, Clone, Default)]
pub struct ParsedPackages {
    by_parent: Arc<Mutex<HashMap<String, Arc<Parsed>>>>,
}

impl ParsedPackages {
    fn by_parent(&self) -> std::sync::MutexGuard<'_, HashMap<String, Arc<Parsed>>> {
        // A panic while holding this lock leaves a plain map behind: still usable.
        self.by_parent.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The parse of `yaml` when it is exactly the text last written for `parent` and its
    /// parse is ready.
    pub fn get(&self, parent: &str, yaml: &str) -> Option<Arc<Parsed>> {
        self.by_parent()
            .get(parent)
            .filter(|parsed| parsed.yaml == yaml)
            .cloned()
    }

    /// Parses `yaml`, just written as `parent`'s package, on a blocking thread, and keeps the
    /// parse for [`ParsedPackages::get`] (a text that does not read is not kept, and the
    /// parent's older parse is dropped either way).
    pub fn prepare(&self, parent: &str, yaml: String) {
        self.by_parent().remove(parent);
        let packages = self.clone();
        let parent = parent.to_owned();
        tokio::task::spawn_blocking(move || {
            let Ok(package) = Package::from_yaml(&yaml) else {
                return;
            };
            let Ok((topology, classes)) = topology_of(&parent, &package, "") else {
                return;
            };
            let parsed = Parsed {
                yaml,
                package,
                topology,
                classes,
            };
            packages.by_parent().insert(parent, Arc::new(parsed));
        });
    }

    /// Drops `parent`'s parse (it was deleted).
    pub fn forget(&self, parent: &str) {
        self.by_parent().remove(parent);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const PACKAGE: &str = "\
apiVersion: topology.nephio.org/v1alpha1
kind: NFTopology
metadata:
  name: t
spec:
  nfInstances: []
";

    #[tokio::test]
    async fn a_written_text_is_parsed_once_and_only_that_text_hits() {
        let packages = ParsedPackages::default();
        packages.prepare("p", PACKAGE.to_owned());
        // The parse runs on a blocking thread (a bound on liveness, not a timing check).
        let mut parsed = None;
        for _ in 0..1_000 {
            parsed = packages.get("p", PACKAGE);
            if parsed.is_some() {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(5)).await;
        }
        let parsed = parsed.expect("the written text is parsed");
        assert_eq!(parsed.topology.name(), "t");
        assert_eq!(parsed.package.len(), 1);
        assert!(packages.get("p", &format!("{PACKAGE}# edited\n")).is_none());
        assert!(packages.get("q", PACKAGE).is_none());
        packages.forget("p");
        assert!(packages.get("p", PACKAGE).is_none());
    }
}
