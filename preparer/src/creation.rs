//! Creating deployments: the template's package copied, the merge package merged in, the
//! Deployment resource added, metadata computed — and, when nothing in the package needs
//! preparing, marked prepared (and approved by the approve rules) right away, exactly as the
//! loop's first pass would. Used by the Data API and by the built-in preparers.

use std::collections::HashMap;

use nephrite_krm::{Gvk, Package};
use nephrite_merge::metadata::{Metadata, extract_metadata, overlay};
use nephrite_merge::{DeploymentResource, merge_package, preparable_resources};

use crate::errors::{ApiError, check_id};
use crate::store::{DeploymentInfo, NewDeployment, Store, TemplateRecord};

/// One deployment to create.
#[derive(Debug, Clone, Default)]
pub struct CreateDeployment {
    /// Parent id (empty: none).
    pub parent_id: String,
    /// Template id (empty: the package is the merge package alone).
    pub template_id: String,
    /// Site id (empty: none).
    pub site_id: String,
    /// Merged into the template's package.
    pub merge: Package,
    /// Laid over the computed metadata.
    pub merge_metadata: Metadata,
    /// Create it marked prepared.
    pub prepared: bool,
    /// Create it marked approved.
    pub approved: bool,
    /// Makes (parent, template, site, key) unique.
    pub instance_key: String,
}

/// What creation needs to know beyond the store.
#[derive(Clone, Copy)]
pub struct CreationContext<'a> {
    /// The daemon's auto-approve setting.
    pub auto_approve: bool,
    /// Whether a GVK has a preparer (built-in or plugin trigger).
    pub has_preparer: &'a (dyn Fn(&Gvk) -> bool + Sync),
    /// Now, RFC 3339.
    pub now: &'a str,
    /// Skip checking that sites exist (the caller just listed them).
    pub sites_verified: bool,
}

/// A new K-sortable deployment id.
pub fn new_deployment_id() -> String {
    uuid::Uuid::now_v7().to_string()
}

/// Creates `requests` in one store transaction; `(created, id)` for each.
pub async fn create_deployments(
    store: &dyn Store,
    context: CreationContext<'_>,
    requests: Vec<CreateDeployment>,
) -> Result<Vec<(bool, String)>, ApiError> {
    let mut templates: HashMap<String, (TemplateRecord, Package)> = HashMap::new();
    let mut parents_seen: HashMap<String, ()> = HashMap::new();
    let mut sites_seen: HashMap<String, ()> = HashMap::new();
    let mut rows = Vec::with_capacity(requests.len());
    for request in requests {
        if !request.parent_id.is_empty() && !parents_seen.contains_key(&request.parent_id) {
            check_id("parent deployment id", &request.parent_id)?;
            store.get_deployment(&request.parent_id).await?;
            parents_seen.insert(request.parent_id.clone(), ());
        }
        if !request.site_id.is_empty() && !sites_seen.contains_key(&request.site_id) {
            check_id("site id", &request.site_id)?;
            if !context.sites_verified {
                store.get_site(&request.site_id).await?;
            }
            sites_seen.insert(request.site_id.clone(), ());
        }
        let (mut package, template_metadata) = if request.template_id.is_empty() {
            (Package::new(), Metadata::new())
        } else {
            if !templates.contains_key(&request.template_id) {
                check_id("template id", &request.template_id)?;
                let template = store.get_template(&request.template_id).await?;
                let package = Package::from_yaml(&template.package_yaml).map_err(|e| {
                    ApiError::BadPackage {
                        what: format!("template {}", template.id),
                        message: e.to_string(),
                    }
                })?;
                templates.insert(request.template_id.clone(), (template, package));
            }
            let (template, package) = &templates[&request.template_id];
            (package.clone(), template.metadata.clone())
        };
        merge_package(&mut package, &request.merge, |_| false).map_err(|source| {
            ApiError::Merge {
                what: format!("template {:?}", request.template_id),
                source: Box::new(source),
            }
        })?;
        let template_id = (!request.template_id.is_empty()).then_some(request.template_id.as_str());
        let site_id = (!request.site_id.is_empty()).then_some(request.site_id.as_str());
        DeploymentResource::ensure(&mut package, template_id, site_id)
            .map_err(|e| ApiError::Invalid(e.to_string()))?;
        let own = overlay(&extract_metadata(&package), &request.merge_metadata);
        let metadata = overlay(&template_metadata, &own);
        let mut prepared = request.prepared;
        let mut approved = request.approved;
        if request.prepared || preparable_resources(&package, context.has_preparer).is_empty() {
            let approval =
                DeploymentResource::mark_prepared(&mut package, context.auto_approve, context.now)
                    .map_err(|e| ApiError::Invalid(e.to_string()))?;
            prepared = true;
            approved = approved || approval == nephrite_merge::Approval::Approved;
        }
        if request.approved {
            DeploymentResource::mark_approved(&mut package)
                .map_err(|e| ApiError::Invalid(e.to_string()))?;
        }
        rows.push(NewDeployment {
            info: DeploymentInfo {
                id: new_deployment_id(),
                parent_id: request.parent_id,
                template_id: request.template_id,
                site_id: request.site_id,
                instance_key: request.instance_key,
                metadata,
                created: context.now.to_owned(),
                updated: context.now.to_owned(),
                prepared,
                approved,
                error: String::new(),
            },
            package_yaml: package.to_yaml(),
        });
    }
    Ok(store.create_deployments(rows).await?)
}
