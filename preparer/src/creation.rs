//! Creating deployments: the template's package copied, the merge package merged in, the
//! Deployment resource added, metadata computed — and, when nothing in the package needs
//! preparing or validating, marked prepared (and approved by the approve rules) right away,
//! exactly as the loop's first pass would. Used by the Data API and by the built-in
//! preparers.

use std::collections::{HashMap, HashSet};

use nephrite_krm::{Gvk, Object, Package};
use nephrite_merge::deployment::DEPLOYMENT_NAME;
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
    /// Whether a GVK has a validation plugin: a package holding one is left to the loop,
    /// which validates it before marking it prepared.
    pub has_validator: &'a (dyn Fn(&Gvk) -> bool + Sync),
    /// Now, RFC 3339.
    pub now: &'a str,
    /// Skip checking that sites exist (the caller just listed them).
    pub sites_verified: bool,
    /// Who creates them (their first revision's author).
    pub author: &'a str,
}

/// A new K-sortable deployment id.
pub fn new_deployment_id() -> String {
    uuid::Uuid::now_v7().to_string()
}

/// What the children of one template and merge package share: the template's package with
/// the merge package merged, each resource already written as YAML. A placement creates
/// thousands of children that differ only in their Deployment resource, so only that resource
/// is edited and written per child.
struct Shape {
    template_id: String,
    merge: Package,
    /// The template's metadata.
    template_metadata: Metadata,
    /// Template + merge, without per-child changes.
    package: Package,
    /// Where the package's own Deployment resource is, if it has one.
    deployment_at: Option<usize>,
    /// Each resource of `package` as a YAML document.
    documents: Vec<String>,
    /// Metadata extracted from `package`.
    extracted: Metadata,
    /// Whether nothing in `package` but the Deployment resource is preparable.
    nothing_preparable: bool,
}

impl Shape {
    async fn new(
        store: &dyn Store,
        context: &CreationContext<'_>,
        templates: &mut HashMap<String, (TemplateRecord, Package)>,
        template_id: &str,
        merge: &Package,
    ) -> Result<Shape, ApiError> {
        let (mut package, template_metadata) = if template_id.is_empty() {
            (Package::new(), Metadata::new())
        } else {
            if !templates.contains_key(template_id) {
                check_id("template id", template_id)?;
                let template = store.get_template(template_id).await?;
                let package = Package::from_yaml(&template.package_yaml).map_err(|e| {
                    ApiError::BadPackage {
                        what: format!("template {}", template.id),
                        message: e.to_string(),
                    }
                })?;
                templates.insert(template_id.to_owned(), (template, package));
            }
            let (template, package) = &templates[template_id];
            (package.clone(), template.metadata.clone())
        };
        merge_package(&mut package, merge, |_| false).map_err(|source| ApiError::Merge {
            what: format!("template {template_id:?}"),
            source: Box::new(source),
        })?;
        let deployment_at = package.iter().position(DeploymentResource::is);
        let nothing_preparable = preparable_resources(&package, context.has_preparer)
            .iter()
            .all(|&at| Some(at) == deployment_at)
            && !package.iter().any(|o| (context.has_validator)(&o.gvk()));
        Ok(Shape {
            template_id: template_id.to_owned(),
            merge: merge.clone(),
            template_metadata,
            documents: package.iter().map(Object::to_yaml).collect(),
            extracted: extract_metadata(&package),
            deployment_at,
            nothing_preparable,
            package,
        })
    }

    fn fits(&self, request: &CreateDeployment) -> bool {
        self.template_id == request.template_id && self.merge == request.merge
    }

    /// One child's package (as YAML), metadata, prepared and approved state.
    fn child(
        &self,
        context: &CreationContext<'_>,
        request: &CreateDeployment,
    ) -> Result<(String, Metadata, bool, bool), ApiError> {
        let invalid =
            |e: nephrite_merge::deployment::DeploymentError| ApiError::Invalid(e.to_string());
        // The Deployment resource alone: every rule below reads and writes only it.
        let deployment = match self.deployment_at {
            Some(at) => self.package.objects()[at].clone(),
            None => Object::new(&DeploymentResource::gvk(), DEPLOYMENT_NAME),
        };
        let mut single = Package::from(vec![deployment]);
        let template_id = (!request.template_id.is_empty()).then_some(request.template_id.as_str());
        let site_id = (!request.site_id.is_empty()).then_some(request.site_id.as_str());
        DeploymentResource::ensure(&mut single, template_id, site_id).map_err(invalid)?;
        let own = overlay(&self.extracted, &request.merge_metadata);
        let metadata = overlay(&self.template_metadata, &own);
        let mut prepared = request.prepared;
        let mut approved = request.approved;
        let nothing_preparable = self.nothing_preparable
            && preparable_resources(&single, context.has_preparer).is_empty();
        if request.prepared || nothing_preparable {
            let approval =
                DeploymentResource::mark_prepared(&mut single, context.auto_approve, context.now)
                    .map_err(invalid)?;
            prepared = true;
            approved = approved || approval == nephrite_merge::Approval::Approved;
        }
        if request.approved {
            DeploymentResource::mark_approved(&mut single).map_err(invalid)?;
        }
        let deployment = single.objects()[0].to_yaml();
        let mut yaml = String::with_capacity(
            self.documents.iter().map(String::len).sum::<usize>() + deployment.len() + 64,
        );
        let mut document = |text: &str| {
            if !yaml.is_empty() {
                yaml.push_str("---\n");
            }
            yaml.push_str(text);
        };
        for (at, text) in self.documents.iter().enumerate() {
            document(if Some(at) == self.deployment_at {
                &deployment
            } else {
                text
            });
        }
        if self.deployment_at.is_none() {
            document(&deployment);
        }
        Ok((yaml, metadata, prepared, approved))
    }
}

/// Turns create requests into the rows the store inserts, checking each (its parent, site and
/// template exist; the merge applies) and reusing what the request before shares: the
/// template's package, and the merged package of the same template and merge package, written
/// as YAML once (only each child's Deployment resource is edited and written per child).
#[derive(Default)]
pub struct Creator {
    templates: HashMap<String, (TemplateRecord, Package)>,
    parents_seen: HashSet<String>,
    sites_seen: HashSet<String>,
    shape: Option<Shape>,
}

impl Creator {
    /// The row `request` creates (its id new; the store may resolve it to an existing
    /// deployment of the same instance key).
    pub async fn row(
        &mut self,
        store: &dyn Store,
        context: &CreationContext<'_>,
        request: CreateDeployment,
    ) -> Result<NewDeployment, ApiError> {
        if !request.parent_id.is_empty() && !self.parents_seen.contains(&request.parent_id) {
            check_id("parent deployment id", &request.parent_id)?;
            store.get_deployment_info(&request.parent_id).await?;
            self.parents_seen.insert(request.parent_id.clone());
        }
        if !request.site_id.is_empty() && !self.sites_seen.contains(&request.site_id) {
            check_id("site id", &request.site_id)?;
            if !context.sites_verified {
                store.get_site(&request.site_id).await?;
            }
            self.sites_seen.insert(request.site_id.clone());
        }
        let current = match self.shape.take() {
            Some(current) if current.fits(&request) => current,
            _ => {
                Shape::new(
                    store,
                    context,
                    &mut self.templates,
                    &request.template_id,
                    &request.merge,
                )
                .await?
            }
        };
        let child = current.child(context, &request);
        self.shape = Some(current);
        let (package_yaml, metadata, prepared, approved) = child?;
        Ok(NewDeployment {
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
            package_yaml,
            author: context.author.to_owned(),
        })
    }
}

/// Creates `requests` in one store transaction; `(created, id)` for each (see [`Creator`]).
pub async fn create_deployments(
    store: &dyn Store,
    context: CreationContext<'_>,
    requests: Vec<CreateDeployment>,
) -> Result<Vec<(bool, String)>, ApiError> {
    let mut creator = Creator::default();
    let mut rows = Vec::with_capacity(requests.len());
    for request in requests {
        rows.push(creator.row(store, &context, request).await?);
    }
    Ok(store.create_deployments(rows).await?)
}
