//! Power and reboots, as the public API exposes them: every machine sits in a compute tray
//! (`GET tray`, `componentId` = the machine's id) whose `powerState` is `on` or `off` and which
//! `PATCH tray/{id}/power` switches (`on`, `off`, `cycle`, `forceoff`, `forcecycle`); an
//! instance's `PATCH instance/{id}` with `triggerReboot` puts it in `Rebooting` for a while, and
//! so do a power cycle and a power-on, since the host boots again. A machine's
//! `machineInterfaces` carry the addresses its instance was given.

use std::time::Instant;

use serde_json::{Map, Value, json};

use super::{Kind, Refusal, World, history, now_text, str_field};

/// The id of the simulator's one rack.
const RACK_ID: &str = "4ac00000-0000-4000-8000-000000000003";

/// A locally administered MAC address made of `n`.
pub(super) fn mac_address(n: u32) -> String {
    let b = n.to_be_bytes();
    format!("02:00:{:02x}:{:02x}:{:02x}:{:02x}", b[0], b[1], b[2], b[3])
}

/// The primary interface of machine number `index`, without addresses.
pub(super) fn machine_interface(index: usize) -> Value {
    json!({
        "id": uuid::Uuid::new_v4().to_string(),
        "hostname": format!("sim-host-{index:04}"),
        "isPrimary": true,
        "macAddress": mac_address(index as u32),
        "ipAddresses": [],
    })
}

/// One compute tray per machine, powered on.
pub(super) fn trays(machines: &[Map<String, Value>]) -> Vec<Map<String, Value>> {
    machines
        .iter()
        .enumerate()
        .map(|(i, m)| {
            let mut t = Map::new();
            t.insert("id".into(), json!(uuid::Uuid::new_v4().to_string()));
            t.insert(
                "componentId".into(),
                m.get("id").cloned().unwrap_or(Value::Null),
            );
            t.insert("type".into(), json!("compute"));
            t.insert("name".into(), json!(format!("compute-tray-{i}")));
            t.insert("manufacturer".into(), json!("Simulated"));
            t.insert("model".into(), json!("sim-tray"));
            t.insert("powerState".into(), json!("on"));
            t.insert(
                "position".into(),
                json!({"slotId": i + 1, "trayIdx": 0, "hostId": i + 1}),
            );
            t.insert("rackId".into(), json!(RACK_ID));
            t
        })
        .collect()
}

/// Empties a machine's interface addresses (its instance is gone).
pub(super) fn clear_machine_addresses(machine: &mut Map<String, Value>) {
    if let Some(Value::Array(interfaces)) = machine.get_mut("machineInterfaces") {
        for i in interfaces.iter_mut().filter_map(Value::as_object_mut) {
            i.insert("ipAddresses".into(), json!([]));
        }
    }
}

impl World {
    /// Gives the primary interface of `machine` the address its instance got.
    pub(super) fn record_machine_address(&mut self, machine: &str, address: &str) {
        if let Some(m) = self
            .machines
            .iter_mut()
            .find(|m| str_field(m, "id") == Some(machine))
            && let Some(Value::Array(interfaces)) = m.get_mut("machineInterfaces")
            && let Some(primary) = interfaces.first_mut().and_then(Value::as_object_mut)
        {
            primary.insert("ipAddresses".into(), json!([address]));
        }
    }

    /// The trays.
    pub fn trays(&self) -> Vec<Value> {
        self.trays.iter().cloned().map(Value::Object).collect()
    }

    /// The tray of a machine (by its `componentId`).
    fn tray_of_machine(&self, machine: &str) -> Option<usize> {
        self.trays
            .iter()
            .position(|t| str_field(t, "componentId") == Some(machine))
    }

    /// Puts the live instance on `machine` in `Rebooting` for the reboot delay.
    fn reboot_on_machine(&mut self, machine: &str) {
        let until = Instant::now() + self.delays.reboot;
        for r in self.records.get_mut(&Kind::Instance).into_iter().flatten() {
            if str_field(&r.body, "machineId") == Some(machine) && r.deleted.is_none() && !r.failed
            {
                r.rebooting_until = Some(until);
                r.body.insert("status".into(), json!("Rebooting"));
                r.body.insert("updated".into(), json!(now_text()));
                if let Some(Value::Array(h)) = r.body.get_mut("statusHistory") {
                    h.insert(
                        0,
                        history("Rebooting", "Reboot request received, processing"),
                    );
                }
            }
        }
    }

    /// `PATCH tray/{id}/power`: `on` (the host boots: its instance is `Rebooting` for a
    /// while), `off`/`forceoff`, `cycle`/`forcecycle` (a reboot). Answers the task ids.
    pub fn set_tray_power(
        &mut self,
        id: &str,
        request: &Map<String, Value>,
    ) -> Result<Value, Refusal> {
        let Some(index) = self
            .trays
            .iter()
            .position(|t| str_field(t, "id") == Some(id))
        else {
            return Err(Refusal::not_found());
        };
        let site = str_field(request, "siteId").unwrap_or_default();
        self.check_site(site)?;
        let state = str_field(request, "state").unwrap_or_default();
        let was_on = str_field(&self.trays[index], "powerState") == Some("on");
        let machine = str_field(&self.trays[index], "componentId")
            .unwrap_or_default()
            .to_string();
        let (now_on, boots) = match state {
            "on" => (true, !was_on),
            "off" | "forceoff" => (false, false),
            "cycle" | "forcecycle" => (true, true),
            other => {
                return Err(Refusal::invalid(
                    format!("unknown power state {other:?}"),
                    json!({"state": "must be on, off, cycle, forceoff or forcecycle"}),
                ));
            }
        };
        self.trays[index].insert(
            "powerState".into(),
            json!(if now_on { "on" } else { "off" }),
        );
        if boots {
            self.reboot_on_machine(&machine);
        }
        Ok(json!({"taskIds": [uuid::Uuid::new_v4().to_string()]}))
    }

    /// `PATCH instance/{id}`: `name`, `description` and `labels` replace the instance's;
    /// `triggerReboot: true` reboots a Ready instance (and powers its tray on). A 400 when a
    /// reboot is asked of an instance that is not Ready.
    pub fn update_instance(
        &mut self,
        id: &str,
        request: &Map<String, Value>,
    ) -> Result<Value, Refusal> {
        let Some(r) = self.record(Kind::Instance, id) else {
            return Err(Refusal::not_found());
        };
        let reboot = request.get("triggerReboot").and_then(Value::as_bool) == Some(true);
        let status = str_field(&r.body, "status").unwrap_or_default().to_string();
        let machine = str_field(&r.body, "machineId").map(str::to_string);
        if reboot && status != "Ready" {
            return Err(Refusal::invalid(
                format!("Instance is {status}: only a Ready instance can be rebooted"),
                json!({"triggerReboot": "instance is not Ready"}),
            ));
        }
        if let Some(r) = self.record_mut(Kind::Instance, id) {
            for key in ["name", "description", "labels"] {
                if let Some(v) = request.get(key).filter(|v| !v.is_null()) {
                    r.body.insert(key.into(), v.clone());
                }
            }
            r.body.insert("updated".into(), json!(now_text()));
        }
        if reboot && let Some(machine) = machine {
            if let Some(t) = self.tray_of_machine(&machine) {
                self.trays[t].insert("powerState".into(), json!("on"));
            }
            self.reboot_on_machine(&machine);
        }
        self.get(Kind::Instance, id).ok_or_else(Refusal::not_found)
    }

    /// Out of band (for tests): switches the tray of the instance's machine. Returns whether
    /// the instance and its tray exist.
    pub fn power_instance(&mut self, id: &str, state: &str) -> bool {
        let Some(machine) = self
            .record(Kind::Instance, id)
            .and_then(|r| str_field(&r.body, "machineId").map(str::to_string))
        else {
            return false;
        };
        let Some(tray) = self.tray_of_machine(&machine) else {
            return false;
        };
        let tray_id = str_field(&self.trays[tray], "id")
            .unwrap_or_default()
            .to_string();
        let mut request = Map::new();
        request.insert("siteId".into(), json!(self.site_id()));
        request.insert("state".into(), json!(state));
        self.set_tray_power(&tray_id, &request).is_ok()
    }
}
