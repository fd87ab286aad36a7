//! Calling a remote preparation plugin (`nephrite.preparer.plugin.v1.Preparer/Prepare`) with a timeout.
//! A plugin that cannot be reached, crashes, hangs past the timeout or answers with something
//! that is not a package is an error naming the plugin; the caller records it and retries.

use std::time::Duration;

use nephrite_krm::{Object, Package};
use nephrite_proto::nephrite::krm::v1::GroupVersionKind;
use nephrite_proto::nephrite::preparer::plugin::v1::PrepareRequest;
use nephrite_proto::nephrite::preparer::plugin::v1::preparer_client::PreparerClient;
use nephrite_runtime::{ClientArgs, Endpoint};

use crate::store::PluginRecord;

/// What the plugin call needs besides the package.
pub(super) struct PluginCall<'a> {
    pub(super) deployment_id: &'a str,
    pub(super) data_endpoint: &'a str,
    pub(super) token: &'a str,
    pub(super) timeout: Duration,
    /// What the preparer presents to the plugin (`--plugin-*`).
    pub(super) credentials: &'a ClientArgs,
}

/// Calls `plugin` to prepare `target`; the new package (unchanged when the plugin returned
/// none).
pub(super) async fn call(
    plugin: &PluginRecord,
    call: &PluginCall<'_>,
    package: &Package,
    target: &Object,
) -> Result<Package, String> {
    let name = &plugin.name;
    let work = async {
        let endpoint: Endpoint = plugin
            .endpoint
            .parse()
            .map_err(|e| format!("plugin {name}: bad endpoint {}: {e}", plugin.endpoint))?;
        let channel = call
            .credentials
            .dial(&endpoint)
            .await
            .map_err(|e| format!("plugin {name}: {e}"))?;
        let gvk = target.gvk();
        let request = PrepareRequest {
            deployment_id: call.deployment_id.to_owned(),
            package_yaml: package.to_yaml(),
            target_gvk: Some(GroupVersionKind {
                group: gvk.group,
                version: gvk.version,
                kind: gvk.kind,
            }),
            target_name: target.name().unwrap_or_default().to_owned(),
            data_endpoint: call.data_endpoint.to_owned(),
            modification_token: call.token.to_owned(),
            arguments: plugin.arguments.clone(),
            properties: plugin.properties.clone().into_iter().collect(),
        };
        let response = PreparerClient::new(channel)
            .prepare(request)
            .await
            .map_err(|status| {
                format!(
                    "plugin {name} failed: {} ({:?})",
                    status.message(),
                    status.code()
                )
            })?
            .into_inner();
        if !response.error.is_empty() {
            return Err(format!("plugin {name}: {}", response.error));
        }
        if !response.prepared {
            return Err(format!(
                "plugin {name} did not prepare {} {}",
                target.kind,
                target.name().unwrap_or_default()
            ));
        }
        if response.package_yaml.trim().is_empty() {
            return Ok(package.clone());
        }
        Package::from_yaml(&response.package_yaml)
            .map_err(|e| format!("plugin {name} returned an invalid package: {e}"))
    };
    match tokio::time::timeout(call.timeout, work).await {
        Ok(result) => result,
        Err(_) => Err(format!(
            "plugin {name} timed out after {} ms",
            call.timeout.as_millis()
        )),
    }
}
