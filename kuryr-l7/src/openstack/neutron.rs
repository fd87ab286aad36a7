//! The Neutron v2.0 client: networks, subnets, ports, floating IPs and routers.
//!
//! Two of Neutron 29's habits shape it. Tags in a create body are dropped (ports) or refused
//! (networks, floating IPs), so objects are created with what identifies them at creation
//! (name, `device_id`, `device_owner`, description) and tagged afterwards with
//! [`Neutron::set_tags`]; a crash between the two leaves an object still found by those fields.
//! And a floating IP for a port whose subnet has no router to the external network is refused
//! with `ExternalGatewayForFloatingIPNotFound`, which [`Neutron::create_floating_ip`] reports as
//! [`ApiError::ExternalGatewayNotFound`] naming the subnet, for a controller condition rather
//! than a crash loop. Every create body carries the session's `project_id` (with `noauth`
//! Neutron needs it there; a header alone is refused).

use std::sync::Arc;

use reqwest::Method;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::error::{
    ApiError, ExternalGatewayNotFound, neutron_error_type, server_message, unreachable_subnet,
};
use super::session::{Answer, Endpoint, Session, absent_is_none, with_query};

/// A network.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct Network {
    /// Its id.
    pub id: String,
    /// Its name.
    #[serde(default)]
    pub name: String,
    /// Whether floating IPs come from it (`router:external`).
    #[serde(rename = "router:external", default)]
    pub external: bool,
    /// Its subnets' ids.
    #[serde(default)]
    pub subnets: Vec<String>,
    /// Its project.
    #[serde(default)]
    pub project_id: String,
    /// Tags.
    #[serde(default)]
    pub tags: Vec<String>,
}

/// A subnet.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct Subnet {
    /// Its id.
    pub id: String,
    /// Its name.
    #[serde(default)]
    pub name: String,
    /// Its network.
    pub network_id: String,
    /// Its CIDR.
    pub cidr: String,
    /// 4 or 6.
    pub ip_version: u8,
    /// The gateway address.
    #[serde(default)]
    pub gateway_ip: Option<String>,
    /// Its project.
    #[serde(default)]
    pub project_id: String,
}

/// A fixed IP of a port.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FixedIp {
    /// The subnet.
    pub subnet_id: String,
    /// The address (Neutron picks one when unset).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ip_address: Option<String>,
}

/// A port.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct Port {
    /// Its id.
    pub id: String,
    /// Its name.
    #[serde(default)]
    pub name: String,
    /// Its network.
    pub network_id: String,
    /// What uses it (e.g. the load balancer's name or id).
    #[serde(default)]
    pub device_id: String,
    /// What kind of thing uses it (e.g. `kuryr:l7-router`).
    #[serde(default)]
    pub device_owner: String,
    /// Its description.
    #[serde(default)]
    pub description: String,
    /// Its addresses.
    #[serde(default)]
    pub fixed_ips: Vec<FixedIp>,
    /// `ACTIVE`, `DOWN`, …
    #[serde(default)]
    pub status: String,
    /// Its project.
    #[serde(default)]
    pub project_id: String,
    /// Tags.
    #[serde(default)]
    pub tags: Vec<String>,
}

/// A new port: name, `device_id`, `device_owner` and description are what finds it again.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct NewPort {
    /// Its name.
    pub name: String,
    /// Its network.
    pub network_id: String,
    /// Its addresses (a subnet and optionally an address each).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub fixed_ips: Vec<FixedIp>,
    /// What uses it.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub device_id: String,
    /// What kind of thing uses it.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub device_owner: String,
    /// Its description.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub description: String,
}

/// A floating IP.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct FloatingIp {
    /// Its id.
    pub id: String,
    /// The external address.
    pub floating_ip_address: String,
    /// The external network it comes from.
    pub floating_network_id: String,
    /// The port it is bound to.
    #[serde(default)]
    pub port_id: Option<String>,
    /// The port's address it maps to.
    #[serde(default)]
    pub fixed_ip_address: Option<String>,
    /// The router doing the translation.
    #[serde(default)]
    pub router_id: Option<String>,
    /// Its description.
    #[serde(default)]
    pub description: String,
    /// `ACTIVE`, `DOWN`.
    #[serde(default)]
    pub status: String,
    /// Its project.
    #[serde(default)]
    pub project_id: String,
    /// Tags.
    #[serde(default)]
    pub tags: Vec<String>,
}

/// A router.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct Router {
    /// Its id.
    pub id: String,
    /// Its name.
    #[serde(default)]
    pub name: String,
    /// Its gateway (`{"network_id": …}`), when it has one.
    #[serde(default)]
    pub external_gateway_info: Option<Value>,
    /// `ACTIVE`, …
    #[serde(default)]
    pub status: String,
    /// Its project.
    #[serde(default)]
    pub project_id: String,
}

/// The kinds of objects [`Neutron::set_tags`] can tag (the URL's collection).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Taggable {
    /// `networks`.
    Network,
    /// `subnets`.
    Subnet,
    /// `ports`.
    Port,
    /// `floatingips`.
    FloatingIp,
    /// `routers`.
    Router,
}

impl Taggable {
    fn collection(self) -> &'static str {
        match self {
            Taggable::Network => "networks",
            Taggable::Subnet => "subnets",
            Taggable::Port => "ports",
            Taggable::FloatingIp => "floatingips",
            Taggable::Router => "routers",
        }
    }
}

/// The Neutron v2.0 API (`/v2.0/…`) through a [`Session`].
#[derive(Debug, Clone)]
pub struct Neutron {
    session: Arc<Session>,
    endpoint: Endpoint,
}

impl Neutron {
    /// A client of the Neutron at `endpoint`.
    pub fn new(session: Arc<Session>, endpoint: Endpoint) -> Neutron {
        Neutron { session, endpoint }
    }

    async fn url(&self, path: &str) -> Result<String, ApiError> {
        Ok(format!(
            "{}/v2.0/{}",
            self.session.url_of(&self.endpoint).await?,
            path.trim_start_matches('/')
        ))
    }

    async fn call(
        &self,
        method: Method,
        path: &str,
        body: Option<&Value>,
    ) -> Result<Answer, ApiError> {
        let url = self.url(path).await?;
        self.session.send(method, url, body).await
    }

    async fn get<T: DeserializeOwned>(&self, path: &str, key: &str) -> Result<T, ApiError> {
        let answer = self.call(Method::GET, path, None).await?.success()?;
        answer.field(key)
    }

    async fn list<T: DeserializeOwned>(
        &self,
        collection: &str,
        filters: &[(&str, &str)],
    ) -> Result<Vec<T>, ApiError> {
        self.get(&with_query(collection, filters), collection).await
    }

    /// POST `body` (plus the session's `project_id`) as `{key: body}` to `collection`.
    async fn create<T: DeserializeOwned>(
        &self,
        collection: &str,
        key: &str,
        mut body: Value,
    ) -> Result<T, ApiError> {
        body["project_id"] = Value::String(self.session.project_id().await?);
        let answer = self
            .call(Method::POST, collection, Some(&json!({ key: body })))
            .await?
            .success()?;
        answer.field(key)
    }

    /// Delete `collection/id`; a 404 (already gone) is fine.
    async fn delete(&self, collection: &str, id: &str) -> Result<(), ApiError> {
        let answer = self
            .call(Method::DELETE, &format!("{collection}/{id}"), None)
            .await?;
        if answer.status == 404 {
            return Ok(());
        }
        answer.success().map(drop)
    }

    /// Create a network; `external` makes it a flat `router:external` network on physical
    /// network `physnet` (floating IPs come from such networks).
    pub async fn create_network(
        &self,
        name: &str,
        external: Option<&str>,
    ) -> Result<Network, ApiError> {
        let mut body = json!({"name": name});
        if let Some(physnet) = external {
            body["router:external"] = Value::Bool(true);
            body["provider:network_type"] = json!("flat");
            body["provider:physical_network"] = json!(physnet);
        }
        self.create("networks", "network", body).await
    }

    /// A network; None when it does not exist.
    pub async fn network(&self, id: &str) -> Result<Option<Network>, ApiError> {
        absent_is_none(self.get(&format!("networks/{id}"), "network").await)
    }

    /// Networks matching `filters`.
    pub async fn networks(&self, filters: &[(&str, &str)]) -> Result<Vec<Network>, ApiError> {
        self.list("networks", filters).await
    }

    /// Delete a network.
    pub async fn delete_network(&self, id: &str) -> Result<(), ApiError> {
        self.delete("networks", id).await
    }

    /// Create an IPv4 or IPv6 subnet `cidr` on `network_id`.
    pub async fn create_subnet(
        &self,
        name: &str,
        network_id: &str,
        cidr: &str,
    ) -> Result<Subnet, ApiError> {
        let ip_version = if cidr.contains(':') { 6 } else { 4 };
        let body =
            json!({"name": name, "network_id": network_id, "cidr": cidr, "ip_version": ip_version});
        self.create("subnets", "subnet", body).await
    }

    /// A subnet; None when it does not exist.
    pub async fn subnet(&self, id: &str) -> Result<Option<Subnet>, ApiError> {
        absent_is_none(self.get(&format!("subnets/{id}"), "subnet").await)
    }

    /// Subnets matching `filters`.
    pub async fn subnets(&self, filters: &[(&str, &str)]) -> Result<Vec<Subnet>, ApiError> {
        self.list("subnets", filters).await
    }

    /// Delete a subnet.
    pub async fn delete_subnet(&self, id: &str) -> Result<(), ApiError> {
        self.delete("subnets", id).await
    }

    /// Create a port.
    pub async fn create_port(&self, new: &NewPort) -> Result<Port, ApiError> {
        let body = serde_json::to_value(new).unwrap_or_default();
        self.create("ports", "port", body).await
    }

    /// A port; None when it does not exist.
    pub async fn port(&self, id: &str) -> Result<Option<Port>, ApiError> {
        absent_is_none(self.get(&format!("ports/{id}"), "port").await)
    }

    /// Ports matching `filters` (e.g. `[("device_id", …), ("name", …)]`).
    pub async fn ports(&self, filters: &[(&str, &str)]) -> Result<Vec<Port>, ApiError> {
        self.list("ports", filters).await
    }

    /// Delete a port.
    pub async fn delete_port(&self, id: &str) -> Result<(), ApiError> {
        self.delete("ports", id).await
    }

    /// Replace the tags of an object (`PUT /v2.0/<collection>/<id>/tags`); returns them.
    pub async fn set_tags(
        &self,
        kind: Taggable,
        id: &str,
        tags: &[String],
    ) -> Result<Vec<String>, ApiError> {
        let path = format!("{}/{id}/tags", kind.collection());
        let answer = self
            .call(Method::PUT, &path, Some(&json!({ "tags": tags })))
            .await?
            .success()?;
        answer.field("tags")
    }

    /// Allocate a floating IP on external network `network_id`, bound to `port_id` when given,
    /// at `address` when given (a pre-allocated address), with `description`.
    ///
    /// A port whose subnet has no router to that network is
    /// [`ApiError::ExternalGatewayNotFound`], naming the subnet.
    pub async fn create_floating_ip(
        &self,
        network_id: &str,
        port_id: Option<&str>,
        address: Option<&str>,
        description: &str,
    ) -> Result<FloatingIp, ApiError> {
        let mut body = json!({"floating_network_id": network_id, "description": description});
        if let Some(port) = port_id {
            body["port_id"] = json!(port);
        }
        if let Some(address) = address {
            body["floating_ip_address"] = json!(address);
        }
        body["project_id"] = Value::String(self.session.project_id().await?);
        let answer = self
            .call(
                Method::POST,
                "floatingips",
                Some(&json!({ "floatingip": body })),
            )
            .await?;
        let answer = gateway_refusal(answer, network_id, port_id)?;
        answer.field("floatingip")
    }

    /// A floating IP; None when it does not exist.
    pub async fn floating_ip(&self, id: &str) -> Result<Option<FloatingIp>, ApiError> {
        absent_is_none(self.get(&format!("floatingips/{id}"), "floatingip").await)
    }

    /// Floating IPs matching `filters` (e.g. `[("port_id", …)]`,
    /// `[("floating_ip_address", …)]`).
    pub async fn floating_ips(
        &self,
        filters: &[(&str, &str)],
    ) -> Result<Vec<FloatingIp>, ApiError> {
        self.list("floatingips", filters).await
    }

    /// Bind floating IP `id` to `port_id`, or unbind it (None). The same refusal as
    /// [`Neutron::create_floating_ip`] when the port cannot reach its network.
    pub async fn bind_floating_ip(
        &self,
        id: &str,
        network_id: &str,
        port_id: Option<&str>,
    ) -> Result<FloatingIp, ApiError> {
        let answer = self
            .call(
                Method::PUT,
                &format!("floatingips/{id}"),
                Some(&json!({"floatingip": {"port_id": port_id}})),
            )
            .await?;
        let answer = gateway_refusal(answer, network_id, port_id)?;
        answer.field("floatingip")
    }

    /// Release a floating IP.
    pub async fn delete_floating_ip(&self, id: &str) -> Result<(), ApiError> {
        self.delete("floatingips", id).await
    }

    /// Create a router with its gateway on external network `external_network_id`.
    pub async fn create_router(
        &self,
        name: &str,
        external_network_id: &str,
    ) -> Result<Router, ApiError> {
        let body = json!({"name": name,
                          "external_gateway_info": {"network_id": external_network_id}});
        self.create("routers", "router", body).await
    }

    /// Attach `subnet_id` to router `router_id`.
    pub async fn add_router_interface(
        &self,
        router_id: &str,
        subnet_id: &str,
    ) -> Result<(), ApiError> {
        let path = format!("routers/{router_id}/add_router_interface");
        self.call(Method::PUT, &path, Some(&json!({ "subnet_id": subnet_id })))
            .await?
            .success()
            .map(drop)
    }

    /// Detach `subnet_id` from router `router_id`.
    pub async fn remove_router_interface(
        &self,
        router_id: &str,
        subnet_id: &str,
    ) -> Result<(), ApiError> {
        let path = format!("routers/{router_id}/remove_router_interface");
        self.call(Method::PUT, &path, Some(&json!({ "subnet_id": subnet_id })))
            .await?
            .success()
            .map(drop)
    }

    /// Delete a router (its interfaces removed first).
    pub async fn delete_router(&self, id: &str) -> Result<(), ApiError> {
        self.delete("routers", id).await
    }
}

/// A successful answer, or the typed refusal for `ExternalGatewayForFloatingIPNotFound`, or
/// the plain refusal.
fn gateway_refusal(
    answer: Answer,
    network_id: &str,
    port_id: Option<&str>,
) -> Result<Answer, ApiError> {
    if answer.is_success() {
        return Ok(answer);
    }
    if neutron_error_type(&answer.body).as_deref() == Some("ExternalGatewayForFloatingIPNotFound") {
        let message = server_message(&answer.body);
        return Err(ApiError::ExternalGatewayNotFound(Box::new(
            ExternalGatewayNotFound {
                subnet_id: unreachable_subnet(&message).unwrap_or_else(|| "(unknown)".to_owned()),
                network_id: network_id.to_owned(),
                port_id: port_id.unwrap_or_default().to_owned(),
                message,
                method: answer.method,
                url: answer.url,
            },
        )));
    }
    Err(answer.into_error())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_floating_ip_refusal_names_subnet_network_and_port() {
        let answer = Answer {
            method: Method::POST,
            url: "http://n/v2.0/floatingips".to_owned(),
            status: 404,
            body: r#"{"NeutronError": {"type": "ExternalGatewayForFloatingIPNotFound", "message": "External network ext is not reachable from subnet sub-1.  Therefore, cannot associate Port p1 with a Floating IP.", "detail": ""}}"#.to_owned(),
        };
        let error = gateway_refusal(answer, "ext", Some("p1")).unwrap_err();
        let ApiError::ExternalGatewayNotFound(refusal) = &error else {
            panic!("{error:?}");
        };
        assert_eq!(
            (
                refusal.subnet_id.as_str(),
                refusal.network_id.as_str(),
                refusal.port_id.as_str()
            ),
            ("sub-1", "ext", "p1")
        );
        assert!(!error.is_retryable());
        assert!(
            error
                .to_string()
                .contains("no router joins subnet sub-1 to external network ext"),
            "{error}"
        );
        let other = Answer {
            method: Method::POST,
            url: "u".to_owned(),
            status: 400,
            body: r#"{"NeutronError": {"type": "BadRequest", "message": "bad", "detail": ""}}"#
                .to_owned(),
        };
        assert!(matches!(
            gateway_refusal(other, "ext", None),
            Err(ApiError::Status { status: 400, .. })
        ));
    }

    #[test]
    fn new_ports_carry_what_identifies_them_and_no_tags() {
        let port = NewPort {
            name: "kuryr-l7-router".to_owned(),
            network_id: "n".to_owned(),
            fixed_ips: vec![FixedIp {
                subnet_id: "s".to_owned(),
                ip_address: None,
            }],
            device_id: "lb-name".to_owned(),
            device_owner: "kuryr:l7-router".to_owned(),
            description: String::new(),
        };
        assert_eq!(
            serde_json::to_value(&port).unwrap(),
            json!({"name": "kuryr-l7-router", "network_id": "n", "fixed_ips": [{"subnet_id": "s"}],
                   "device_id": "lb-name", "device_owner": "kuryr:l7-router"})
        );
        assert_eq!(Taggable::FloatingIp.collection(), "floatingips");
    }
}
