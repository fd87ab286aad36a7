//! `bmm-provider machine-api`: the OpenShift Machine API (`machine.openshift.io/v1beta1`)
//! Machine controller on BMM. Each Machine's `spec.providerSpec.value` is read by
//! [`read_provider_spec`]; an unusable one sets `status.errorReason: InvalidConfiguration`
//! and `errorMessage`, `phase: Failed`, and nothing is created. Otherwise the step comes from
//! [`decide_machine_api`]: the Machine API finalizer first, then the instance (found by the
//! id in `status.providerStatus`, else by the Machine's name with the provider's owner label,
//! so a crash between the create and the status write adopts), reported as `spec.providerID`,
//! `status.addresses`, `status.providerStatus {instanceId, instanceState}`, `status.phase`
//! and the `machine.openshift.io/instance-state` annotation; the Node of the same provider ID
//! becomes `status.nodeRef` ([`super::node_link`], `Running` from then on); on deletion the
//! instance is deleted and the finalizer removed once it answers 404.

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::{Node, Secret};
use kube::Client;
use kube::api::{Api, ApiResource, DynamicObject, Patch, PatchParams, ResourceExt};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::watcher;
use nephrite_bmm::cloud::CloudInstance;
use nephrite_bmm::crd::SecretRef;
use nephrite_bmm::decide::cloud_node::node_addresses;
use nephrite_bmm::machine_api::{
    API_VERSION, INSTANCE_STATE_ANNOTATION, INVALID_CONFIGURATION, MACHINE_FINALIZER,
    MachineApiStep, PROVIDER_STATUS_KIND, ProviderSpec, decide_machine_api, read_provider_spec,
};
use nephrite_bmm::{OWNER_LABEL, ProviderId, owner_value};
use nephrite_krm::Gvk;
use serde_json::{Value, json};

use super::{
    ControllerConfig, ControllerError, Ctx, credentials, log_failures, node_link,
    requeue_after_error, watch_backoff,
};
use crate::client::types::{Instance, InstanceCreateRequest, InterfaceCreateRequest};
use crate::client::{ApiError, BmmClient};
use crate::observe::instance_view;

/// The Machine API's `Machine`.
pub fn machine_resource() -> ApiResource {
    Gvk::new("machine.openshift.io", "v1beta1", "Machine").api_resource("machines")
}

/// Runs the Machine controller (in `config.namespace`, or all namespaces) until it stops.
pub async fn run_machine_api_controller(client: Client, config: ControllerConfig) {
    let resource = machine_resource();
    let api: Api<DynamicObject> = match &config.namespace {
        Some(ns) => Api::namespaced_with(client.clone(), ns, &resource),
        None => Api::all_with(client.clone(), &resource),
    };
    let ctx = Ctx::shared(client.clone(), config);
    let links = ctx.node_links.clone();
    let controller = Controller::new_with(api, watcher::Config::default(), resource)
        .trigger_backoff(watch_backoff())
        // A Node joining (or getting its provider ID) links its Machine.
        .watches(
            Api::<Node>::all(client),
            watcher::Config::default(),
            move |node: Node| links.node_seen(&node),
        );
    log_failures(
        "machine-api",
        controller.run(reconcile_machine, requeue_after_error, ctx),
    )
    .await;
}

fn cloud(e: ApiError) -> ControllerError {
    ControllerError::Cloud(e.to_string())
}

/// Merge-patches the Machine unless every field of `patch` already has that value.
async fn patch_if_changed(
    api: &Api<DynamicObject>,
    obj: &DynamicObject,
    patch: Value,
    status: bool,
) -> Result<(), kube::Error> {
    let mut current = obj.data.clone();
    if let Some(annotations) = &obj.metadata.annotations {
        current["metadata"] = json!({ "annotations": annotations });
    }
    if covered(&current, &patch) {
        return Ok(());
    }
    let name = obj.name_any();
    let params = PatchParams::default();
    if status {
        api.patch_status(&name, &params, &Patch::Merge(patch))
            .await?;
    } else {
        api.patch(&name, &params, &Patch::Merge(patch)).await?;
    }
    Ok(())
}

/// Whether `current` already holds every value of the merge patch `patch`.
fn covered(current: &Value, patch: &Value) -> bool {
    match patch {
        Value::Object(fields) => fields.iter().all(|(k, v)| match v {
            Value::Null => current.get(k).is_none_or(Value::is_null),
            Value::Object(_) => covered(current.get(k).unwrap_or(&Value::Null), v),
            _ => current.get(k) == Some(v),
        }),
        other => current == other,
    }
}

/// The instance a Machine has: the one its providerStatus records, else ours of its name;
/// the inner `Err` is the recorded id when that instance answers 404.
async fn find_instance(
    client: &BmmClient,
    obj: &DynamicObject,
    spec: &ProviderSpec,
    owner: &str,
) -> Result<Result<Option<Instance>, String>, ApiError> {
    let recorded = obj
        .data
        .pointer("/status/providerStatus/instanceId")
        .and_then(Value::as_str);
    if let Some(id) = recorded {
        return Ok(match client.instance(id).await? {
            Some(i) => Ok(Some(i)),
            None => Err(id.to_string()),
        });
    }
    let named = client
        .instances_named(&spec.site_id, &obj.name_any())
        .await?;
    Ok(Ok(named.into_iter().find(|i| {
        i.labels
            .as_ref()
            .and_then(|l| l.get(OWNER_LABEL))
            .is_some_and(|v| v == owner)
    })))
}

/// The user data from the providerSpec's Secret (key `userData`).
async fn user_data(
    client: &Client,
    namespace: &str,
    spec: &ProviderSpec,
) -> Result<Option<String>, ControllerError> {
    let Some(secret) = &spec.user_data_secret else {
        return Ok(None);
    };
    let ns = secret.namespace.as_deref().unwrap_or(namespace);
    let secrets: Api<Secret> = Api::namespaced(client.clone(), ns);
    let found = secrets.get_opt(&secret.name).await?;
    found
        .and_then(|s| s.data)
        .and_then(|d| d.get("userData").map(|v| v.0.clone()))
        .map(|bytes| {
            String::from_utf8(bytes).map_err(|_| {
                ControllerError::Cloud(format!(
                    "Secret {ns}/{}: userData is not UTF-8",
                    secret.name
                ))
            })
        })
        .transpose()?
        .map(Some)
        .ok_or_else(|| {
            ControllerError::Cloud(format!("Secret {ns}/{} has no key userData", secret.name))
        })
}

/// What the Machine's status says about its instance (and its Node, once linked).
fn report(
    spec: &ProviderSpec,
    instance: &CloudInstance,
    phase: &str,
    node_ref: Option<Value>,
) -> (Value, Value) {
    let addresses: Vec<Value> = node_addresses(instance)
        .into_iter()
        .map(|a| json!({"type": a.type_, "address": a.address}))
        .collect();
    let mut status = json!({"status": {
        "addresses": addresses,
        "phase": phase,
        "errorReason": null,
        "errorMessage": null,
        "providerStatus": {
            "apiVersion": API_VERSION, "kind": PROVIDER_STATUS_KIND,
            "instanceId": instance.id, "instanceState": instance.status,
        },
    }});
    if let Some(node_ref) = node_ref {
        status["status"]["nodeRef"] = node_ref;
    }
    let object = json!({
        "metadata": {"annotations": {INSTANCE_STATE_ANNOTATION: instance.status}},
        "spec": {"providerID": ProviderId::new(spec.site_id.clone(), instance.id.clone()).to_string()},
    });
    (object, status)
}

async fn reconcile_machine(
    obj: Arc<DynamicObject>,
    ctx: Arc<Ctx>,
) -> Result<Action, ControllerError> {
    let metrics = &ctx.config.metrics;
    let started = std::time::Instant::now();
    let running = metrics.reconciling("machine-api");
    let outcome = reconcile(&obj, &ctx).await;
    drop(running);
    let result = if outcome.is_ok() { "ok" } else { "error" };
    metrics.reconciled("machine-api", result, Some(started.elapsed().as_secs_f64()));
    if outcome.is_ok() {
        ctx.backoff.succeeded(&super::object_key(&obj.metadata));
    }
    outcome
}

async fn reconcile(obj: &DynamicObject, ctx: &Ctx) -> Result<Action, ControllerError> {
    let namespace = obj.namespace().unwrap_or_else(|| "default".into());
    let name = obj.name_any();
    let api: Api<DynamicObject> =
        Api::namespaced_with(ctx.client.clone(), &namespace, &machine_resource());
    let deleting = obj.metadata.deletion_timestamp.is_some();
    let finalizers = obj.finalizers().to_vec();
    let has_finalizer = finalizers.iter().any(|f| f == MACHINE_FINALIZER);
    if deleting && !has_finalizer {
        return Ok(Action::await_change());
    }
    let spec = match read_provider_spec(obj.data.pointer("/spec/providerSpec/value")) {
        Ok(spec) => spec,
        Err(problems) => {
            let recorded = obj
                .data
                .pointer("/status/providerStatus/instanceId")
                .is_some();
            if deleting && !recorded {
                // Nothing was ever created for it.
                let rest: Vec<&String> = finalizers
                    .iter()
                    .filter(|f| *f != MACHINE_FINALIZER)
                    .collect();
                api.patch(
                    &name,
                    &PatchParams::default(),
                    &Patch::Merge(json!({"metadata": {"finalizers": rest}})),
                )
                .await?;
                return Ok(Action::await_change());
            }
            let status = json!({"status": {
                "errorReason": INVALID_CONFIGURATION,
                "errorMessage": problems.join("; "),
                "phase": "Failed",
            }});
            patch_if_changed(&api, obj, status, true).await?;
            return Ok(Action::await_change());
        }
    };
    let secret = SecretRef {
        name: spec.credentials_secret.name.clone(),
        namespace: spec.credentials_secret.namespace.clone(),
    };
    let credentials = credentials::read(
        &ctx.client,
        &ctx.config,
        &ctx.clients,
        &namespace,
        Some(&secret),
    )
    .await
    .map_err(ControllerError::Cloud)?;
    let client = &credentials.client;
    let owner = owner_value(&namespace, &name);
    let found = find_instance(client, obj, &spec, &owner)
        .await
        .map_err(cloud)?;
    let instance = match found {
        Ok(i) => i,
        Err(vanished) if !deleting => {
            let status = json!({"status": {
                "phase": "Failed",
                "errorMessage": format!("instance {vanished} no longer exists"),
            }});
            patch_if_changed(&api, obj, status, true).await?;
            return Ok(Action::await_change());
        }
        Err(_) => None,
    };
    let view = instance.as_ref().map(instance_view);
    let provider_id = view
        .as_ref()
        .map(|i| ProviderId::new(spec.site_id.clone(), i.id.clone()).to_string());
    let linked_before = obj.data.pointer("/status/nodeRef/name").is_some();
    let node_ref = match &provider_id {
        Some(id) if !deleting && !linked_before => {
            let candidate = ctx.node_links.machine_reported(&namespace, &name, id);
            let nodes: Api<Node> = Api::all(ctx.client.clone());
            node_link::link(&nodes, candidate, id, (&namespace, &name)).await?
        }
        Some(id) => {
            ctx.node_links.machine_reported(&namespace, &name, id);
            None
        }
        None => None,
    };
    let linked = linked_before || node_ref.is_some();
    match decide_machine_api(deleting, has_finalizer, view.as_ref(), linked) {
        MachineApiStep::AddFinalizer => {
            let mut all = finalizers;
            all.push(MACHINE_FINALIZER.to_string());
            api.patch(
                &name,
                &PatchParams::default(),
                &Patch::Merge(json!({"metadata": {"finalizers": all}})),
            )
            .await?;
            Ok(Action::requeue(std::time::Duration::ZERO))
        }
        MachineApiStep::Create => {
            let user_data = user_data(&ctx.client, &namespace, &spec).await?;
            let created = client
                .create_instance(&InstanceCreateRequest {
                    name: name.clone(),
                    tenant_id: spec.tenant_id.clone(),
                    instance_type_id: Some(spec.instance_type_id.clone()),
                    machine_id: None,
                    vpc_id: spec.vpc_id.clone(),
                    user_data,
                    operating_system_id: None,
                    labels: Some(BTreeMap::from([(OWNER_LABEL.to_string(), owner)])),
                    interfaces: vec![InterfaceCreateRequest {
                        subnet_id: spec.subnet_id.clone(),
                        is_physical: true,
                        virtual_function_id: None,
                    }],
                    ssh_key_group_ids: vec![],
                    allow_unhealthy_machine: None,
                })
                .await
                .map_err(cloud)?;
            tracing::info!(%namespace, %name, instance = %created.id, "instance created");
            let (object, status) = report(&spec, &instance_view(&created), "Provisioning", None);
            // The annotation and provider ID first: a phase someone sees has them.
            patch_if_changed(&api, obj, object, false).await?;
            patch_if_changed(&api, obj, status, true).await?;
            Ok(Action::requeue(ctx.config.poll))
        }
        MachineApiStep::Report { phase, .. } => {
            // A Report step always comes with the instance it reports.
            let Some(view) = &view else {
                return Ok(Action::requeue(ctx.config.poll));
            };
            let (object, status) = report(&spec, view, phase, node_ref);
            // The annotation and provider ID first: a phase someone sees has them.
            patch_if_changed(&api, obj, object, false).await?;
            patch_if_changed(&api, obj, status, true).await?;
            Ok(Action::requeue(if phase == "Running" {
                ctx.config.resync
            } else {
                ctx.config.poll
            }))
        }
        MachineApiStep::DeleteInstance(id) => {
            client.delete_instance(&id).await.map_err(cloud)?;
            patch_if_changed(&api, obj, json!({"status": {"phase": "Deleting"}}), true).await?;
            Ok(Action::requeue(ctx.config.poll))
        }
        MachineApiStep::AwaitDeletion => Ok(Action::requeue(ctx.config.poll)),
        MachineApiStep::RemoveFinalizer => {
            if let Some(id) = obj.data.pointer("/spec/providerID").and_then(Value::as_str) {
                ctx.node_links.machine_gone(id);
            }
            let rest: Vec<&String> = finalizers
                .iter()
                .filter(|f| *f != MACHINE_FINALIZER)
                .collect();
            api.patch(
                &name,
                &PatchParams::default(),
                &Patch::Merge(json!({"metadata": {"finalizers": rest}})),
            )
            .await?;
            Ok(Action::await_change())
        }
        MachineApiStep::Nothing => Ok(Action::await_change()),
    }
}
