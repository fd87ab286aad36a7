//! The `octavia` driver's start: clients from the settings, the Router LB found or created
//! ([`router_lb::ensure`], by the leader only) with the Node annotation read first and written
//! after, and the [`OctaviaDriver`] for it.
//!
//! What the operator must fix (no router from the service subnet to the external network, a
//! missing option, an `l7_router_uuid` that does not exist) is logged as one clear line per
//! attempt and a Warning Event on the Node, and retried with backoff instead of exiting: the
//! controller does not crash-loop while the cloud is being set up.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Node, ObjectReference};
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use nephrite_l7::octavia::{Desired, Ownership};
use nephrite_runtime::ShutdownHandle;
use serde_json::json;
use tokio::sync::watch;

use super::barbican::Barbican;
use super::driver::{BACKOFF_MAX, BACKOFF_START, OctaviaDriver};
use super::neutron::Neutron;
use super::octavia::{Octavia, Settle};
use super::router_lb::{self, RouterError};
use super::settings::OpenStackSettings;
use super::state::{ROUTER_STATE, RouterState};
use super::{ApiError, Session};
use crate::source::Snapshot;

/// How long one OpenStack request may take.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(60);

/// Why the driver did not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// The HTTP client could not be built.
    #[error("building the HTTP client: {0}")]
    Http(#[from] reqwest::Error),
    /// Shut down before the Router LB was ready.
    #[error("shut down before the Router LB was ready")]
    ShutDown,
}

/// The Octavia and Neutron clients of `settings`.
pub fn clients(settings: &OpenStackSettings) -> Result<(Octavia, Neutron), StartError> {
    let octavia_session = Arc::new(Session::new(
        settings.octavia.credentials.clone(),
        REQUEST_TIMEOUT,
    )?);
    let neutron_session = if settings.neutron.credentials == settings.octavia.credentials {
        octavia_session.clone()
    } else {
        Arc::new(Session::new(
            settings.neutron.credentials.clone(),
            REQUEST_TIMEOUT,
        )?)
    };
    Ok((
        Octavia::new(
            octavia_session,
            settings.octavia.endpoint.clone(),
            Settle::default(),
        ),
        Neutron::new(neutron_session, settings.neutron.endpoint.clone()),
    ))
}

/// The Node annotation's router state; None when the Node or the annotation is missing or
/// unreadable (said in the log).
pub async fn read_node_state(client: &kube::Client, node: &str) -> Option<RouterState> {
    let api: Api<Node> = Api::all(client.clone());
    let found = match api.get_opt(node).await {
        Ok(found) => found,
        Err(e) => {
            tracing::warn!("reading Node {node}: {e}");
            return None;
        }
    };
    let Some(node_object) = found else {
        tracing::warn!("Node {node} does not exist: the router state is not recorded");
        return None;
    };
    let text = node_object.metadata.annotations?.remove(ROUTER_STATE)?;
    match RouterState::from_annotation(&text) {
        Ok(state) => Some(state),
        Err(e) => {
            tracing::warn!("Node {node}: {e}; looking the Router LB up instead");
            None
        }
    }
}

/// Writes `state` on Node `node` (when it differs).
pub async fn write_node_state(
    client: &kube::Client,
    node: &str,
    state: &RouterState,
) -> Result<(), kube::Error> {
    let api: Api<Node> = Api::all(client.clone());
    let patch = json!({"metadata": {"annotations": {ROUTER_STATE: state.to_annotation()}}});
    api.patch(node, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .map(drop)
}

/// Waits until `leadership` says this controller leads (at once without an election).
async fn leading(
    leadership: &mut Option<watch::Receiver<bool>>,
    shutdown: &ShutdownHandle,
) -> Result<(), StartError> {
    let Some(leadership) = leadership else {
        return Ok(());
    };
    let mut said = false;
    while !*leadership.borrow_and_update() {
        if !said {
            tracing::info!("waiting to lead before looking for the Router LB");
            said = true;
        }
        tokio::select! {
            changed = leadership.changed() => {
                if changed.is_err() {
                    return Err(StartError::ShutDown);
                }
            }
            _ = shutdown.triggered() => return Err(StartError::ShutDown),
        }
    }
    Ok(())
}

/// Finds or creates the Router LB (retrying with backoff what fails), records it on the Node,
/// and returns the driver and the router's state.
///
/// With an election (`leadership`, `--source kube`) only the leader looks for the Router LB and
/// creates it, so two controllers never create two; a standby waits here until it leads and
/// then finds what the leader made. A load balancer created here carries the tree of the
/// current snapshot (`snapshots`), so the first sync is one call.
pub async fn start(
    (octavia, neutron): (Octavia, Neutron),
    settings: &OpenStackSettings,
    kube: Option<kube::Client>,
    identity: &str,
    snapshots: &watch::Receiver<Arc<Snapshot>>,
    mut leadership: Option<watch::Receiver<bool>>,
    shutdown: &ShutdownHandle,
) -> Result<(OctaviaDriver, RouterState), StartError> {
    let mut backoff = BACKOFF_START;
    let (state, recorded) = loop {
        leading(&mut leadership, shutdown).await?;
        // Read after leading: the previous leader may have written it.
        let recorded = match &kube {
            Some(client) => read_node_state(client, &settings.node_name).await,
            None => None,
        };
        let desired = Desired::from_config(&snapshots.borrow().translation.config);
        match router_lb::ensure(&octavia, &neutron, settings, recorded.as_ref(), &desired).await {
            Ok(state) => break (state, recorded),
            Err(error) => {
                tracing::error!(
                    retry_in = ?backoff,
                    "the Router LB is not ready: {error}"
                );
                if let Some(client) = &kube {
                    node_event(client, identity, &settings.node_name, &error).await;
                }
                tokio::select! {
                    () = tokio::time::sleep(backoff) => {}
                    _ = shutdown.triggered() => return Err(StartError::ShutDown),
                }
                backoff = (backoff * 2).min(BACKOFF_MAX);
            }
        }
    };
    tracing::info!(
        lb = %state.router_lb.id,
        vip = %state.router_lb.ip,
        fip = %state.fip,
        "Router LB ready"
    );
    if let Some(client) = &kube
        && recorded.as_ref() != Some(&state)
        && let Err(e) = write_node_state(client, &settings.node_name, &state).await
    {
        tracing::warn!(
            "recording the router state on Node {}: {e}",
            settings.node_name
        );
    }
    let mut driver = OctaviaDriver::new(
        octavia,
        state.router_lb.id.clone(),
        Ownership::new(settings.cluster.clone()),
        kube.map(|client| (client, identity.to_owned())),
    );
    match &settings.barbican {
        Some(access) => {
            let session = Arc::new(Session::new(access.credentials.clone(), REQUEST_TIMEOUT)?);
            driver = driver.with_barbican(
                Barbican::new(session, access.endpoint.clone()),
                &settings.cluster,
            );
        }
        None => tracing::info!(
            "no Barbican (--barbican-url): Ingress and Route certificates are not stored and \
             the Router LB gets no TERMINATED_HTTPS listener"
        ),
    }
    Ok((driver, state))
}

/// A Warning Event `RouterNotReady` on the controller's Node.
async fn node_event(client: &kube::Client, identity: &str, node: &str, error: &RouterError) {
    let recorder = Recorder::new(
        client.clone(),
        Reporter {
            controller: "kuryr-l7".to_owned(),
            instance: Some(identity.to_owned()),
        },
    );
    let reference = ObjectReference {
        api_version: Some("v1".to_owned()),
        kind: Some("Node".to_owned()),
        name: Some(node.to_owned()),
        ..ObjectReference::default()
    };
    let reason = match error {
        RouterError::Api(ApiError::ExternalGatewayNotFound(_)) => "NoExternalGateway",
        _ => "RouterNotReady",
    };
    let event = Event {
        type_: EventType::Warning,
        reason: reason.to_owned(),
        note: Some(crate::kubernetes::event_note(&error.to_string())),
        action: "EnsureRouter".to_owned(),
        secondary: None,
    };
    if let Err(e) = recorder.publish(&event, &reference).await {
        tracing::warn!("publishing an Event on Node {node}: {e}");
    }
}
