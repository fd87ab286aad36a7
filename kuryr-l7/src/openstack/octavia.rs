//! The Octavia v2 client: load balancers, listeners, pools, members, L7 policies and rules.
//!
//! Octavia applies a change asynchronously: the load balancer goes `PENDING_UPDATE` (or
//! `PENDING_CREATE`, `PENDING_DELETE`) and back to `ACTIVE`, and while it is pending *every*
//! other change answers 409 "… is immutable and cannot be updated". So every mutation here is
//! one call on a settled load balancer: a 409 "immutable" is waited out (poll until the load
//! balancer settles, send again), then the client waits until the load balancer is `ACTIVE`
//! again before returning; a load balancer or object left in `ERROR` is
//! [`ApiError::ProvisioningFailed`]. [`Octavia::execute`] is that discipline for any call, so an
//! executor of a plan can send requests it built itself.

use std::sync::Arc;
use std::time::{Duration, Instant};

use reqwest::Method;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::error::ApiError;
use super::session::{Answer, Endpoint, Session, absent_is_none, with_query};

/// How a mutation waits for the load balancer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Settle {
    /// Time between two status reads.
    pub poll: Duration,
    /// How long a load balancer may stay `PENDING_*` before [`ApiError::NotSettled`].
    pub timeout: Duration,
}

impl Default for Settle {
    fn default() -> Self {
        Settle {
            poll: Duration::from_millis(100),
            timeout: Duration::from_secs(300),
        }
    }
}

/// A provisioning status.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum ProvisioningStatus {
    /// Settled.
    Active,
    /// Being created.
    PendingCreate,
    /// Being changed.
    PendingUpdate,
    /// Being deleted.
    PendingDelete,
    /// Deleted (Octavia mostly answers 404 instead).
    Deleted,
    /// The provider failed.
    Error,
}

impl ProvisioningStatus {
    /// Whether a change is in flight.
    pub fn is_pending(&self) -> bool {
        matches!(
            self,
            ProvisioningStatus::PendingCreate
                | ProvisioningStatus::PendingUpdate
                | ProvisioningStatus::PendingDelete
        )
    }
}

/// `{"id": …}` as Octavia lists related objects.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct IdRef {
    /// The related object's id.
    pub id: String,
}

/// A load balancer.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct LoadBalancer {
    /// Its id.
    pub id: String,
    /// Its name.
    #[serde(default)]
    pub name: String,
    /// Its description.
    #[serde(default)]
    pub description: String,
    /// Provisioning status.
    pub provisioning_status: ProvisioningStatus,
    /// The VIP address.
    #[serde(default)]
    pub vip_address: Option<String>,
    /// The VIP's Neutron port.
    #[serde(default)]
    pub vip_port_id: Option<String>,
    /// The VIP's subnet.
    #[serde(default)]
    pub vip_subnet_id: Option<String>,
    /// Its project.
    #[serde(default)]
    pub project_id: String,
    /// Its tags.
    #[serde(default)]
    pub tags: Vec<String>,
    /// Its listeners.
    #[serde(default)]
    pub listeners: Vec<IdRef>,
    /// Its pools.
    #[serde(default)]
    pub pools: Vec<IdRef>,
}

/// A new load balancer. With Octavia's noop network driver (and to keep the VIP port under
/// the controller's name), create the VIP port in Neutron first and pass `vip_port_id`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct NewLoadBalancer {
    /// Its name.
    pub name: String,
    /// Its description.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub description: String,
    /// An existing Neutron port for the VIP.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub vip_port_id: Option<String>,
    /// The VIP's subnet (Octavia allocates a port on it when no port is given).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub vip_subnet_id: Option<String>,
    /// The VIP address.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub vip_address: Option<String>,
    /// The provider (`amphora`, `ovn`); Octavia's default when unset.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub provider: Option<String>,
    /// Tags.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub tags: Vec<String>,
}

/// A listener.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct Listener {
    /// Its id.
    pub id: String,
    /// Its name.
    #[serde(default)]
    pub name: String,
    /// `HTTP`, `HTTPS`, `TERMINATED_HTTPS`, `TCP`, …
    pub protocol: String,
    /// The port it listens on.
    pub protocol_port: u16,
    /// The pool requests go to when no L7 policy matches.
    #[serde(default)]
    pub default_pool_id: Option<String>,
    /// Its L7 policies.
    #[serde(default)]
    pub l7policies: Vec<IdRef>,
    /// Provisioning status.
    pub provisioning_status: ProvisioningStatus,
    /// Tags.
    #[serde(default)]
    pub tags: Vec<String>,
}

/// A new listener.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct NewListener {
    /// Its name.
    pub name: String,
    /// The load balancer.
    pub loadbalancer_id: String,
    /// `HTTP`, …
    pub protocol: String,
    /// The port.
    pub protocol_port: u16,
    /// The default pool.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub default_pool_id: Option<String>,
    /// Tags.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub tags: Vec<String>,
}

/// A pool.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct Pool {
    /// Its id.
    pub id: String,
    /// Its name.
    #[serde(default)]
    pub name: String,
    /// `HTTP`, `PROXY`, `TCP`, …
    pub protocol: String,
    /// `ROUND_ROBIN`, `LEAST_CONNECTIONS`, `SOURCE_IP`, …
    pub lb_algorithm: String,
    /// Its members.
    #[serde(default)]
    pub members: Vec<IdRef>,
    /// The listeners using it as default pool.
    #[serde(default)]
    pub listeners: Vec<IdRef>,
    /// Provisioning status.
    pub provisioning_status: ProvisioningStatus,
    /// Tags.
    #[serde(default)]
    pub tags: Vec<String>,
}

/// A new pool on a load balancer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct NewPool {
    /// Its name.
    pub name: String,
    /// The load balancer.
    pub loadbalancer_id: String,
    /// `HTTP`, …
    pub protocol: String,
    /// `ROUND_ROBIN`, …
    pub lb_algorithm: String,
    /// Tags.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub tags: Vec<String>,
}

/// A pool member.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct Member {
    /// Its id.
    pub id: String,
    /// Its name.
    #[serde(default)]
    pub name: String,
    /// The backend address.
    pub address: String,
    /// The backend port.
    pub protocol_port: u16,
    /// Its weight.
    #[serde(default)]
    pub weight: u32,
    /// The subnet the address is on.
    #[serde(default)]
    pub subnet_id: Option<String>,
    /// Provisioning status.
    pub provisioning_status: ProvisioningStatus,
    /// Tags.
    #[serde(default)]
    pub tags: Vec<String>,
}

/// A new pool member.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct NewMember {
    /// Its name.
    pub name: String,
    /// The backend address.
    pub address: String,
    /// The backend port.
    pub protocol_port: u16,
    /// Its weight (Octavia's default 1 when unset).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub weight: Option<u32>,
    /// The subnet the address is on.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub subnet_id: Option<String>,
    /// Tags.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub tags: Vec<String>,
}

/// An L7 policy.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct L7Policy {
    /// Its id.
    pub id: String,
    /// Its name.
    #[serde(default)]
    pub name: String,
    /// Its listener.
    pub listener_id: String,
    /// `REJECT`, `REDIRECT_TO_URL`, `REDIRECT_PREFIX`, `REDIRECT_TO_POOL`.
    pub action: String,
    /// Its position, 1..n.
    pub position: u32,
    /// The pool of `REDIRECT_TO_POOL`.
    #[serde(default)]
    pub redirect_pool_id: Option<String>,
    /// The URL of `REDIRECT_TO_URL`.
    #[serde(default)]
    pub redirect_url: Option<String>,
    /// The prefix of `REDIRECT_PREFIX`.
    #[serde(default)]
    pub redirect_prefix: Option<String>,
    /// The redirect's status code.
    #[serde(default)]
    pub redirect_http_code: Option<u16>,
    /// Its rules.
    #[serde(default)]
    pub rules: Vec<IdRef>,
    /// Provisioning status.
    pub provisioning_status: ProvisioningStatus,
    /// Tags.
    #[serde(default)]
    pub tags: Vec<String>,
}

/// A new L7 policy (rules are created one call each: Octavia 19 answers 500 to inline rules).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct NewL7Policy {
    /// Its name.
    pub name: String,
    /// Its listener.
    pub listener_id: String,
    /// The action.
    pub action: String,
    /// Where to insert it (appended when unset or past the end).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub position: Option<u32>,
    /// The pool of `REDIRECT_TO_POOL`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub redirect_pool_id: Option<String>,
    /// The URL of `REDIRECT_TO_URL`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub redirect_url: Option<String>,
    /// The prefix of `REDIRECT_PREFIX`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub redirect_prefix: Option<String>,
    /// The redirect's status code.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub redirect_http_code: Option<u16>,
    /// Tags.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub tags: Vec<String>,
}

/// An L7 rule.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct L7Rule {
    /// Its id.
    pub id: String,
    /// `HOST_NAME`, `PATH`, `HEADER`, `COOKIE`, `FILE_TYPE`, …
    #[serde(rename = "type")]
    pub rule_type: String,
    /// `EQUAL_TO`, `STARTS_WITH`, `ENDS_WITH`, `CONTAINS`, `REGEX`.
    pub compare_type: String,
    /// The header or cookie name.
    #[serde(default)]
    pub key: Option<String>,
    /// The value compared.
    pub value: String,
    /// Whether the match is inverted.
    #[serde(default)]
    pub invert: bool,
    /// Provisioning status.
    pub provisioning_status: ProvisioningStatus,
    /// Tags.
    #[serde(default)]
    pub tags: Vec<String>,
}

/// A new L7 rule.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct NewL7Rule {
    /// The rule type.
    #[serde(rename = "type")]
    pub rule_type: String,
    /// The comparison.
    pub compare_type: String,
    /// The header or cookie name.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
    /// The value compared.
    pub value: String,
    /// Whether the match is inverted.
    pub invert: bool,
    /// Tags.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub tags: Vec<String>,
}

/// The Octavia v2 API (`/v2/lbaas/…`) through a [`Session`].
#[derive(Debug, Clone)]
pub struct Octavia {
    session: Arc<Session>,
    endpoint: Endpoint,
    settle: Settle,
}

impl Octavia {
    /// A client of the Octavia at `endpoint`, waiting for load balancers as `settle` says.
    pub fn new(session: Arc<Session>, endpoint: Endpoint, settle: Settle) -> Octavia {
        Octavia {
            session,
            endpoint,
            settle,
        }
    }

    /// The URL of `path` under `/v2/lbaas/`.
    async fn url(&self, path: &str) -> Result<String, ApiError> {
        Ok(format!(
            "{}/v2/lbaas/{}",
            self.session.url_of(&self.endpoint).await?,
            path.trim_start_matches('/')
        ))
    }

    async fn get<T: DeserializeOwned>(&self, path: &str, key: &str) -> Result<T, ApiError> {
        let url = self.url(path).await?;
        let answer = self.session.send(Method::GET, url, None).await?.success()?;
        answer.field(key)
    }

    /// A list, filtered by query pairs (`name`, `loadbalancer_id`, `tags`, …).
    async fn list<T: DeserializeOwned>(
        &self,
        collection: &str,
        filters: &[(&str, &str)],
    ) -> Result<Vec<T>, ApiError> {
        self.get(&with_query(collection, filters), collection).await
    }

    /// A load balancer; None when it does not exist.
    pub async fn load_balancer(&self, id: &str) -> Result<Option<LoadBalancer>, ApiError> {
        absent_is_none(
            self.get(&format!("loadbalancers/{id}"), "loadbalancer")
                .await,
        )
    }

    /// Load balancers matching `filters` (e.g. `[("name", "kuryr-l7-router")]`).
    pub async fn load_balancers(
        &self,
        filters: &[(&str, &str)],
    ) -> Result<Vec<LoadBalancer>, ApiError> {
        self.list("loadbalancers", filters).await
    }

    /// Create a load balancer in the session's project and wait until it is `ACTIVE`.
    pub async fn create_load_balancer(
        &self,
        new: &NewLoadBalancer,
    ) -> Result<LoadBalancer, ApiError> {
        self.create_load_balancer_tree(serde_json::to_value(new).unwrap_or_default())
            .await
    }

    /// Create a load balancer with everything on it in one call (Octavia's single-call
    /// create: `tree` is a load balancer body with `listeners`, each with a `default_pool`
    /// and `l7policies`, pools named, members inline) and wait until it is `ACTIVE`: a first
    /// sync in one call instead of one call and one settle per object. The session's project
    /// is added. Octavia 19 answers 500 to rules inline in a policy: add rules afterwards.
    pub async fn create_load_balancer_tree(&self, tree: Value) -> Result<LoadBalancer, ApiError> {
        let mut body = tree;
        body["project_id"] = Value::String(self.session.project_id().await?);
        let url = self.url("loadbalancers").await?;
        let answer = self
            .session
            .send(
                Method::POST,
                url.clone(),
                Some(&serde_json::json!({ "loadbalancer": body })),
            )
            .await?
            .success()?;
        let created: LoadBalancer = answer.field("loadbalancer")?;
        self.wait_active(&created.id, &Method::POST, &url).await
    }

    /// Delete a load balancer (with everything on it when `cascade`) and wait until it is gone.
    pub async fn delete_load_balancer(&self, id: &str, cascade: bool) -> Result<(), ApiError> {
        let path = format!(
            "loadbalancers/{id}{}",
            if cascade { "?cascade=true" } else { "" }
        );
        self.execute(id, Method::DELETE, &path, None).await?;
        Ok(())
    }

    /// Wait until load balancer `id` is `ACTIVE` (after `method` on `url`, for errors): a
    /// `PENDING_*` status is polled, `ERROR` is [`ApiError::ProvisioningFailed`], and a load
    /// balancer still pending after the settle timeout is [`ApiError::NotSettled`].
    pub async fn wait_active(
        &self,
        id: &str,
        method: &Method,
        url: &str,
    ) -> Result<LoadBalancer, ApiError> {
        match self.settled(id).await? {
            Some(lb) if lb.provisioning_status == ProvisioningStatus::Active => Ok(lb),
            Some(_) => Err(ApiError::ProvisioningFailed {
                kind: "load balancer",
                id: id.to_owned(),
                method: method.clone(),
                url: url.to_owned(),
            }),
            None => Err(ApiError::Status {
                method: method.clone(),
                url: url.to_owned(),
                status: 404,
                message: format!("load balancer {id} disappeared"),
            }),
        }
    }

    /// Poll load balancer `id` until it is not `PENDING_*`; None once it is gone (404).
    async fn settled(&self, id: &str) -> Result<Option<LoadBalancer>, ApiError> {
        let began = Instant::now();
        loop {
            let Some(lb) = self.load_balancer(id).await? else {
                return Ok(None);
            };
            if !lb.provisioning_status.is_pending() {
                return Ok(Some(lb));
            }
            if began.elapsed() >= self.settle.timeout {
                return Err(ApiError::NotSettled {
                    id: id.to_owned(),
                    status: format!("{:?}", lb.provisioning_status),
                    waited: began.elapsed(),
                    url: self.url(&format!("loadbalancers/{id}")).await?,
                });
            }
            tokio::time::sleep(self.settle.poll).await;
        }
    }

    /// One change to load balancer `lb_id` (or something on it): `method` on `path` (under
    /// `/v2/lbaas/`) with `body`. A 409 "immutable" (the load balancer is busy with another
    /// change) is waited out and the call sent again; after a success the client waits until
    /// the load balancer is `ACTIVE` (or gone, after deleting it). Returns the answer's body
    /// (`Null` for 204).
    pub async fn execute(
        &self,
        lb_id: &str,
        method: Method,
        path: &str,
        body: Option<&Value>,
    ) -> Result<Value, ApiError> {
        let url = self.url(path).await?;
        let began = Instant::now();
        let answer = loop {
            let answer = self.session.send(method.clone(), url.clone(), body).await?;
            if answer.status == 409 && is_immutable(&answer) {
                if began.elapsed() >= self.settle.timeout {
                    return Err(answer.into_error());
                }
                self.settled(lb_id).await?;
                // Octavia may still say "immutable" a moment after the status turned ACTIVE.
                tokio::time::sleep(self.settle.poll).await;
                continue;
            }
            break answer.success()?;
        };
        let deleting_lb =
            method == Method::DELETE && path.trim_start_matches('/').starts_with("loadbalancers/");
        if deleting_lb {
            if self.settled(lb_id).await?.is_some() {
                return Err(ApiError::ProvisioningFailed {
                    kind: "load balancer",
                    id: lb_id.to_owned(),
                    method,
                    url,
                });
            }
        } else {
            self.wait_active(lb_id, &method, &url).await?;
        }
        if answer.body.trim().is_empty() {
            return Ok(Value::Null);
        }
        answer.json()
    }

    /// A create or update of a child object of load balancer `lb_id`, then a read of it: `ERROR`
    /// on the object is [`ApiError::ProvisioningFailed`].
    async fn change<T: DeserializeOwned + HasStatus>(
        &self,
        lb_id: &str,
        method: Method,
        path: &str,
        key: &'static str,
        body: Value,
    ) -> Result<T, ApiError> {
        let answer = self
            .execute(
                lb_id,
                method.clone(),
                path,
                Some(&serde_json::json!({ key: body })),
            )
            .await?;
        let id = answer
            .pointer(&format!("/{key}/id"))
            .and_then(Value::as_str)
            .map(str::to_owned)
            .ok_or_else(|| ApiError::Decode {
                method: method.clone(),
                url: path.to_owned(),
                detail: format!("no {key}.id in {answer}"),
            })?;
        let collection = collection_path(path, &method, &id);
        let object: T = self.get(&collection, key).await?;
        if object.status() == &ProvisioningStatus::Error {
            return Err(ApiError::ProvisioningFailed {
                kind: kind_name(key),
                id,
                method,
                url: self.url(path).await?,
            });
        }
        Ok(object)
    }

    /// Create a listener on `new.loadbalancer_id`.
    pub async fn create_listener(&self, new: &NewListener) -> Result<Listener, ApiError> {
        let body = serde_json::to_value(new).unwrap_or_default();
        self.change(
            &new.loadbalancer_id,
            Method::POST,
            "listeners",
            "listener",
            body,
        )
        .await
    }

    /// Listeners matching `filters` (e.g. `[("loadbalancer_id", id)]`).
    pub async fn listeners(&self, filters: &[(&str, &str)]) -> Result<Vec<Listener>, ApiError> {
        self.list("listeners", filters).await
    }

    /// Change listener `id` of load balancer `lb_id` (e.g. `{"default_pool_id": …}`).
    pub async fn update_listener(
        &self,
        lb_id: &str,
        id: &str,
        changes: Value,
    ) -> Result<Listener, ApiError> {
        self.change(
            lb_id,
            Method::PUT,
            &format!("listeners/{id}"),
            "listener",
            changes,
        )
        .await
    }

    /// Delete listener `id` of load balancer `lb_id`.
    pub async fn delete_listener(&self, lb_id: &str, id: &str) -> Result<(), ApiError> {
        self.execute(lb_id, Method::DELETE, &format!("listeners/{id}"), None)
            .await
            .map(drop)
    }

    /// Create a pool on `new.loadbalancer_id`.
    pub async fn create_pool(&self, new: &NewPool) -> Result<Pool, ApiError> {
        let body = serde_json::to_value(new).unwrap_or_default();
        self.change(&new.loadbalancer_id, Method::POST, "pools", "pool", body)
            .await
    }

    /// Pools matching `filters`.
    pub async fn pools(&self, filters: &[(&str, &str)]) -> Result<Vec<Pool>, ApiError> {
        self.list("pools", filters).await
    }

    /// Delete pool `id` of load balancer `lb_id`.
    pub async fn delete_pool(&self, lb_id: &str, id: &str) -> Result<(), ApiError> {
        self.execute(lb_id, Method::DELETE, &format!("pools/{id}"), None)
            .await
            .map(drop)
    }

    /// Add a member to pool `pool_id` of load balancer `lb_id`.
    pub async fn create_member(
        &self,
        lb_id: &str,
        pool_id: &str,
        new: &NewMember,
    ) -> Result<Member, ApiError> {
        let body = serde_json::to_value(new).unwrap_or_default();
        self.change(
            lb_id,
            Method::POST,
            &format!("pools/{pool_id}/members"),
            "member",
            body,
        )
        .await
    }

    /// The members of pool `pool_id`.
    pub async fn members(&self, pool_id: &str) -> Result<Vec<Member>, ApiError> {
        let path = format!("pools/{pool_id}/members");
        self.get(&path, "members").await
    }

    /// Change member `id` of pool `pool_id` (e.g. `{"weight": 5}`).
    pub async fn update_member(
        &self,
        lb_id: &str,
        pool_id: &str,
        id: &str,
        changes: Value,
    ) -> Result<Member, ApiError> {
        let path = format!("pools/{pool_id}/members/{id}");
        self.change(lb_id, Method::PUT, &path, "member", changes)
            .await
    }

    /// Remove member `id` from pool `pool_id`.
    pub async fn delete_member(
        &self,
        lb_id: &str,
        pool_id: &str,
        id: &str,
    ) -> Result<(), ApiError> {
        let path = format!("pools/{pool_id}/members/{id}");
        self.execute(lb_id, Method::DELETE, &path, None)
            .await
            .map(drop)
    }

    /// Create an L7 policy on listener `new.listener_id` of load balancer `lb_id`.
    pub async fn create_l7policy(
        &self,
        lb_id: &str,
        new: &NewL7Policy,
    ) -> Result<L7Policy, ApiError> {
        let body = serde_json::to_value(new).unwrap_or_default();
        self.change(lb_id, Method::POST, "l7policies", "l7policy", body)
            .await
    }

    /// L7 policies matching `filters` (e.g. `[("listener_id", id)]`).
    pub async fn l7policies(&self, filters: &[(&str, &str)]) -> Result<Vec<L7Policy>, ApiError> {
        self.list("l7policies", filters).await
    }

    /// Change L7 policy `id` (e.g. `{"position": 1}`).
    pub async fn update_l7policy(
        &self,
        lb_id: &str,
        id: &str,
        changes: Value,
    ) -> Result<L7Policy, ApiError> {
        self.change(
            lb_id,
            Method::PUT,
            &format!("l7policies/{id}"),
            "l7policy",
            changes,
        )
        .await
    }

    /// Delete L7 policy `id` (and its rules).
    pub async fn delete_l7policy(&self, lb_id: &str, id: &str) -> Result<(), ApiError> {
        self.execute(lb_id, Method::DELETE, &format!("l7policies/{id}"), None)
            .await
            .map(drop)
    }

    /// Add a rule to L7 policy `policy_id`.
    pub async fn create_l7rule(
        &self,
        lb_id: &str,
        policy_id: &str,
        new: &NewL7Rule,
    ) -> Result<L7Rule, ApiError> {
        let body = serde_json::to_value(new).unwrap_or_default();
        let path = format!("l7policies/{policy_id}/rules");
        self.change(lb_id, Method::POST, &path, "rule", body).await
    }

    /// The rules of L7 policy `policy_id`.
    pub async fn l7rules(&self, policy_id: &str) -> Result<Vec<L7Rule>, ApiError> {
        self.get(&format!("l7policies/{policy_id}/rules"), "rules")
            .await
    }

    /// Change rule `id` of L7 policy `policy_id` (e.g. `{"value": "/api"}`).
    pub async fn update_l7rule(
        &self,
        lb_id: &str,
        policy_id: &str,
        id: &str,
        changes: Value,
    ) -> Result<L7Rule, ApiError> {
        let path = format!("l7policies/{policy_id}/rules/{id}");
        self.change(lb_id, Method::PUT, &path, "rule", changes)
            .await
    }

    /// Delete rule `id` of L7 policy `policy_id`.
    pub async fn delete_l7rule(
        &self,
        lb_id: &str,
        policy_id: &str,
        id: &str,
    ) -> Result<(), ApiError> {
        let path = format!("l7policies/{policy_id}/rules/{id}");
        self.execute(lb_id, Method::DELETE, &path, None)
            .await
            .map(drop)
    }
}

/// Objects with a provisioning status.
trait HasStatus {
    fn status(&self) -> &ProvisioningStatus;
}

macro_rules! has_status {
    ($($t:ty),*) => {$(
        impl HasStatus for $t {
            fn status(&self) -> &ProvisioningStatus {
                &self.provisioning_status
            }
        }
    )*};
}
has_status!(LoadBalancer, Listener, Pool, Member, L7Policy, L7Rule);

/// The path to read back the object a change at `path` made: the collection plus the new id
/// for a POST, the same path for a PUT.
fn collection_path(path: &str, method: &Method, id: &str) -> String {
    if *method == Method::POST {
        format!("{}/{id}", path.trim_end_matches('/'))
    } else {
        path.to_owned()
    }
}

/// The name errors give the object under `key`.
fn kind_name(key: &str) -> &'static str {
    match key {
        "listener" => "listener",
        "pool" => "pool",
        "member" => "member",
        "l7policy" => "L7 policy",
        "rule" => "L7 rule",
        _ => "load balancer",
    }
}

/// Whether a 409 is Octavia's "immutable" refusal (the load balancer is `PENDING_*`), as
/// opposed to a real conflict (a duplicate member, a pool in use).
fn is_immutable(answer: &Answer) -> bool {
    answer.body.contains("immutable")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_octavias_immutable_refusal_is_waited_out() {
        let answer = |body: &str| Answer {
            method: Method::POST,
            url: "u".to_owned(),
            status: 409,
            body: body.to_owned(),
        };
        assert!(is_immutable(&answer(
            r#"{"faultcode": "Client", "faultstring": "Load Balancer 1 is immutable and cannot be updated.", "debuginfo": null}"#
        )));
        assert!(!is_immutable(&answer(
            r#"{"faultcode": "Client", "faultstring": "Duplicate member 10.0.0.1:80 in pool p", "debuginfo": null}"#
        )));
    }

    #[test]
    fn new_objects_serialise_as_octavia_expects() {
        let rule = NewL7Rule {
            rule_type: "PATH".to_owned(),
            compare_type: "STARTS_WITH".to_owned(),
            value: "/api".to_owned(),
            ..NewL7Rule::default()
        };
        assert_eq!(
            serde_json::to_value(&rule).unwrap(),
            serde_json::json!({"type": "PATH", "compare_type": "STARTS_WITH", "value": "/api",
                               "invert": false})
        );
        let policy = NewL7Policy {
            name: "p".to_owned(),
            listener_id: "l".to_owned(),
            action: "REDIRECT_TO_POOL".to_owned(),
            redirect_pool_id: Some("pool".to_owned()),
            tags: vec!["kuryr-l7".to_owned()],
            ..NewL7Policy::default()
        };
        assert_eq!(
            serde_json::to_value(&policy).unwrap(),
            serde_json::json!({"name": "p", "listener_id": "l", "action": "REDIRECT_TO_POOL",
                               "redirect_pool_id": "pool", "tags": ["kuryr-l7"]})
        );
    }

    #[test]
    fn statuses_parse_and_pending_ones_are_known() {
        let status: ProvisioningStatus = serde_json::from_str("\"PENDING_UPDATE\"").unwrap();
        assert!(status.is_pending());
        let active: ProvisioningStatus = serde_json::from_str("\"ACTIVE\"").unwrap();
        assert!(!active.is_pending());
        let error: ProvisioningStatus = serde_json::from_str("\"ERROR\"").unwrap();
        assert!(!error.is_pending());
    }

    #[test]
    fn created_objects_are_read_back_at_their_own_path() {
        assert_eq!(
            collection_path("pools/p/members", &Method::POST, "m"),
            "pools/p/members/m"
        );
        assert_eq!(
            collection_path("l7policies/x", &Method::PUT, "x"),
            "l7policies/x"
        );
        assert_eq!(kind_name("l7policy"), "L7 policy");
    }
}
