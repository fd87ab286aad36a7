//! The simulated platform: objects, their status progressions and the rules the real API
//! enforces (duplicate names, parents existing, deletion order, machine allocation).
//!
//! Objects are kept as the JSON the API returns; status is derived from the time since the
//! object was created or deleted, at the moment a request looks at it.

use std::collections::BTreeMap;
use std::net::Ipv4Addr;
use std::time::{Duration, Instant};

use nephrite_bmm::Ipv4Cidr;
use serde_json::{Map, Value, json};

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
}

/// Timing of the simulated platform.
#[derive(Debug, Clone, Copy)]
pub struct Delays {
    /// Time for an instance to become Ready / to go.
    pub provision: Duration,
    /// Time for network objects to become Ready / to go.
    pub network: Duration,
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
                m.insert("status".into(), json!("Ready"));
                m.insert("created".into(), json!(now));
                m.insert("updated".into(), json!(now));
                m
            })
            .collect();
        World {
            delays,
            site,
            instance_type,
            tenants: BTreeMap::new(),
            machines,
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
                if r.deleted.is_some() {
                    continue;
                }
                let age = now.duration_since(r.created);
                let status = if age >= r.delay {
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
            }
        }
        self.fill_instance_addresses();
    }

    fn fill_instance_addresses(&mut self) {
        let subnets: BTreeMap<String, String> = self
            .records
            .get(&Kind::Subnet)
            .map(|v| {
                v.iter()
                    .filter_map(|r| {
                        let len = r.body.get("prefixLength").and_then(Value::as_u64)?;
                        Some((
                            str_field(&r.body, "id")?.to_string(),
                            format!("{}/{len}", str_field(&r.body, "ipv4Prefix")?),
                        ))
                    })
                    .collect()
            })
            .unwrap_or_default();
        let hosts = &mut self.subnet_hosts;
        for r in self.records.get_mut(&Kind::Instance).into_iter().flatten() {
            if str_field(&r.body, "status") != Some("Ready") {
                continue;
            }
            if let Some(Value::Array(interfaces)) = r.body.get_mut("interfaces") {
                for iface in interfaces.iter_mut() {
                    let Some(obj) = iface.as_object_mut() else {
                        continue;
                    };
                    obj.insert("status".into(), json!("Ready"));
                    if obj
                        .get("ipAddresses")
                        .and_then(Value::as_array)
                        .is_some_and(|a| !a.is_empty())
                    {
                        continue;
                    }
                    let Some(subnet) = obj
                        .get("subnetId")
                        .and_then(Value::as_str)
                        .map(str::to_string)
                    else {
                        continue;
                    };
                    let Some(cidr) = subnets
                        .get(&subnet)
                        .and_then(|p| p.parse::<Ipv4Cidr>().ok())
                    else {
                        continue;
                    };
                    let n = hosts.entry(subnet).or_insert(1);
                    *n += 1;
                    if let Some(address) = cidr.host(*n) {
                        obj.insert("ipAddresses".into(), json!([address.to_string()]));
                    }
                }
            }
        }
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

    /// `POST ipblock` (body already schema-valid).
    pub fn create_ip_block(
        &mut self,
        tenant: &str,
        req: &Map<String, Value>,
    ) -> Result<Value, Refusal> {
        let name = str_field(req, "name").unwrap_or_default();
        let site = str_field(req, "siteId").unwrap_or_default();
        self.check_site(site)?;
        if let Some(id) = self.duplicate(Kind::IpBlock, name, "siteId", site) {
            return Err(Refusal::conflict(Kind::IpBlock, name, &id));
        }
        let prefix = str_field(req, "prefix").unwrap_or_default();
        let len = req
            .get("prefixLength")
            .and_then(Value::as_u64)
            .unwrap_or(99);
        if str_field(req, "protocolVersion") != Some("IPv4") {
            return Err(Refusal::invalid(
                "only IPv4 blocks are supported",
                json!({"protocolVersion": "must be IPv4"}),
            ));
        }
        let cidr = format!("{prefix}/{len}").parse::<Ipv4Cidr>().map_err(|e| {
            Refusal::invalid(
                format!("invalid prefix: {e}"),
                json!({"prefix": e.to_string()}),
            )
        })?;
        let routing = match str_field(req, "routingType") {
            Some("Datacenter Only") => "DatacenterOnly",
            _ => "Public",
        };
        let mut body = Map::new();
        body.insert("id".into(), json!(uuid::Uuid::new_v4().to_string()));
        body.insert("name".into(), json!(name));
        body.insert("siteId".into(), json!(site));
        body.insert(
            "infrastructureProviderId".into(),
            self.site["infrastructureProviderId"].clone(),
        );
        body.insert("tenantId".into(), json!(tenant));
        body.insert("routingType".into(), json!(routing));
        body.insert("prefix".into(), json!(cidr.network().to_string()));
        body.insert("prefixLength".into(), json!(cidr.prefix_len()));
        body.insert("protocolVersion".into(), json!("IPv4"));
        Ok(self.insert(Kind::IpBlock, body))
    }

    /// `POST vpc`.
    pub fn create_vpc(
        &mut self,
        org: &str,
        tenant: &str,
        req: &Map<String, Value>,
    ) -> Result<Value, Refusal> {
        let name = str_field(req, "name").unwrap_or_default();
        let site = str_field(req, "siteId").unwrap_or_default();
        self.check_site(site)?;
        if let Some(id) = self.duplicate(Kind::Vpc, name, "siteId", site) {
            return Err(Refusal::conflict(Kind::Vpc, name, &id));
        }
        let id = str_field(req, "id")
            .map(str::to_string)
            .unwrap_or_else(|| uuid::Uuid::new_v4().to_string());
        if Kind::ALL.iter().any(|k| self.record(*k, &id).is_some()) {
            return Err(Refusal::conflict(Kind::Vpc, name, &id));
        }
        let mut body = Map::new();
        body.insert("id".into(), json!(id));
        body.insert("name".into(), json!(name));
        body.insert("org".into(), json!(org));
        body.insert("tenantId".into(), json!(tenant));
        body.insert("siteId".into(), json!(site));
        body.insert(
            "networkVirtualizationType".into(),
            json!(str_field(req, "networkVirtualizationType").unwrap_or("ETHERNET_VIRTUALIZER")),
        );
        body.insert(
            "networkSecurityGroupId".into(),
            req.get("networkSecurityGroupId")
                .cloned()
                .unwrap_or(Value::Null),
        );
        let vni = 1000 + self.created.get(&Kind::Vpc).copied().unwrap_or(0) % 60000;
        body.insert("vni".into(), json!(vni));
        body.insert(
            "labels".into(),
            req.get("labels").cloned().unwrap_or_else(|| json!({})),
        );
        Ok(self.insert(Kind::Vpc, body))
    }

    /// `PATCH vpc/{id}`.
    pub fn update_vpc(&mut self, id: &str, req: &Map<String, Value>) -> Result<Value, Refusal> {
        if let Some(nsg) = req.get("networkSecurityGroupId").and_then(Value::as_str)
            && self
                .record(Kind::Nsg, nsg)
                .is_none_or(|r| r.deleted.is_some())
        {
            return Err(Refusal::invalid(
                format!("NetworkSecurityGroup {nsg} does not exist"),
                json!({"networkSecurityGroupId": "unknown"}),
            ));
        }
        let record = self
            .record_mut(Kind::Vpc, id)
            .ok_or_else(Refusal::not_found)?;
        for key in ["name", "labels", "networkSecurityGroupId"] {
            if let Some(v) = req.get(key) {
                record.body.insert(key.into(), v.clone());
            }
        }
        record.body.insert("updated".into(), json!(now_text()));
        Ok(Value::Object(record.body.clone()))
    }

    /// `POST subnet`: allocates the first free prefix of the asked length in the IP block.
    pub fn create_subnet(
        &mut self,
        tenant: &str,
        req: &Map<String, Value>,
    ) -> Result<Value, Refusal> {
        let name = str_field(req, "name").unwrap_or_default();
        let vpc_id = str_field(req, "vpcId").unwrap_or_default();
        let vpc = self
            .record(Kind::Vpc, vpc_id)
            .filter(|r| r.deleted.is_none())
            .ok_or_else(|| {
                Refusal::invalid(
                    format!("VPC {vpc_id} does not exist"),
                    json!({"vpcId": "unknown VPC"}),
                )
            })?;
        let site = str_field(&vpc.body, "siteId")
            .unwrap_or_default()
            .to_string();
        if let Some(id) = self.duplicate(Kind::Subnet, name, "vpcId", vpc_id) {
            return Err(Refusal::conflict(Kind::Subnet, name, &id));
        }
        let block_id = str_field(req, "ipv4BlockId").ok_or_else(|| {
            Refusal::invalid(
                "ipv4BlockId is required",
                json!({"ipv4BlockId": "A value is required"}),
            )
        })?;
        let block = self
            .record(Kind::IpBlock, block_id)
            .filter(|r| r.deleted.is_none())
            .ok_or_else(|| {
                Refusal::invalid(
                    format!("IP block {block_id} does not exist"),
                    json!({"ipv4BlockId": "unknown IP block"}),
                )
            })?;
        let block_cidr = format!(
            "{}/{}",
            str_field(&block.body, "prefix").unwrap_or_default(),
            block
                .body
                .get("prefixLength")
                .and_then(Value::as_u64)
                .unwrap_or(0)
        )
        .parse::<Ipv4Cidr>()
        .map_err(|e| Refusal::invalid(e.to_string(), Value::Null))?;
        let routing = block
            .body
            .get("routingType")
            .cloned()
            .unwrap_or(json!("DatacenterOnly"));
        let len = req
            .get("prefixLength")
            .and_then(Value::as_u64)
            .unwrap_or(99);
        if len > 32 || (len as u8) < block_cidr.prefix_len() {
            return Err(Refusal::invalid(
                format!("prefixLength {len} does not fit IP block {block_cidr}"),
                json!({"prefixLength": "out of range"}),
            ));
        }
        let taken: Vec<Ipv4Cidr> = self
            .live(Kind::Subnet)
            .filter(|s| str_field(s, "ipv4BlockId") == Some(block_id))
            .filter_map(|s| {
                str_field(s, "ipv4Prefix").and_then(|p| {
                    format!(
                        "{p}/{}",
                        s.get("prefixLength").and_then(Value::as_u64).unwrap_or(32)
                    )
                    .parse()
                    .ok()
                })
            })
            .collect();
        let step = 1u64 << (32 - len);
        let start = u64::from(u32::from(block_cidr.network()));
        let size = 1u64 << (32 - u64::from(block_cidr.prefix_len()));
        let free = (0..size / step)
            .map(|i| Ipv4Cidr::new(Ipv4Addr::from((start + i * step) as u32), len as u8))
            .find(|c| !taken.iter().any(|t| t.contains(c) || c.contains(t)))
            .ok_or_else(|| {
                Refusal::invalid(
                    format!("IP block {block_cidr} has no free /{len}"),
                    json!({"prefixLength": "no space left in the IP block"}),
                )
            })?;
        let gateway = free.host(1).map(|g| g.to_string());
        let mut body = Map::new();
        body.insert("id".into(), json!(uuid::Uuid::new_v4().to_string()));
        body.insert("name".into(), json!(name));
        body.insert("siteId".into(), json!(site));
        body.insert("vpcId".into(), json!(vpc_id));
        body.insert("tenantId".into(), json!(tenant));
        body.insert("ipv4Prefix".into(), json!(free.network().to_string()));
        body.insert("ipv4BlockId".into(), json!(block_id));
        body.insert("ipv4Gateway".into(), json!(gateway));
        body.insert("mtu".into(), json!(9000));
        body.insert("prefixLength".into(), json!(len));
        body.insert("routingType".into(), routing);
        Ok(self.insert(Kind::Subnet, body))
    }

    /// `POST network-security-group`.
    pub fn create_nsg(&mut self, tenant: &str, req: &Map<String, Value>) -> Result<Value, Refusal> {
        let name = str_field(req, "name").unwrap_or_default();
        let site = str_field(req, "siteId").unwrap_or_default();
        self.check_site(site)?;
        if let Some(id) = self.duplicate(Kind::Nsg, name, "siteId", site) {
            return Err(Refusal::conflict(Kind::Nsg, name, &id));
        }
        let rules = req.get("rules").cloned().unwrap_or_else(|| json!([]));
        for (i, rule) in rules.as_array().into_iter().flatten().enumerate() {
            let protocol = rule
                .get("protocol")
                .and_then(Value::as_str)
                .unwrap_or_default();
            let has_ports = ["sourcePortRange", "destinationPortRange"]
                .iter()
                .any(|k| rule.get(*k).is_some_and(|v| !v.is_null()));
            if has_ports && matches!(protocol, "ANY" | "ICMP") {
                return Err(Refusal::invalid(
                    format!("rules[{i}]: ports are not allowed for protocol {protocol}"),
                    json!({format!("rules[{i}]"): "ports not allowed"}),
                ));
            }
            for key in ["sourcePrefix", "destinationPrefix"] {
                let value = rule.get(key).and_then(Value::as_str).unwrap_or_default();
                if value.parse::<Ipv4Cidr>().is_err() {
                    return Err(Refusal::invalid(
                        format!("rules[{i}].{key}: {value:?} is not a CIDR"),
                        json!({format!("rules[{i}].{key}"): "invalid CIDR"}),
                    ));
                }
            }
            if rule
                .get("priority")
                .and_then(Value::as_i64)
                .is_some_and(|p| !(0..=60000).contains(&p))
            {
                return Err(Refusal::invalid(
                    format!("rules[{i}].priority must be 0-60000"),
                    json!({format!("rules[{i}].priority"): "out of range"}),
                ));
            }
        }
        let mut body = Map::new();
        body.insert("id".into(), json!(uuid::Uuid::new_v4().to_string()));
        body.insert("name".into(), json!(name));
        body.insert("siteId".into(), json!(site));
        body.insert("tenantId".into(), json!(tenant));
        body.insert(
            "statefulEgress".into(),
            req.get("statefulEgress").cloned().unwrap_or(json!(false)),
        );
        body.insert("rules".into(), rules);
        body.insert(
            "labels".into(),
            req.get("labels").cloned().unwrap_or_else(|| json!({})),
        );
        Ok(self.insert(Kind::Nsg, body))
    }

    /// `POST instance`: takes a free machine of the type, or the targeted one.
    pub fn create_instance(
        &mut self,
        tenant: &str,
        req: &Map<String, Value>,
    ) -> Result<Value, Refusal> {
        let name = str_field(req, "name").unwrap_or_default();
        if str_field(req, "tenantId") != Some(tenant) {
            return Err(Refusal::invalid(
                "tenantId is not the org's tenant",
                json!({"tenantId": "unknown tenant"}),
            ));
        }
        let vpc_id = str_field(req, "vpcId").unwrap_or_default();
        let site = self
            .record(Kind::Vpc, vpc_id)
            .filter(|r| r.deleted.is_none())
            .and_then(|r| str_field(&r.body, "siteId").map(str::to_string))
            .ok_or_else(|| {
                Refusal::invalid(
                    format!("VPC {vpc_id} does not exist"),
                    json!({"vpcId": "unknown VPC"}),
                )
            })?;
        if let Some(id) = self.duplicate(Kind::Instance, name, "tenantId", tenant) {
            return Err(Refusal::conflict(Kind::Instance, name, &id));
        }
        let interfaces = req
            .get("interfaces")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        if interfaces.is_empty() {
            return Err(Refusal::invalid(
                "at least one interface is required",
                json!({"interfaces": "A value is required"}),
            ));
        }
        for (i, iface) in interfaces.iter().enumerate() {
            let subnet = iface
                .get("subnetId")
                .and_then(Value::as_str)
                .unwrap_or_default();
            let ok = self.record(Kind::Subnet, subnet).is_some_and(|r| {
                r.deleted.is_none() && str_field(&r.body, "vpcId") == Some(vpc_id)
            });
            if !ok {
                return Err(Refusal::invalid(
                    format!("interfaces[{i}].subnetId {subnet:?} is not a subnet of VPC {vpc_id}"),
                    json!({format!("interfaces[{i}].subnetId"): "unknown subnet"}),
                ));
            }
        }
        let type_id = self.instance_type["id"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        let wanted_type = str_field(req, "instanceTypeId");
        let wanted_machine = str_field(req, "machineId");
        let machine_index = match (wanted_type, wanted_machine) {
            (_, Some(m)) => self
                .machines
                .iter()
                .position(|x| str_field(x, "id") == Some(m))
                .ok_or_else(|| {
                    Refusal::invalid(
                        format!("machine {m} does not exist"),
                        json!({"machineId": "unknown machine"}),
                    )
                })
                .and_then(|i| {
                    if self.machines[i]
                        .get("instanceId")
                        .is_some_and(|v| !v.is_null())
                    {
                        Err(Refusal::invalid(
                            format!("machine {m} is in use"),
                            json!({"machineId": "machine in use"}),
                        ))
                    } else {
                        Ok(i)
                    }
                })?,
            (Some(t), None) if t == type_id => self
                .machines
                .iter()
                .position(|x| x.get("instanceId").is_none_or(Value::is_null))
                .ok_or_else(|| {
                    Refusal::invalid(
                        format!("no machine of instance type {t} is available"),
                        json!({"instanceTypeId": "no capacity"}),
                    )
                })?,
            (Some(t), None) => {
                return Err(Refusal::invalid(
                    format!("instance type {t} does not exist"),
                    json!({"instanceTypeId": "unknown instance type"}),
                ));
            }
            (None, None) => {
                return Err(Refusal::invalid(
                    "instanceTypeId or machineId is required",
                    json!({"instanceTypeId": "A value is required"}),
                ));
            }
        };
        let id = uuid::Uuid::new_v4().to_string();
        let machine_id = str_field(&self.machines[machine_index], "id")
            .unwrap_or_default()
            .to_string();
        self.machines[machine_index].insert("instanceId".into(), json!(id));
        self.machines[machine_index].insert("tenantId".into(), json!(tenant));
        self.machines[machine_index].insert("status".into(), json!("InUse"));
        let now = now_text();
        let ifaces: Vec<Value> = interfaces
            .iter()
            .map(|i| {
                json!({
                    "id": uuid::Uuid::new_v4().to_string(), "instanceId": id,
                    "subnetId": i.get("subnetId").cloned().unwrap_or(Value::Null),
                    "isPhysical": i.get("isPhysical").and_then(Value::as_bool).unwrap_or(false),
                    "virtualFunctionId": i.get("virtualFunctionId").cloned().unwrap_or(Value::Null),
                    "ipAddresses": [], "status": "Pending", "created": now, "updated": now,
                })
            })
            .collect();
        let mut body = Map::new();
        body.insert("id".into(), json!(id));
        body.insert("name".into(), json!(name));
        body.insert("tenantId".into(), json!(tenant));
        body.insert(
            "infrastructureProviderId".into(),
            self.site["infrastructureProviderId"].clone(),
        );
        body.insert("siteId".into(), json!(site));
        body.insert("instanceTypeId".into(), json!(type_id));
        body.insert("vpcId".into(), json!(vpc_id));
        body.insert("machineId".into(), json!(machine_id));
        body.insert(
            "userData".into(),
            req.get("userData").cloned().unwrap_or(Value::Null),
        );
        body.insert(
            "phoneHomeEnabled".into(),
            req.get("phoneHomeEnabled").cloned().unwrap_or(json!(false)),
        );
        body.insert(
            "labels".into(),
            req.get("labels").cloned().unwrap_or_else(|| json!({})),
        );
        body.insert(
            "sshKeyGroupIds".into(),
            req.get("sshKeyGroupIds")
                .cloned()
                .unwrap_or_else(|| json!([])),
        );
        body.insert("interfaces".into(), Value::Array(ifaces));
        Ok(self.insert(Kind::Instance, body))
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

    /// The machines, as the API returns them.
    pub fn machines(&self) -> Vec<Value> {
        self.machines.iter().cloned().map(Value::Object).collect()
    }

    /// Live objects per kind (for tests and the leak check).
    pub fn count(&self, kind: Kind) -> usize {
        self.records.get(&kind).map_or(0, Vec::len)
    }
}
