//! The built-in preparers for `topology.nephio.org/v1alpha1`: `Placement`, `Template`,
//! `Site` (with `provisionIfNotFound`) and `Sites`. They run in-process and use the store
//! directly (the same operations the Data API offers plugins). A Placement's sites pass
//! through its scheduling plugins, if any (`scheduling`), before its children are made.

use std::sync::Mutex;

use nephrite_krm::{Condition, ConditionStatus, Gvk, Object, Package};
use nephrite_merge::metadata::MetadataSelector;
use nephrite_merge::preparation::is_preparable;
use nephrite_merge::topology::{
    Choice, PlacementSpec, SiteSpec, find_named, merge_package_for, placement_instance_key,
    read_spec, site_choice, sites_selector, template_choice,
};
use serde_json::Value;

use super::scheduling::{self, Candidate, Decision};
use super::{Outcome, PassContext};
use crate::creation::{CreateDeployment, CreationContext, create_deployments};
use crate::store::{CatalogFilter, SiteRecord, StoreError, Window};

/// Children created per store transaction.
const CREATE_CHUNK: usize = 250;

/// What one deployment's preparation has looked up already. The built-in preparers of a
/// package often ask the same: a Placement and the Sites resource it names list the same
/// sites, a Placement and its Template resolve the same template. Asking once also makes them
/// agree.
#[derive(Default)]
pub(crate) struct Lookups {
    /// Sites (id, metadata) by selector.
    sites: Mutex<Vec<(MetadataSelector, Vec<Candidate>)>>,
    /// Template ids known to exist.
    templates: Mutex<Vec<String>>,
}

impl Lookups {
    fn sites(&self, selector: &MetadataSelector) -> Option<Vec<Candidate>> {
        let sites = self.sites.lock().unwrap_or_else(|e| e.into_inner());
        sites
            .iter()
            .find(|(known, _)| known == selector)
            .map(|(_, found)| found.clone())
    }

    fn remember_sites(&self, selector: &MetadataSelector, found: &[Candidate]) {
        let mut sites = self.sites.lock().unwrap_or_else(|e| e.into_inner());
        sites.push((selector.clone(), found.to_vec()));
    }

    /// A site was registered: listings may have changed.
    fn forget_sites(&self) {
        self.sites.lock().unwrap_or_else(|e| e.into_inner()).clear();
    }

    fn knows_template(&self, id: &str) -> bool {
        let templates = self.templates.lock().unwrap_or_else(|e| e.into_inner());
        templates.iter().any(|known| known == id)
    }

    fn remember_template(&self, id: &str) {
        let mut templates = self.templates.lock().unwrap_or_else(|e| e.into_inner());
        templates.push(id.to_owned());
    }
}

/// Prepares `package.objects()[index]` (a built-in kind) for deployment `deployment_id`.
pub(super) async fn prepare(
    context: &PassContext<'_>,
    deployment_id: &str,
    mut package: Package,
    index: usize,
) -> Result<Outcome, String> {
    let target = package.objects()[index].clone();
    let status: Value = match target.kind.as_str() {
        "Template" => {
            let id = resolve_template(context, &target).await?;
            serde_json::json!({ "templateId": id })
        }
        "Site" => match resolve_site(context, deployment_id, &package, &target, true).await? {
            Some(id) => serde_json::json!({ "siteId": id }),
            None => {
                return Ok(Outcome::NotReady(format!(
                    "site {} not found yet",
                    name(&target)
                )));
            }
        },
        "Sites" => {
            let selector = sites_selector(&target).map_err(|e| e.to_string())?;
            let ids: Vec<String> = matching_sites(context, &selector)
                .await?
                .into_iter()
                .map(|site| site.id)
                .collect();
            serde_json::json!({ "siteIds": ids })
        }
        "Placement" => match place(context, deployment_id, &package, &target).await? {
            Some(placed) => {
                let mut status = serde_json::json!({ "deployments": placed.count });
                if !placed.decisions.is_empty() {
                    status["scheduling"] =
                        placed.decisions.iter().map(Decision::to_status).collect();
                    let message = placed
                        .decisions
                        .iter()
                        .map(Decision::summary)
                        .collect::<Vec<_>>()
                        .join("; ");
                    let condition = Condition::new(scheduling::SCHEDULED, ConditionStatus::True)
                        .with_reason("SitesChosen")
                        .with_message(message);
                    package.objects_mut()[index]
                        .set_condition(condition, context.now)
                        .map_err(|e| e.to_string())?;
                }
                status
            }
            None => {
                return Ok(Outcome::NotReady(format!(
                    "placement {}: merge sources not prepared yet",
                    name(&target)
                )));
            }
        },
        other => return Err(format!("no built-in preparer for kind {other}")),
    };
    let object = &mut package.objects_mut()[index];
    let out = object.status_mut().map_err(|e| e.to_string())?;
    if let Value::Object(fields) = status {
        out.extend(fields);
    }
    Ok(Outcome::Prepared(package))
}

fn name(object: &Object) -> &str {
    object.name().unwrap_or_default()
}

fn store_error(err: StoreError) -> String {
    err.to_string()
}

async fn resolve_template(context: &PassContext<'_>, object: &Object) -> Result<String, String> {
    match template_choice(object).map_err(|e| e.to_string())? {
        Choice::Id(id) if context.lookups.knows_template(&id) => Ok(id),
        Choice::Id(id) => match context.store.get_template(&id).await {
            Ok(_) => {
                context.lookups.remember_template(&id);
                Ok(id)
            }
            Err(StoreError::NotFound { .. }) => Err(format!("template not found: {id}")),
            Err(err) => Err(store_error(err)),
        },
        Choice::Select(selector) => {
            let filter = CatalogFilter {
                id_patterns: Vec::new(),
                metadata: selector,
            };
            let window = Window {
                limit: 1,
                ..Window::default()
            };
            let found = context
                .store
                .list_templates(&filter, &window)
                .await
                .map_err(store_error)?;
            found
                .into_iter()
                .next()
                .map(|(id, _)| id)
                .ok_or_else(|| format!("template not found: {} selects none", name(object)))
        }
    }
}

async fn matching_sites(
    context: &PassContext<'_>,
    selector: &MetadataSelector,
) -> Result<Vec<Candidate>, String> {
    if let Some(found) = context.lookups.sites(selector) {
        return Ok(found);
    }
    let found = list_sites(context, selector).await?;
    context.lookups.remember_sites(selector, &found);
    Ok(found)
}

async fn list_sites(
    context: &PassContext<'_>,
    selector: &MetadataSelector,
) -> Result<Vec<Candidate>, String> {
    let filter = CatalogFilter {
        id_patterns: Vec::new(),
        metadata: selector.clone(),
    };
    let mut window = Window {
        limit: crate::store::MAX_PAGE,
        ..Window::default()
    };
    let mut ids = Vec::new();
    loop {
        let page = context
            .store
            .list_sites(&filter, &window)
            .await
            .map_err(store_error)?;
        let full = page.len() == window.page_size();
        if let Some(last) = page.last() {
            window.after_id = last.id.clone();
        }
        ids.extend(page.into_iter().map(|s| Candidate {
            id: s.id,
            metadata: s.metadata,
        }));
        if !full {
            return Ok(ids);
        }
    }
}

/// The site a `Site` resource names: its recorded `status.siteId`, its id, the first match,
/// or (with `provision` and `provisionIfNotFound`) a newly provisioned one. `None`: no site
/// yet and provisioning is left to the Site preparer.
async fn resolve_site(
    context: &PassContext<'_>,
    deployment_id: &str,
    package: &Package,
    object: &Object,
    provision: bool,
) -> Result<Option<String>, String> {
    if let Some(Value::String(id)) = object.status().and_then(|s| s.get("siteId")) {
        return Ok(Some(id.clone()));
    }
    let selector = match site_choice(object).map_err(|e| e.to_string())? {
        Choice::Id(id) => {
            return match context.store.get_site(&id).await {
                Ok(_) => Ok(Some(id)),
                Err(StoreError::NotFound { .. }) => Err(format!("site not found: {id}")),
                Err(err) => Err(store_error(err)),
            };
        }
        Choice::Select(selector) => selector,
    };
    if let Some(first) = matching_sites(context, &selector).await?.into_iter().next() {
        return Ok(Some(first.id));
    }
    let spec: SiteSpec = read_spec(object).map_err(|e| e.to_string())?;
    if !spec.provision_if_not_found {
        return Err(format!("site not found: {} selects none", name(object)));
    }
    if !provision {
        return Ok(None);
    }
    provision_site(context, deployment_id, package, object, &spec, &selector)
        .await
        .map(Some)
}

async fn provision_site(
    context: &PassContext<'_>,
    deployment_id: &str,
    package: &Package,
    object: &Object,
    spec: &SiteSpec,
    selector: &MetadataSelector,
) -> Result<String, String> {
    let template_id = spec
        .provision_template_id
        .clone()
        .filter(|id| !id.is_empty())
        .ok_or_else(|| {
            format!(
                "site {}: provisionIfNotFound needs provisionTemplateId",
                name(object)
            )
        })?;
    let merge = merge_package_for(package, &spec.merge).map_err(|e| e.to_string())?;
    if let Some(waiting) = merge
        .iter()
        .find(|m| is_preparable(m, |g: &Gvk| context.preparers.has_preparer(g)))
    {
        return Err(format!(
            "not ready: merge source {} {} is not prepared yet",
            waiting.kind,
            name(waiting)
        ));
    }
    let site_id = format!("{deployment_id}/{}", name(object));
    let metadata = selector
        .entries()
        .iter()
        .filter_map(|(k, p)| p.exact().map(|v| (k.clone(), v.to_owned())))
        .collect();
    let created = create_deployments(
        context.store,
        context.creation(true),
        vec![CreateDeployment {
            parent_id: deployment_id.to_owned(),
            template_id: template_id.clone(),
            site_id: site_id.clone(),
            merge,
            instance_key: format!("Site/{}", name(object)),
            ..CreateDeployment::default()
        }],
    )
    .await
    .map_err(|e| e.to_string())?;
    let child = created
        .into_iter()
        .next()
        .map(|(_, id)| id)
        .unwrap_or_default();
    context
        .store
        .put_site(SiteRecord {
            id: site_id.clone(),
            metadata,
            package_yaml: String::new(),
            template_id,
            deployment_id: child,
        })
        .await
        .map_err(store_error)?;
    context.lookups.forget_sites();
    Ok(site_id)
}

/// What a Placement made: how many children, and its schedulers' decisions.
struct Placed {
    count: usize,
    decisions: Vec<Decision>,
}

/// Creates the children of a placement (for the sites its schedulers chose, when it has
/// schedulers); `None` when a merge source is not prepared yet. Every entry is resolved and
/// scheduled before the first child is made, so a scheduler's error leaves no child behind.
async fn place(
    context: &PassContext<'_>,
    deployment_id: &str,
    package: &Package,
    placement: &Object,
) -> Result<Option<Placed>, String> {
    let spec: PlacementSpec = read_spec(placement).map_err(|e| e.to_string())?;
    let placement_gvk = placement.gvk();
    let schedulers = context.preparers.schedulers_for(&placement_gvk);
    let package_yaml = if schedulers.is_empty() {
        String::new()
    } else {
        package.to_yaml()
    };
    let mut requests = Vec::new();
    let mut decisions = Vec::new();
    for entry in &spec.templates {
        let template = find_named(package, &["Template"], &entry.template, "template")
            .map_err(|e| e.to_string())?;
        let template_id = match template.status().and_then(|s| s.get("templateId")) {
            Some(Value::String(id)) => id.clone(),
            _ => resolve_template(context, template).await?,
        };
        let merge = merge_package_for(package, &entry.merge).map_err(|e| e.to_string())?;
        if merge
            .iter()
            .any(|m| is_preparable(m, |g: &Gvk| context.preparers.has_preparer(g)))
        {
            return Ok(None);
        }
        let mut candidates = Vec::new();
        for site_name in &entry.sites {
            let site = find_named(package, &["Site", "Sites"], site_name, "site")
                .map_err(|e| e.to_string())?;
            if site.kind == "Sites" {
                let selector = sites_selector(site).map_err(|e| e.to_string())?;
                candidates.extend(matching_sites(context, &selector).await?);
            } else {
                match resolve_site(context, deployment_id, package, site, false).await? {
                    Some(id) if schedulers.is_empty() => candidates.push(Candidate {
                        id,
                        metadata: Default::default(),
                    }),
                    Some(id) => {
                        let metadata = context
                            .store
                            .get_site(&id)
                            .await
                            .map_err(store_error)?
                            .metadata;
                        candidates.push(Candidate { id, metadata });
                    }
                    None => return Ok(None),
                }
            }
        }
        let site_ids = if schedulers.is_empty() {
            candidates.into_iter().map(|c| c.id).collect()
        } else {
            let scheduled = scheduling::Entry {
                deployment_id,
                package_yaml: &package_yaml,
                placement_gvk: &placement_gvk,
                placement: name(placement),
                template: &entry.template,
                template_id: &template_id,
            };
            let (chosen, made) =
                scheduling::schedule(schedulers, context.scheduling, &scheduled, candidates)
                    .await?;
            decisions.extend(made);
            chosen
        };
        let key = placement_instance_key(name(placement), &entry.template);
        for site_id in site_ids {
            requests.push(CreateDeployment {
                parent_id: deployment_id.to_owned(),
                template_id: template_id.clone(),
                site_id,
                merge: merge.clone(),
                instance_key: key.clone(),
                ..CreateDeployment::default()
            });
        }
    }
    // In chunks: each is one transaction, so the lease renewal (and the Data API) get the
    // database between them; a crash between chunks is repaired by the retry, which finds the
    // children already made by their instance keys.
    let count = requests.len();
    let mut requests = requests.into_iter().peekable();
    while requests.peek().is_some() {
        let chunk: Vec<_> = requests.by_ref().take(CREATE_CHUNK).collect();
        create_deployments(context.store, context.creation(true), chunk)
            .await
            .map_err(|e| e.to_string())?;
    }
    Ok(Some(Placed { count, decisions }))
}

impl PassContext<'_> {
    fn creation(&self, sites_verified: bool) -> CreationContext<'_> {
        CreationContext {
            auto_approve: self.auto_approve,
            has_preparer: self.has_preparer,
            has_validator: self.has_validator,
            now: self.now,
            sites_verified,
            author: super::AUTHOR,
        }
    }
}
