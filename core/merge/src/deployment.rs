//! The package's `Deployment` resource (`deployment.nephio.org/v1alpha1`, name `deployment`):
//! one per deployment package, added when missing. Its spec carries `templateId` and `siteId`;
//! its annotations carry the package-level `nephio.org/prepared` / `nephio.org/approved` state
//! (which the store mirrors as columns); its `Prepared` condition carries the last preparer
//! error.
//!
//! Approval rules when a package becomes prepared: `nephio.org/approve: Auto` approves,
//! `Manual` waits for an explicit approval, `Default` or absent follows the daemon's
//! auto-approve setting. Any other value waits, like `Manual` (an approval is never granted by
//! a typo).

use nephrite_krm::{Condition, ConditionStatus, Gvk, Object, ObjectError, Package, keys};
use serde_json::Value;

/// apiVersion of the Deployment resource.
pub const DEPLOYMENT_API_VERSION: &str = "deployment.nephio.org/v1alpha1";
/// Kind of the Deployment resource.
pub const DEPLOYMENT_KIND: &str = "Deployment";
/// Name of the Deployment resource.
pub const DEPLOYMENT_NAME: &str = "deployment";
/// Type of the condition that records preparation state and the last preparer error.
pub const PREPARED_CONDITION: &str = "Prepared";

/// Why the Deployment resource could not be edited.
#[derive(Debug, thiserror::Error)]
pub enum DeploymentError {
    /// Its spec or status is not a mapping.
    #[error("the Deployment resource: {0}")]
    Object(#[from] ObjectError),
}

/// Whether a prepared deployment got approved.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Approval {
    /// Approved (now or before).
    Approved,
    /// Waiting for an explicit approval.
    Pending,
}

/// Functions over a package's Deployment resource.
#[derive(Debug, Clone, Copy)]
pub struct DeploymentResource;

impl DeploymentResource {
    /// The Deployment resource's GVK.
    pub fn gvk() -> Gvk {
        Gvk::new("deployment.nephio.org", "v1alpha1", DEPLOYMENT_KIND)
    }

    /// Whether `object` is the Deployment resource.
    pub fn is(object: &Object) -> bool {
        object.api_version == DEPLOYMENT_API_VERSION
            && object.kind == DEPLOYMENT_KIND
            && object.name() == Some(DEPLOYMENT_NAME)
    }

    /// The Deployment resource of `package`, if present.
    pub fn get(package: &Package) -> Option<&Object> {
        package.iter().find(|o| DeploymentResource::is(o))
    }

    fn get_mut(package: &mut Package) -> Option<&mut Object> {
        package.iter_mut().find(|o| DeploymentResource::is(o))
    }

    /// Adds the Deployment resource when missing (appended) and sets `spec.templateId` /
    /// `spec.siteId` when given. Returns it.
    pub fn ensure<'a>(
        package: &'a mut Package,
        template_id: Option<&str>,
        site_id: Option<&str>,
    ) -> Result<&'a mut Object, DeploymentError> {
        if DeploymentResource::get(package).is_none() {
            package.push(Object::new(&DeploymentResource::gvk(), DEPLOYMENT_NAME));
        }
        let object = DeploymentResource::get_mut(package).ok_or_else(|| {
            // Just pushed; unreachable in practice, reported rather than panicking.
            DeploymentError::Object(ObjectError::MissingKind {
                api_version: DEPLOYMENT_API_VERSION.to_owned(),
            })
        })?;
        if template_id.is_some() || site_id.is_some() {
            let spec = object.spec_mut()?;
            if let Some(id) = template_id {
                spec.insert("templateId".into(), Value::String(id.to_owned()));
            }
            if let Some(id) = site_id {
                spec.insert("siteId".into(), Value::String(id.to_owned()));
            }
        }
        Ok(object)
    }

    /// Whether the package is marked prepared.
    pub fn is_prepared(package: &Package) -> bool {
        DeploymentResource::get(package)
            .is_some_and(|o| o.annotation(keys::PREPARED) == Some(keys::TRUE))
    }

    /// Whether the package is marked approved.
    pub fn is_approved(package: &Package) -> bool {
        DeploymentResource::get(package)
            .is_some_and(|o| o.annotation(keys::APPROVED) == Some(keys::TRUE))
    }

    /// Whether a prepared package is approved right away, given the daemon's auto-approve
    /// setting.
    pub fn approves_automatically(package: &Package, auto_approve: bool) -> bool {
        match DeploymentResource::get(package).and_then(|o| o.annotation(keys::APPROVE)) {
            None | Some("") | Some(keys::APPROVE_DEFAULT) => auto_approve,
            Some(keys::APPROVE_AUTO) => true,
            Some(_) => false,
        }
    }

    /// Marks the package prepared (`Prepared=True`), and approved when the approve rules say so.
    pub fn mark_prepared(
        package: &mut Package,
        auto_approve: bool,
        now: &str,
    ) -> Result<Approval, DeploymentError> {
        let approve = DeploymentResource::approves_automatically(package, auto_approve);
        let object = DeploymentResource::ensure(package, None, None)?;
        object.set_annotation(keys::PREPARED, keys::TRUE);
        object.set_condition(
            Condition::new(PREPARED_CONDITION, ConditionStatus::True).with_reason("Prepared"),
            now,
        )?;
        if approve {
            object.set_annotation(keys::APPROVED, keys::TRUE);
        }
        Ok(if object.annotation(keys::APPROVED) == Some(keys::TRUE) {
            Approval::Approved
        } else {
            Approval::Pending
        })
    }

    /// Marks the package approved.
    pub fn mark_approved(package: &mut Package) -> Result<(), DeploymentError> {
        DeploymentResource::ensure(package, None, None)?.set_annotation(keys::APPROVED, keys::TRUE);
        Ok(())
    }

    /// Records a preparer error: `Prepared=False` with `reason` and `message`.
    pub fn record_error(
        package: &mut Package,
        reason: &str,
        message: &str,
        now: &str,
    ) -> Result<(), DeploymentError> {
        let object = DeploymentResource::ensure(package, None, None)?;
        object.set_condition(
            Condition::new(PREPARED_CONDITION, ConditionStatus::False)
                .with_reason(reason)
                .with_message(message),
            now,
        )?;
        Ok(())
    }

    /// The message of a `Prepared=False` condition, if any.
    pub fn last_error(package: &Package) -> Option<String> {
        let condition = DeploymentResource::get(package)?
            .condition(PREPARED_CONDITION)
            .ok()??;
        (condition.status == ConditionStatus::False).then(|| condition.message.unwrap_or_default())
    }
}

#[cfg(test)]
mod tests;
