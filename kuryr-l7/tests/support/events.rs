//! Reading the Events a controller reported about an object.

use k8s_openapi::api::events::v1::Event;
use kube::api::{Api, ListParams};

/// The note of the first Event in `events`' namespace with `reason` about the object `name`
/// (`None` while there is none).
pub async fn event_note(
    events: &Api<Event>,
    reason: &str,
    name: &str,
) -> anyhow::Result<Option<String>> {
    Ok(events
        .list(&ListParams::default())
        .await?
        .items
        .into_iter()
        .find(|e| {
            e.reason.as_deref() == Some(reason)
                && e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(name)
        })
        .and_then(|e| e.note))
}
