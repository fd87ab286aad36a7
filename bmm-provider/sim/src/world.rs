//! The simulated platform: objects, their status progressions and the rules the real API
//! enforces (duplicate names, parents existing, deletion order, machine allocation).
//!
//! Objects are kept as the JSON the API returns; status is derived from the time since the
//! object was created or deleted, at the moment a request looks at it.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use serde_json::{Map, Value, json};

mod instances;
mod network;
mod power;

/// The id of the simulator's one site (named `sim-site`).
pub const SITE_ID: &str = "5a7e0000-0000-4000-8000-000000000001";
/// The id of the simulator's instance type (`sim.baremetal`).
pub const INSTANCE_TYPE_ID: &str = "7e1e0000-0000-4000-8000-000000000002";

/// The kinds of objects the simulator keeps.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Kind {
    /// `ipblock`.
    IpBlock,
    /// `vpc`.
    Vpc,
    /// `subnet`.
    Subnet,
    /// `network-security-group`.
    Nsg,
    /// `instance`.
    Instance,
}

impl Kind {
    /// The metric label.
    pub fn label(self) -> &'static str {
        match self {
            Kind::IpBlock => "ipblock",
            Kind::Vpc => "vpc",
            Kind::Subnet => "subnet",
            Kind::Nsg => "network-security-group",
            Kind::Instance => "instance",
        }
    }

    /// All kinds.
    pub const ALL: [Kind; 5] = [
        Kind::IpBlock,
        Kind::Vpc,
        Kind::Subnet,
        Kind::Nsg,
        Kind::Instance,
    ];
}

/// An API error the simulator answers with.
#[derive(Debug, Clone, PartialEq)]
pub struct Refusal {
    /// HTTP status.
    pub status: u16,
    /// `message`.
    pub message: String,
    /// `data`.
    pub data: Value,
}

impl Refusal {
    /// 400 with details.
    pub fn invalid(message: impl Into<String>, data: Value) -> Refusal {
        Refusal {
            status: 400,
            message: message.into(),
            data,
        }
    }
    /// 404.
    pub fn not_found() -> Refusal {
        Refusal {
            status: 404,
            message: "Could not find resource with specified ID".into(),
            data: Value::Null,
        }
    }
    /// 409 carrying the existing object's id.
    pub fn conflict(kind: Kind, name: &str, id: &str) -> Refusal {
        Refusal {
            status: 409,
            message: format!("{} with name {name:?} already exists", kind.label()),
            data: json!({"id": id}),
        }
    }
}

struct Record {
    body: Map<String, Value>,
    created: Instant,
    deleted: Option<Instant>,
    delay: Duration,
    /// Put in `Error` out of band: it no longer progresses (until deleted).
    failed: bool,
    /// An instance rebooting (or booting after a power-on) is `Rebooting` until then.
    rebooting_until: Option<Instant>,
}

/// Timing of the simulated platform.
#[derive(Debug, Clone, Copy)]
pub struct Delays {
    /// Time for an instance to become Ready / to go.
    pub provision: Duration,
    /// Time for network objects to become Ready / to go.
    pub network: Duration,
    /// Time an instance stays `Rebooting` after a reboot or a power-on.
    pub reboot: Duration,
}

/// The whole simulated platform.
pub struct World {
    delays: Delays,
    /// The one site.
    pub site: Value,
    /// The instance type.
    pub instance_type: Value,
    tenants: BTreeMap<String, String>,
    machines: Vec<Map<String, Value>>,
    /// One compute tray per machine (`componentId` = the machine's id), with its power state.
    trays: Vec<Map<String, Value>>,
    records: BTreeMap<Kind, Vec<Record>>,
    /// Objects ever created, per kind.
    pub created: BTreeMap<Kind, u64>,
    subnet_hosts: BTreeMap<String, u32>,
}

fn now_text() -> String {
    jiff::Timestamp::now().to_string()
}

fn history(status: &str, message: &str) -> Value {
    let now = now_text();
    json!({"status": status, "message": message, "created": now, "updated": now})
}

fn str_field<'a>(body: &'a Map<String, Value>, key: &str) -> Option<&'a str> {
    body.get(key).and_then(Value::as_str)
}

impl World {
    /// A fresh platform: one Registered site, one instance type with `machines` machines.
    pub fn new(delays: Delays, machines: usize) -> World {
        let now = now_text();
        let provider = uuid::Uuid::new_v4().to_string();
        let site_id = SITE_ID.to_string();
        let site = json!({
            "id": site_id, "name": "sim-site", "org": "sim-provider", "infrastructureProviderId": provider,
            "isOnline": true, "status": "Registered",
            "statusHistory": [history("Registered", "Site has been registered")],
            "created": now, "updated": now,
        });
        let type_id = INSTANCE_TYPE_ID.to_string();
        let instance_type = json!({
            "id": type_id, "name": "sim.baremetal", "infrastructureProviderId": provider, "siteId": site_id,
            "status": "Ready", "created": now, "updated": now,
        });
        let machines = (0..machines)
            .map(|i| {
                let mut m = Map::new();
                m.insert("id".into(), json!(format!("fm100-sim-{i:04}")));
                m.insert("infrastructureProviderId".into(), json!(provider));
                m.insert("siteId".into(), json!(site_id));
                m.insert("instanceTypeId".into(), json!(type_id));
                m.insert("instanceId".into(), Value::Null);
                m.insert("vendor".into(), json!("Simulated"));
                m.insert(
                    "machineInterfaces".into(),
                    json!([power::machine_interface(i)]),
                );
                m.insert("status".into(), json!("Ready"));
                m.insert("created".into(), json!(now));
                m.insert("updated".into(), json!(now));
                m
            })
            .collect::<Vec<_>>();
        let trays = power::trays(&machines);
        World {
            delays,
            site,
            instance_type,
            tenants: BTreeMap::new(),
            machines,
            trays,
            records: BTreeMap::new(),
            created: BTreeMap::new(),
            subnet_hosts: BTreeMap::new(),
        }
    }

    /// The site's id.
    pub fn site_id(&self) -> String {
        self.site["id"].as_str().unwrap_or_default().to_string()
    }

    /// The tenant of an org (made on first use).
    pub fn tenant(&mut self, org: &str) -> Value {
        let id = self
            .tenants
            .entry(org.to_string())
            .or_insert_with(|| uuid::Uuid::new_v4().to_string())
            .clone();
        let now = now_text();
        json!({"id": id, "org": org, "orgDisplayName": org, "created": now, "updated": now,
               "capabilities": {"targetedInstanceCreation": true}})
    }

    /// Moves every object along its progression and removes what finished deleting.
    pub fn advance(&mut self) {
        let now = Instant::now();
        let mut freed = Vec::new();
        for (kind, records) in self.records.iter_mut() {
            records.retain(|r| match r.deleted {
                Some(at) if now.duration_since(at) >= r.delay => {
                    if *kind == Kind::Instance {
                        freed.push(str_field(&r.body, "id").unwrap_or_default().to_string());
                    }
                    false
                }
                _ => true,
            });
            for r in records.iter_mut() {
                if r.deleted.is_some() || r.failed {
                    continue;
                }
                let age = now.duration_since(r.created);
                if r.rebooting_until.is_some_and(|until| now >= until) {
                    r.rebooting_until = None;
                }
                let status = if r.rebooting_until.is_some() {
                    "Rebooting"
                } else if age >= r.delay {
                    "Ready"
                } else if age >= r.delay / 2 {
                    "Provisioning"
                } else {
                    "Pending"
                };
                if str_field(&r.body, "status") != Some(status) {
                    r.body.insert("status".into(), json!(status));
                    r.body.insert("updated".into(), json!(now_text()));
                    if let Some(Value::Array(h)) = r.body.get_mut("statusHistory") {
                        h.insert(0, history(status, &format!("{} is {status}", kind.label())));
                    }
                }
            }
        }
        for instance in freed {
            for m in self
                .machines
                .iter_mut()
                .filter(|m| str_field(m, "instanceId") == Some(instance.as_str()))
            {
                m.insert("instanceId".into(), Value::Null);
                m.insert("status".into(), json!("Ready"));
                power::clear_machine_addresses(m);
            }
        }
        self.fill_instance_addresses();
    }

    /// Every live object of a kind, oldest first.
    pub fn list(&self, kind: Kind) -> Vec<Value> {
        self.records
            .get(&kind)
            .into_iter()
            .flatten()
            .map(|r| Value::Object(r.body.clone()))
            .collect()
    }

    /// The live objects of a kind that `keep` accepts, oldest first (only those are copied).
    pub fn list_matching(
        &self,
        kind: Kind,
        keep: impl Fn(&Map<String, Value>) -> bool,
    ) -> Vec<Value> {
        self.live(kind)
            .filter(|b| keep(b))
            .map(|b| Value::Object(b.clone()))
            .collect()
    }

    /// One object by id.
    pub fn get(&self, kind: Kind, id: &str) -> Option<Value> {
        self.record(kind, id).map(|r| Value::Object(r.body.clone()))
    }

    fn record(&self, kind: Kind, id: &str) -> Option<&Record> {
        self.records
            .get(&kind)?
            .iter()
            .find(|r| str_field(&r.body, "id") == Some(id))
    }

    /// The live (not deleted) object a request refers to by `field`, or the 400 the API gives
    /// for an unknown reference: "<what> <id> does not exist", `{field: "unknown <what>"}`.
    fn referenced(
        &self,
        kind: Kind,
        field: &str,
        id: &str,
        what: &str,
    ) -> Result<&Record, Refusal> {
        self.record(kind, id)
            .filter(|r| r.deleted.is_none())
            .ok_or_else(|| {
                Refusal::invalid(
                    format!("{what} {id} does not exist"),
                    json!({ field: format!("unknown {what}") }),
                )
            })
    }

    fn record_mut(&mut self, kind: Kind, id: &str) -> Option<&mut Record> {
        self.records
            .get_mut(&kind)?
            .iter_mut()
            .find(|r| str_field(&r.body, "id") == Some(id))
    }

    fn live(&self, kind: Kind) -> impl Iterator<Item = &Map<String, Value>> {
        self.records
            .get(&kind)
            .into_iter()
            .flatten()
            .map(|r| &r.body)
    }

    fn duplicate(&self, kind: Kind, name: &str, scope_key: &str, scope: &str) -> Option<String> {
        self.live(kind)
            .find(|b| str_field(b, "name") == Some(name) && str_field(b, scope_key) == Some(scope))
            .and_then(|b| str_field(b, "id").map(str::to_string))
    }

    fn insert(&mut self, kind: Kind, mut body: Map<String, Value>) -> Value {
        let now = now_text();
        body.insert("status".into(), json!("Pending"));
        body.insert(
            "statusHistory".into(),
            json!([history("Pending", "Request received, pending processing")]),
        );
        body.insert("created".into(), json!(now));
        body.insert("updated".into(), json!(now));
        let delay = if kind == Kind::Instance {
            self.delays.provision
        } else {
            self.delays.network
        };
        let value = Value::Object(body.clone());
        self.records.entry(kind).or_default().push(Record {
            body,
            created: Instant::now(),
            deleted: None,
            delay,
            failed: false,
            rebooting_until: None,
        });
        *self.created.entry(kind).or_default() += 1;
        value
    }

    fn check_site(&self, site_id: &str) -> Result<(), Refusal> {
        if site_id == self.site_id() {
            Ok(())
        } else {
            Err(Refusal::invalid(
                format!("Site {site_id} does not exist"),
                json!({"siteId": "unknown site"}),
            ))
        }
    }

    /// `DELETE`: refuses what still has dependants, removes subnets at once, otherwise starts
    /// the Deleting/Terminating progression. Returns the success status.
    pub fn delete(&mut self, kind: Kind, id: &str) -> Result<u16, Refusal> {
        let exists = self.record(kind, id).is_some();
        if !exists {
            return Err(Refusal::not_found());
        }
        let in_use = |k: Kind, key: &str| self.live(k).any(|b| str_field(b, key) == Some(id));
        let blocker = match kind {
            Kind::Vpc if in_use(Kind::Instance, "vpcId") => Some("VPC still has instances"),
            Kind::Vpc if in_use(Kind::Subnet, "vpcId") => Some("VPC still has subnets"),
            Kind::Subnet
                if self.live(Kind::Instance).any(|b| {
                    b.get("interfaces")
                        .and_then(Value::as_array)
                        .into_iter()
                        .flatten()
                        .any(|i| i.get("subnetId").and_then(Value::as_str) == Some(id))
                }) =>
            {
                Some("Subnet still has instances")
            }
            Kind::Nsg if in_use(Kind::Vpc, "networkSecurityGroupId") => {
                Some("NetworkSecurityGroup is attached to a VPC")
            }
            Kind::IpBlock if in_use(Kind::Subnet, "ipv4BlockId") => {
                Some("IP block still has subnets")
            }
            _ => None,
        };
        if let Some(message) = blocker {
            return Err(Refusal::invalid(message, json!({"id": id})));
        }
        if kind == Kind::Subnet {
            if let Some(v) = self.records.get_mut(&Kind::Subnet) {
                v.retain(|r| str_field(&r.body, "id") != Some(id));
            }
            return Ok(204);
        }
        let status = if kind == Kind::Instance {
            "Terminating"
        } else {
            "Deleting"
        };
        if let Some(r) = self.record_mut(kind, id)
            && r.deleted.is_none()
        {
            r.deleted = Some(Instant::now());
            r.body.insert("status".into(), json!(status));
            r.body.insert("updated".into(), json!(now_text()));
            if let Some(Value::Array(h)) = r.body.get_mut("statusHistory") {
                h.insert(0, history(status, "Deletion requested"));
            }
        }
        Ok(202)
    }

    /// Refuses (403) an object of `kind` that belongs to another org's tenant; a missing one
    /// passes (the operation answers 404 itself).
    pub fn check_owner(&mut self, kind: Kind, id: &str, org: &str) -> Result<(), Refusal> {
        let tenant = self
            .tenants
            .entry(org.to_string())
            .or_insert_with(|| uuid::Uuid::new_v4().to_string())
            .clone();
        match self.record(kind, id) {
            Some(r) if str_field(&r.body, "tenantId") != Some(tenant.as_str()) => Err(Refusal {
                status: 403,
                message: format!(
                    "User is not allowed to perform this action: {} {id} does not belong to org {org:?}",
                    kind.label()
                ),
                data: Value::Null,
            }),
            _ => Ok(()),
        }
    }

    /// The machines, as the API returns them.
    pub fn machines(&self) -> Vec<Value> {
        self.machines.iter().cloned().map(Value::Object).collect()
    }

    /// Live objects per kind (for tests and the leak check).
    pub fn count(&self, kind: Kind) -> usize {
        self.records.get(&kind).map_or(0, Vec::len)
    }
}
