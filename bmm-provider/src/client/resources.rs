//! The operations of [`BmmClient`], one block per resource.

use std::future::Future;

use http::Method;
use http::header::{AUTHORIZATION, HeaderValue};
use serde::Serialize;
use serde::de::DeserializeOwned;
use tracing::{debug, warn};

use super::types::*;
use super::{ApiError, BmmClient};

/// The largest page the API serves.
const PAGE_SIZE: u32 = 100;

/// The filters of a by-name lookup in a site: the site, and `query` to narrow the list.
fn in_site(site_id: &str, name: &str) -> [(&'static str, String); 2] {
    [("siteId", site_id.to_string()), ("query", name.to_string())]
}

pub(super) fn decode<T: DeserializeOwned>(op: &str, text: &str) -> Result<T, ApiError> {
    serde_json::from_str(text).map_err(|e| ApiError::Decode {
        op: op.to_string(),
        message: e.to_string(),
    })
}

/// What one HTTP exchange brought back.
struct Answer {
    status: u16,
    /// The `X-Pagination` header.
    paging: Option<String>,
    text: String,
    /// The wait the server asked for (`Retry-After`, with a 429 or 503).
    retry_after: Option<std::time::Duration>,
}

impl BmmClient {
    fn count(&self, op: &str, result: &str) {
        if let Some(m) = &self.metrics {
            m.api_call(op, result);
        }
    }

    /// One HTTP exchange.
    async fn exchange(
        &self,
        op: &str,
        method: Method,
        path: &str,
        query: &[(&str, String)],
        body: Option<&serde_json::Value>,
    ) -> Result<Answer, ApiError> {
        let url = format!("{}/{}", self.base, path);
        let mut bearer = HeaderValue::from_str(&format!("Bearer {}", self.token.expose()))
            .map_err(|_| {
                ApiError::Config("the token contains characters not allowed in a header".into())
            })?;
        bearer.set_sensitive(true);
        let mut request = self
            .http
            .request(method, &url)
            .header(AUTHORIZATION, bearer)
            .query(query);
        if let Some(body) = body {
            request = request.json(body);
        }
        let in_flight = self
            .metrics
            .as_ref()
            .map(|m| crate::metrics::InFlight::enter(&m.api_calls_in_flight));
        let response = request.send().await;
        drop(in_flight);
        let response = response.map_err(|source| {
            self.count(
                op,
                if source.is_timeout() {
                    "timeout"
                } else {
                    "transport"
                },
            );
            if source.is_timeout() {
                ApiError::Transient {
                    op: op.to_string(),
                    status: 0,
                    message: "request timed out".into(),
                }
            } else {
                ApiError::Transport {
                    op: op.to_string(),
                    source,
                }
            }
        })?;
        let status = response.status().as_u16();
        self.count(op, &status.to_string());
        let header = |name: &str| {
            response
                .headers()
                .get(name)
                .and_then(|v| v.to_str().ok())
                .map(str::to_string)
        };
        let paging = header("X-Pagination");
        let retry_after = header("Retry-After")
            .and_then(|v| super::retry::retry_after(&v, jiff::Timestamp::now()));
        let text = response
            .text()
            .await
            .map_err(|source| ApiError::Transport {
                op: op.to_string(),
                source,
            })?;
        debug!(op, status, "BMM API answered");
        Ok(Answer {
            status,
            paging,
            text,
            retry_after,
        })
    }

    /// An exchange retried while it fails transiently; `ok` lists the success codes.
    pub(super) async fn call(
        &self,
        op: &str,
        method: Method,
        path: &str,
        query: &[(&str, String)],
        body: Option<&serde_json::Value>,
        ok: &[u16],
    ) -> Result<(Option<String>, String), ApiError> {
        let mut attempt = 0;
        loop {
            let (result, retry_after) =
                match self.exchange(op, method.clone(), path, query, body).await {
                    Ok(a) if ok.contains(&a.status) => return Ok((a.paging, a.text)),
                    Ok(a) => (ApiError::from_answer(op, a.status, &a.text), a.retry_after),
                    Err(e) => (e, None),
                };
            if result.is_transient() && attempt + 1 < self.retry.max_attempts {
                let delay = self.retry.honouring(attempt, fastrand::f64(), retry_after);
                warn!(op, attempt, ?delay, error = %result, "transient failure, retrying");
                tokio::time::sleep(delay).await;
                attempt += 1;
                continue;
            }
            return Err(result);
        }
    }

    pub(super) async fn get<T: DeserializeOwned>(
        &self,
        op: &str,
        path: &str,
    ) -> Result<Option<T>, ApiError> {
        match self.call(op, Method::GET, path, &[], None, &[200]).await {
            Ok((_, text)) => decode(op, &text).map(Some),
            Err(e) if e.is_not_found() => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Every page of a list.
    pub(super) async fn list_all<T: DeserializeOwned>(
        &self,
        op: &str,
        path: &str,
        filters: &[(&str, String)],
    ) -> Result<Vec<T>, ApiError> {
        let mut all = Vec::new();
        let mut page = 1u32;
        loop {
            let mut query: Vec<(&str, String)> = filters.to_vec();
            query.push(("pageNumber", page.to_string()));
            query.push(("pageSize", PAGE_SIZE.to_string()));
            let (paging, text) = self
                .call(op, Method::GET, path, &query, None, &[200])
                .await?;
            let items: Vec<T> = decode(op, &text)?;
            let got = items.len();
            all.extend(items);
            let total = paging
                .as_deref()
                .and_then(|p| serde_json::from_str::<Pagination>(p).ok())
                .map(|p| p.total);
            match total {
                Some(total) if (all.len() as u64) < total && got > 0 => page += 1,
                None if got as u32 == PAGE_SIZE => page += 1,
                _ => return Ok(all),
            }
        }
    }

    async fn delete(&self, op: &str, path: &str, accepted: &[u16]) -> Result<(), ApiError> {
        match self
            .call(op, Method::DELETE, path, &[], None, accepted)
            .await
        {
            Ok(_) => Ok(()),
            Err(e) if e.is_not_found() => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// POSTs a create; after any failure, looks the object up (by the 409's `data.id` or by
    /// exact name) and adopts it before retrying, so nothing is created twice.
    async fn create_or_adopt<B, T, F, Fut>(
        &self,
        op: &str,
        path: &str,
        body: &B,
        find: F,
    ) -> Result<T, ApiError>
    where
        B: Serialize,
        T: DeserializeOwned,
        F: Fn(Option<String>) -> Fut,
        Fut: Future<Output = Result<Option<T>, ApiError>>,
    {
        let body = serde_json::to_value(body).map_err(|e| ApiError::Decode {
            op: op.to_string(),
            message: e.to_string(),
        })?;
        let mut attempt = 0;
        loop {
            let (error, retry_after) = match self
                .exchange(op, Method::POST, path, &[], Some(&body))
                .await
            {
                Ok(a) if matches!(a.status, 201 | 200) => return decode(op, &a.text),
                Ok(a) => (ApiError::from_answer(op, a.status, &a.text), a.retry_after),
                Err(e) => (e, None),
            };
            let lookup = match &error {
                ApiError::Conflict { existing_id, .. } => Some(existing_id.clone()),
                e if e.is_transient() => Some(None),
                ApiError::Unexpected { status, .. } if *status >= 500 => Some(None),
                _ => None,
            };
            if let Some(existing_id) = lookup
                && let Some(found) = find(existing_id).await?
            {
                debug!(op, "create failed ({error}); adopted the existing object");
                return Ok(found);
            }
            if error.is_transient() && attempt + 1 < self.retry.max_attempts {
                let delay = self.retry.honouring(attempt, fastrand::f64(), retry_after);
                warn!(op, attempt, ?delay, %error, "create failed transiently, retrying");
                tokio::time::sleep(delay).await;
                attempt += 1;
                continue;
            }
            return Err(error);
        }
    }

    // ---- any object ------------------------------------------------------------------------

    /// `GET {PATH}/{id}`; `None` on 404.
    pub async fn fetch<T: ApiObject>(&self, id: &str) -> Result<Option<T>, ApiError> {
        self.get(
            &format!("GET {}/{{id}}", T::PATH),
            &format!("{}/{id}", T::PATH),
        )
        .await
    }

    /// Every object of the list that `filters` select whose name is exactly `name` (the API
    /// matches `query` loosely, so the client compares the names itself).
    pub async fn named<T: ApiObject>(
        &self,
        filters: &[(&str, String)],
        name: &str,
    ) -> Result<Vec<T>, ApiError> {
        let all: Vec<T> = self
            .list_all(&format!("GET {}", T::PATH), T::PATH, filters)
            .await?;
        Ok(all.into_iter().filter(|o| o.name() == name).collect())
    }

    /// `DELETE {PATH}/{id}`, `accepted` its success codes; 404 counts as done.
    async fn remove<T: ApiObject>(&self, id: &str, accepted: &[u16]) -> Result<(), ApiError> {
        self.delete(
            &format!("DELETE {}/{{id}}", T::PATH),
            &format!("{}/{id}", T::PATH),
            accepted,
        )
        .await
    }

    /// `POST {PATH}`, adopting on failure the object a 409 names or, without one, the first
    /// object `lookup` finds.
    async fn create_adopting<T, B, F, Fut>(&self, request: &B, lookup: F) -> Result<T, ApiError>
    where
        T: ApiObject,
        B: Serialize,
        F: Fn() -> Fut,
        Fut: Future<Output = Result<Vec<T>, ApiError>>,
    {
        let lookup = &lookup;
        self.create_or_adopt(
            &format!("POST {}", T::PATH),
            T::PATH,
            request,
            |id| async move {
                if let Some(id) = id
                    && let Some(found) = self.fetch::<T>(&id).await?
                {
                    return Ok(Some(found));
                }
                Ok(lookup().await?.into_iter().next())
            },
        )
        .await
    }

    // ---- tenant and site -------------------------------------------------------------------

    /// `GET tenant/current`.
    pub async fn current_tenant(&self) -> Result<Tenant, ApiError> {
        self.get("GET tenant/current", "tenant/current")
            .await?
            .ok_or_else(|| ApiError::NotFound {
                op: "GET tenant/current".into(),
            })
    }

    /// `GET site/{id}`; `None` on 404.
    pub async fn site(&self, id: &str) -> Result<Option<Site>, ApiError> {
        self.fetch(id).await
    }

    /// The site with this exact name.
    pub async fn site_named(&self, name: &str) -> Result<Option<Site>, ApiError> {
        Ok(self
            .named(&[("query", name.to_string())], name)
            .await?
            .into_iter()
            .next())
    }

    // ---- IP blocks -------------------------------------------------------------------------

    /// IP blocks in a site with this exact name.
    pub async fn ip_blocks_named(
        &self,
        site_id: &str,
        name: &str,
    ) -> Result<Vec<IpBlock>, ApiError> {
        self.named(&in_site(site_id, name), name).await
    }

    /// `GET ipblock/{id}`; `None` on 404.
    pub async fn ip_block(&self, id: &str) -> Result<Option<IpBlock>, ApiError> {
        self.fetch(id).await
    }

    /// Creates an IP block, adopting one of the same name.
    pub async fn create_ip_block(
        &self,
        request: &IpBlockCreateRequest,
    ) -> Result<IpBlock, ApiError> {
        self.create_adopting(request, || {
            self.ip_blocks_named(&request.site_id, &request.name)
        })
        .await
    }

    /// `DELETE ipblock/{id}` (202; 404 counts as done).
    pub async fn delete_ip_block(&self, id: &str) -> Result<(), ApiError> {
        self.remove::<IpBlock>(id, &[202, 200, 204]).await
    }

    // ---- VPCs ------------------------------------------------------------------------------

    /// VPCs in a site with this exact name.
    pub async fn vpcs_named(&self, site_id: &str, name: &str) -> Result<Vec<Vpc>, ApiError> {
        self.named(&in_site(site_id, name), name).await
    }

    /// `GET vpc/{id}`; `None` on 404.
    pub async fn vpc(&self, id: &str) -> Result<Option<Vpc>, ApiError> {
        self.fetch(id).await
    }

    /// Creates a VPC (client-chosen id), adopting one of the same name (or of its id).
    pub async fn create_vpc(&self, request: &VpcCreateRequest) -> Result<Vpc, ApiError> {
        self.create_adopting(request, || async {
            if let Some(id) = &request.id
                && let Some(vpc) = self.vpc(id).await?
            {
                return Ok(vec![vpc]);
            }
            self.vpcs_named(&request.site_id, &request.name).await
        })
        .await
    }

    /// Attaches (`Some`) or detaches (`None`) a network security group.
    pub async fn set_vpc_nsg(&self, vpc_id: &str, nsg_id: Option<&str>) -> Result<Vpc, ApiError> {
        let body = serde_json::to_value(VpcUpdateRequest {
            network_security_group_id: nsg_id.map(str::to_string),
        })
        .map_err(|e| ApiError::Decode {
            op: "PATCH vpc/{id}".into(),
            message: e.to_string(),
        })?;
        let (_, text) = self
            .call(
                "PATCH vpc/{id}",
                Method::PATCH,
                &format!("vpc/{vpc_id}"),
                &[],
                Some(&body),
                &[200],
            )
            .await?;
        decode("PATCH vpc/{id}", &text)
    }

    /// `DELETE vpc/{id}` (202).
    pub async fn delete_vpc(&self, id: &str) -> Result<(), ApiError> {
        self.remove::<Vpc>(id, &[202, 200, 204]).await
    }

    // ---- subnets ---------------------------------------------------------------------------

    /// Every subnet of a VPC.
    pub async fn subnets_of(&self, vpc_id: &str) -> Result<Vec<Subnet>, ApiError> {
        self.list_all("GET subnet", "subnet", &[("vpcId", vpc_id.to_string())])
            .await
    }

    /// `GET subnet/{id}`; `None` on 404.
    pub async fn subnet(&self, id: &str) -> Result<Option<Subnet>, ApiError> {
        self.fetch(id).await
    }

    /// Creates a subnet, adopting one of the same name in the VPC.
    pub async fn create_subnet(&self, request: &SubnetCreateRequest) -> Result<Subnet, ApiError> {
        self.create_adopting(request, || async {
            self.named(&[("vpcId", request.vpc_id.clone())], &request.name)
                .await
        })
        .await
    }

    /// `DELETE subnet/{id}` (204).
    pub async fn delete_subnet(&self, id: &str) -> Result<(), ApiError> {
        self.remove::<Subnet>(id, &[204, 200, 202]).await
    }

    // ---- network security groups -------------------------------------------------------------

    /// NSGs in a site with this exact name.
    pub async fn nsgs_named(&self, site_id: &str, name: &str) -> Result<Vec<Nsg>, ApiError> {
        self.named(&in_site(site_id, name), name).await
    }

    /// `GET network-security-group/{id}`; `None` on 404.
    pub async fn nsg(&self, id: &str) -> Result<Option<Nsg>, ApiError> {
        self.fetch(id).await
    }

    /// Creates an NSG, adopting one of the same name.
    pub async fn create_nsg(&self, request: &NsgCreateRequest) -> Result<Nsg, ApiError> {
        self.create_adopting(request, || self.nsgs_named(&request.site_id, &request.name))
            .await
    }

    /// `DELETE network-security-group/{id}` (202).
    pub async fn delete_nsg(&self, id: &str) -> Result<(), ApiError> {
        self.remove::<Nsg>(id, &[202, 200, 204]).await
    }

    // ---- instances -------------------------------------------------------------------------

    /// Instances in a site with this exact name (the API filters by `name`).
    pub async fn instances_named(
        &self,
        site_id: &str,
        name: &str,
    ) -> Result<Vec<Instance>, ApiError> {
        self.named(
            &[("siteId", site_id.to_string()), ("name", name.to_string())],
            name,
        )
        .await
    }

    /// Every instance of a tenant.
    pub async fn instances_of_tenant(&self, tenant_id: &str) -> Result<Vec<Instance>, ApiError> {
        self.list_all(
            "GET instance",
            "instance",
            &[("tenantId", tenant_id.to_string())],
        )
        .await
    }

    /// Every instance in a VPC.
    pub async fn instances_in_vpc(&self, vpc_id: &str) -> Result<Vec<Instance>, ApiError> {
        self.list_all("GET instance", "instance", &[("vpcId", vpc_id.to_string())])
            .await
    }

    /// `GET instance/{id}`; `None` on 404.
    pub async fn instance(&self, id: &str) -> Result<Option<Instance>, ApiError> {
        self.fetch(id).await
    }

    /// Creates an instance, adopting one of the same name in the VPC.
    pub async fn create_instance(
        &self,
        request: &InstanceCreateRequest,
    ) -> Result<Instance, ApiError> {
        self.create_adopting(request, || async {
            let filters = [
                ("vpcId", request.vpc_id.clone()),
                ("name", request.name.clone()),
            ];
            self.named(&filters, &request.name).await
        })
        .await
    }

    /// `DELETE instance/{id}` (202).
    pub async fn delete_instance(&self, id: &str) -> Result<(), ApiError> {
        self.remove::<Instance>(id, &[202, 200, 204]).await
    }

    /// `GET instance/{id}/status-history`.
    pub async fn instance_status_history(&self, id: &str) -> Result<Vec<StatusDetail>, ApiError> {
        self.list_all(
            "GET instance/{id}/status-history",
            &format!("instance/{id}/status-history"),
            &[],
        )
        .await
    }

    /// `GET instance/{id}/interface`.
    pub async fn instance_interfaces(&self, id: &str) -> Result<Vec<Interface>, ApiError> {
        self.list_all(
            "GET instance/{id}/interface",
            &format!("instance/{id}/interface"),
            &[],
        )
        .await
    }

    // ---- instance types and machines ---------------------------------------------------------

    /// Instance types at a site.
    pub async fn instance_types(&self, site_id: &str) -> Result<Vec<InstanceType>, ApiError> {
        self.list_all(
            "GET instance/type",
            "instance/type",
            &[("siteId", site_id.to_string())],
        )
        .await
    }

    /// Machines at a site, optionally of one instance type.
    pub async fn machines(
        &self,
        site_id: &str,
        instance_type_id: Option<&str>,
    ) -> Result<Vec<Machine>, ApiError> {
        let mut query = vec![("siteId", site_id.to_string())];
        if let Some(t) = instance_type_id {
            query.push(("instanceTypeId", t.to_string()));
        }
        self.list_all("GET machine", "machine", &query).await
    }
}
