//! CustomResourceDefinitions: a CRD is checked and given the status a real apiserver's
//! controllers would set in the same write, its resource is served as soon as it is stored,
//! and deleting it stops serving the resource, deletes its objects and ends its watches.

use nephrite_krm::Object;
use serde_json::{Value, json};

use super::write::set_body;
use super::{ObjectKey, StorageKey, Store};
use crate::error::ApiError;
use crate::resources;

/// How a CRD is named in error messages.
const CRD_KIND: &str = "CustomResourceDefinition.apiextensions.k8s.io";

/// The annotation a CRD of a protected group must carry (the API review that approved it).
const API_APPROVED: &str = "api-approved.kubernetes.io";

/// Whether a CRD group is one of Kubernetes' own (`k8s.io`, `kubernetes.io` and their
/// subdomains), whose CRDs need [`API_APPROVED`].
fn is_protected_group(group: &str) -> bool {
    ["k8s.io", "kubernetes.io"]
        .iter()
        .any(|g| group == *g || group.ends_with(&format!(".{g}")))
}

impl Store {
    /// Validates a CRD (against `old`, its stored state, on an update) and fills in the status
    /// a real apiserver's controllers would set. Conditions keep their `lastTransitionTime`,
    /// so rewriting an unchanged CRD stays a no-op.
    pub(super) fn prepare_crd(
        &self,
        crd: &mut Object,
        old: Option<&Object>,
    ) -> Result<(), ApiError> {
        let name = crd.name().unwrap_or("").to_string();
        let json = crd.to_json();
        let def = resources::parse_crd(&json)
            .map_err(|p| ApiError::invalid(CRD_KIND, &name, &p.field, &p.problem))?;
        let approved = crd
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(API_APPROVED))
            .is_some_and(|v| !v.is_empty());
        if is_protected_group(&def.group) && !approved {
            return Err(ApiError::invalid(
                CRD_KIND,
                &name,
                &format!("metadata.annotations[{API_APPROVED}]"),
                &format!(
                    "Required value: protected groups must have approval annotation {API_APPROVED:?}, see https://github.com/kubernetes/enhancements/pull/1111"
                ),
            ));
        }
        let old_json = old.map(Object::to_json);
        if let Some(old) = &old_json {
            // An established CRD's scope and kind are immutable (and the stored objects' keys
            // depend on the scope).
            for (pointer, field) in [
                ("/spec/scope", "spec.scope"),
                ("/spec/names/kind", "spec.names.kind"),
            ] {
                let (was, is) = (old.pointer(pointer), json.pointer(pointer));
                if was != is {
                    return Err(ApiError::invalid(
                        CRD_KIND,
                        &name,
                        field,
                        &format!(
                            "Invalid value: {}: field is immutable",
                            is.unwrap_or(&Value::Null)
                        ),
                    ));
                }
            }
        }
        let clashes = self
            .types
            .iter()
            .any(|t| t.group == def.group && t.plural == def.plural && t.crd.is_none());
        if clashes {
            return Err(ApiError::invalid(
                CRD_KIND,
                &name,
                "spec.names.plural",
                "Invalid value: the group/resource is served by a built-in type",
            ));
        }
        let time = super::meta::now();
        let condition = |t: &str, reason: &str, msg: &str| {
            let since = old_json
                .as_ref()
                .and_then(|o| o.pointer("/status/conditions"))
                .and_then(Value::as_array)
                .and_then(|cs| {
                    cs.iter()
                        .find(|c| c.get("type").and_then(Value::as_str) == Some(t))
                })
                .and_then(|c| c.get("lastTransitionTime"))
                .cloned()
                .unwrap_or_else(|| json!(time));
            json!({"type": t, "status": "True", "lastTransitionTime": since, "reason": reason, "message": msg})
        };
        let stored_versions: Vec<Value> = json
            .pointer("/spec/versions")
            .and_then(Value::as_array)
            .map(|vs| {
                vs.iter()
                    .filter(|v| v.get("storage").and_then(Value::as_bool).unwrap_or(false))
                    .filter_map(|v| v.get("name").cloned())
                    .collect()
            })
            .unwrap_or_default();
        set_body(
            crd,
            "status",
            json!({
                "conditions": [
                    condition("NamesAccepted", "NoConflicts", "no conflicts found"),
                    condition("Established", "InitialNamesAccepted", "the initial names have been accepted"),
                ],
                "acceptedNames": def.names,
                "storedVersions": stored_versions,
            }),
        );
        Ok(())
    }

    /// Serves the resource a stored CRD defines (replacing what it served before).
    pub(super) fn serve_crd(&mut self, crd: &Object) {
        let Ok(def) = resources::parse_crd(&crd.to_json()) else {
            return;
        };
        let name = crd.name().unwrap_or("");
        self.types.retain(|t| t.crd.as_deref() != Some(name));
        self.types.extend(def.types);
    }

    /// Stops serving a deleted CRD's resource: its objects are deleted (each with a DELETED
    /// event) and its watches end.
    pub(super) fn unserve_crd(&mut self, crd: &Object) {
        let name = crd.name().unwrap_or("");
        self.types.retain(|t| t.crd.as_deref() != Some(name));
        if let Ok(def) = resources::parse_crd(&crd.to_json()) {
            let storage = StorageKey::new(&def.group, &def.plural);
            let keys: Vec<ObjectKey> = self
                .objects
                .get(&storage)
                .map(|m| m.keys().cloned().collect())
                .unwrap_or_default();
            for key in keys {
                self.commit_remove(&storage, &key, None);
            }
            self.objects.remove(&storage);
            self.close_watchers(&storage);
        }
    }
}
