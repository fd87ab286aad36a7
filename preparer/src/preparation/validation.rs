//! Calling validation plugins (`nephrite.preparer.plugin.v1.Validator/Validate`) on a prepared
//! package, before it is marked prepared and can be approved: every validator registered for
//! the GVK of one of the package's resources is called once per such resource, with the
//! preparer's plugin credentials and timeout. All are asked (a refusal does not stop the
//! others), so the deployment's error lists every reason at once.
//!
//! A validator that refuses, or cannot be asked (unreachable, crashed, past the timeout), keeps
//! the deployment unprepared and unapproved: the caller records the [`Refusal`] as a
//! preparation failure and retries with backoff, so a package fixed by a later write, or a
//! validator that comes back, is validated again.

use std::time::Duration;

use nephrite_krm::{Object, Package};
use nephrite_proto::nephrite::krm::v1::GroupVersionKind;
use nephrite_proto::nephrite::preparer::plugin::v1::ValidateRequest;
use nephrite_proto::nephrite::preparer::plugin::v1::validator_client::ValidatorClient;
use nephrite_runtime::{ClientArgs, Endpoint};

use crate::plugins::PreparerSet;
use crate::store::PluginRecord;

/// The `Prepared=False` reason of a deployment its validators refused (or could not check).
pub(super) const VALIDATION_FAILED: &str = "ValidationFailed";

/// How a refusal's message starts (the deployment's error), so that its record names
/// [`VALIDATION_FAILED`].
pub(super) const MESSAGE_PREFIX: &str = "validation failed: ";

/// Why a prepared package may not be approved: one line per validator and resource.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Refusal {
    /// "plugin NAME refused KIND NAME: REASON; REASON", or why a validator could not answer.
    pub(super) lines: Vec<String>,
}

impl Refusal {
    /// The deployment's error text.
    pub(super) fn message(&self) -> String {
        format!("{MESSAGE_PREFIX}{}", self.lines.join(" | "))
    }
}

/// What a validator call needs besides the package.
pub(super) struct ValidatorCall<'a> {
    pub(super) deployment_id: &'a str,
    pub(super) timeout: Duration,
    /// What the preparer presents to the plugin (`--plugin-*`).
    pub(super) credentials: &'a ClientArgs,
}

/// Asks every validator that applies to `package`; `Err` with every reason when one refuses
/// or cannot answer.
pub(super) async fn validate(
    validators: &PreparerSet,
    call: &ValidatorCall<'_>,
    package: &Package,
) -> Result<(), Refusal> {
    let mut lines = Vec::new();
    let yaml = package.to_yaml();
    for target in package.iter() {
        for plugin in validators.validators_for(&target.gvk()) {
            if let Err(line) = ask(plugin, call, &yaml, target).await {
                lines.push(line);
            }
        }
    }
    if lines.is_empty() {
        Ok(())
    } else {
        Err(Refusal { lines })
    }
}

/// One validator on one resource: `Err` with the line to record.
async fn ask(
    plugin: &PluginRecord,
    call: &ValidatorCall<'_>,
    package_yaml: &str,
    target: &Object,
) -> Result<(), String> {
    let name = &plugin.name;
    let described = format!("{} {}", target.kind, target.name().unwrap_or_default());
    let work = async {
        let endpoint: Endpoint = plugin
            .endpoint
            .parse()
            .map_err(|e| format!("validator {name}: bad endpoint {}: {e}", plugin.endpoint))?;
        let channel = call
            .credentials
            .dial(&endpoint)
            .await
            .map_err(|e| format!("validator {name}: {e}"))?;
        let gvk = target.gvk();
        let request = ValidateRequest {
            deployment_id: call.deployment_id.to_owned(),
            package_yaml: package_yaml.to_owned(),
            target_gvk: Some(GroupVersionKind {
                group: gvk.group,
                version: gvk.version,
                kind: gvk.kind,
            }),
            target_name: target.name().unwrap_or_default().to_owned(),
            arguments: plugin.arguments.clone(),
            properties: plugin.properties.clone().into_iter().collect(),
        };
        let response = ValidatorClient::new(channel)
            .validate(request)
            .await
            .map_err(|status| {
                format!(
                    "validator {name} failed on {described}: {} ({:?})",
                    status.message(),
                    status.code()
                )
            })?
            .into_inner();
        if response.reasons.is_empty() {
            Ok(())
        } else {
            Err(format!(
                "plugin {name} refused {described}: {}",
                response.reasons.join("; ")
            ))
        }
    };
    match tokio::time::timeout(call.timeout, work).await {
        Ok(result) => result,
        Err(_) => Err(format!(
            "validator {name} timed out on {described} after {} ms",
            call.timeout.as_millis()
        )),
    }
}
