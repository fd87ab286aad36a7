//! Network objects of the simulated platform: IP blocks, VPCs, subnets and network security
//! groups, with the checks the real API makes when they are created or changed.

use std::net::Ipv4Addr;

use nephrite_bmm::Ipv4Cidr;
use serde_json::{Map, Value, json};

use super::{Kind, Refusal, World, now_text, str_field};

impl World {
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
        let vpc = self.referenced(Kind::Vpc, "vpcId", vpc_id, "VPC")?;
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
        let block = self.referenced(Kind::IpBlock, "ipv4BlockId", block_id, "IP block")?;
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
}
