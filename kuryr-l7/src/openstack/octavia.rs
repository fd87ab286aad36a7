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
use serde_json::Value;

use super::error::ApiError;
use super::session::{Answer, Endpoint, Session, absent_is_none, with_query};

/// How a mutation waits for the load balancer.
///
/// The status is read at once, then after [`FIRST_POLL`] (or `poll`, if shorter), the wait
/// doubling each time up to `poll`: most changes settle within a second, so the first reads
/// come quickly and a long settle is not read more often than every `poll`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Settle {
    /// The longest time between two status reads.
    pub poll: Duration,
    /// How long a load balancer may stay `PENDING_*` before [`ApiError::NotSettled`].
    pub timeout: Duration,
}

/// The first wait between two status reads of a settling load balancer.
pub const FIRST_POLL: Duration = Duration::from_millis(25);

impl Settle {
    /// The waits between the status reads of one settle: [`FIRST_POLL`] (at most `poll`),
    /// doubling up to `poll`.
    pub fn waits(&self) -> impl Iterator<Item = Duration> + use<> {
        let cap = self.poll;
        std::iter::successors(Some(FIRST_POLL.min(cap)), move |wait| {
            Some((*wait * 2).min(cap))
        })
    }
}

impl Default for Settle {
    fn default() -> Self {
        Settle {
            poll: Duration::from_millis(100),
            timeout: Duration::from_secs(300),
        }
    }
}

mod resources;

pub use resources::*;

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
    /// is added. Rules go inline in their policy (`rules`): Octavia 19 takes them here, though
    /// it answers 500 to rules inline in a `POST /v2/lbaas/l7policies`.
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
        let mut waits = self.settle.waits();
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
            tokio::time::sleep(waits.next().unwrap_or(self.settle.poll)).await;
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
                tokio::time::sleep(FIRST_POLL.min(self.settle.poll)).await;
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
mod tests;
