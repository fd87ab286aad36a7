//! Instances of the simulated platform: machine allocation on creation and interface
//! addresses once an instance is Ready.

use std::collections::BTreeMap;

use nephrite_bmm::Ipv4Cidr;
use serde_json::{Map, Value, json};

use super::{Kind, Refusal, World, now_text, str_field};

impl World {
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
        let vpc = self.referenced(Kind::Vpc, "vpcId", vpc_id, "VPC")?;
        let site = str_field(&vpc.body, "siteId")
            .unwrap_or_default()
            .to_string();
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
                    "macAddress": super::power::mac_address(fastrand::u32(..)),
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

    /// Out of band (for tests): the instance goes to `Error` and stays there until deleted.
    /// Returns whether it exists.
    pub fn fail_instance(&mut self, id: &str) -> bool {
        let Some(r) = self.record_mut(Kind::Instance, id) else {
            return false;
        };
        r.failed = true;
        r.body.insert("status".into(), json!("Error"));
        r.body.insert("updated".into(), json!(now_text()));
        if let Some(Value::Array(h)) = r.body.get_mut("statusHistory") {
            h.insert(0, super::history("Error", "Instance failed"));
        }
        true
    }

    /// Out of band (for tests): the instance is gone at once (it answers 404) and its machine
    /// returns to the pool. Returns whether it existed.
    pub fn remove_instance(&mut self, id: &str) -> bool {
        let Some(records) = self.records.get_mut(&Kind::Instance) else {
            return false;
        };
        let before = records.len();
        records.retain(|r| str_field(&r.body, "id") != Some(id));
        let removed = records.len() != before;
        for m in self
            .machines
            .iter_mut()
            .filter(|m| str_field(m, "instanceId") == Some(id))
        {
            m.insert("instanceId".into(), Value::Null);
            m.insert("status".into(), json!("Ready"));
            super::power::clear_machine_addresses(m);
        }
        removed
    }

    pub(super) fn fill_instance_addresses(&mut self) {
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
        let mut assigned: Vec<(String, String)> = Vec::new();
        for r in self.records.get_mut(&Kind::Instance).into_iter().flatten() {
            if str_field(&r.body, "status") != Some("Ready") {
                continue;
            }
            let machine = str_field(&r.body, "machineId").map(str::to_string);
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
                        if let Some(machine) = &machine {
                            assigned.push((machine.clone(), address.to_string()));
                        }
                    }
                }
            }
        }
        for (machine, address) in assigned {
            self.record_machine_address(&machine, &address);
        }
    }
}
