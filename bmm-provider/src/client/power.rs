//! Power and reboots through the public API: an instance reboots by `PATCH instance/{id}`
//! with `triggerReboot`; its machine's power state is the `powerState` of the compute tray
//! whose `componentId` is the machine's id (`GET tray?siteId=…&type=compute&componentId=…`),
//! switched by `PATCH tray/{id}/power`. The tray calls need the provider-admin role on a real
//! platform; a caller without it gets [`ApiError::Auth`] and must treat the power state as
//! unknown.

use http::Method;
use serde_json::json;

use super::resources::decode;
use super::types::{Instance, Machine, Tray};
use super::{ApiError, BmmClient};

impl BmmClient {
    /// `PATCH instance/{id}` with `triggerReboot: true`: the instance goes `Rebooting`.
    pub async fn reboot_instance(&self, id: &str) -> Result<Instance, ApiError> {
        let op = "PATCH instance/{id}";
        let (_, text) = self
            .call(
                op,
                Method::PATCH,
                &format!("instance/{id}"),
                &[],
                Some(&json!({"triggerReboot": true})),
                &[200],
            )
            .await?;
        decode(op, &text)
    }

    /// `GET machine/{id}`; `None` on 404.
    pub async fn machine(&self, id: &str) -> Result<Option<Machine>, ApiError> {
        self.get("GET machine/{id}", &format!("machine/{id}")).await
    }

    /// The compute tray holding `machine_id` at a site, if the platform lists one.
    pub async fn machine_tray(
        &self,
        site_id: &str,
        machine_id: &str,
    ) -> Result<Option<Tray>, ApiError> {
        let trays: Vec<Tray> = self
            .list_all(
                "GET tray",
                "tray",
                &[
                    ("siteId", site_id.to_string()),
                    ("type", "compute".to_string()),
                    ("componentId", machine_id.to_string()),
                ],
            )
            .await?;
        Ok(trays
            .into_iter()
            .find(|t| t.component_id.as_deref() == Some(machine_id)))
    }

    /// `PATCH tray/{id}/power` with `state` (`on`, `off`, `cycle`, `forceoff`, `forcecycle`).
    pub async fn set_tray_power(
        &self,
        site_id: &str,
        tray_id: &str,
        state: &str,
    ) -> Result<(), ApiError> {
        self.call(
            "PATCH tray/{id}/power",
            Method::PATCH,
            &format!("tray/{tray_id}/power"),
            &[],
            Some(&json!({"siteId": site_id, "state": state})),
            &[200],
        )
        .await
        .map(|_| ())
    }
}
