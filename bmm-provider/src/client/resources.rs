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

fn decode<T: DeserializeOwned>(op: &str, text: &str) -> Result<T, ApiError> {
    serde_json::from_str(text).map_err(|e| ApiError::Decode {
        op: op.to_string(),
        message: e.to_string(),
    })
}

impl BmmClient {
    /// One HTTP exchange: (status, X-Pagination, body).
    async fn exchange(
        &self,
        op: &str,
        method: Method,
        path: &str,
        query: &[(&str, String)],
        body: Option<&serde_json::Value>,
    ) -> Result<(u16, Option<String>, String), ApiError> {
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
        let response = request.send().await.map_err(|source| {
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
        let paging = response
            .headers()
            .get("X-Pagination")
            .and_then(|v| v.to_str().ok())
            .map(str::to_string);
        let text = response
            .text()
            .await
            .map_err(|source| ApiError::Transport {
                op: op.to_string(),
                source,
            })?;
        debug!(op, status, "BMM API answered");
        Ok((status, paging, text))
    }

    /// An exchange retried while it fails transiently; `ok` lists the success codes.
    async fn call(
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
            let result = match self.exchange(op, method.clone(), path, query, body).await {
                Ok((status, paging, text)) if ok.contains(&status) => return Ok((paging, text)),
                Ok((status, _, text)) => ApiError::from_answer(op, status, &text),
                Err(e) => e,
            };
            if result.is_transient() && attempt + 1 < self.retry.max_attempts {
                let delay = self.retry.jittered(attempt);
                warn!(op, attempt, ?delay, error = %result, "transient failure, retrying");
                tokio::time::sleep(delay).await;
                attempt += 1;
                continue;
            }
            return Err(result);
        }
    }

    async fn get<T: DeserializeOwned>(&self, op: &str, path: &str) -> Result<Option<T>, ApiError> {
        match self.call(op, Method::GET, path, &[], None, &[200]).await {
            Ok((_, text)) => decode(op, &text).map(Some),
            Err(e) if e.is_not_found() => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Every page of a list.
    async fn list_all<T: DeserializeOwned>(
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
            let error = match self
                .exchange(op, Method::POST, path, &[], Some(&body))
                .await
            {
                Ok((201 | 200, _, text)) => return decode(op, &text),
                Ok((status, _, text)) => ApiError::from_answer(op, status, &text),
                Err(e) => e,
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
                let delay = self.retry.jittered(attempt);
                warn!(op, attempt, ?delay, %error, "create failed transiently, retrying");
                tokio::time::sleep(delay).await;
                attempt += 1;
                continue;
            }
            return Err(error);
        }
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
        self.get("GET site/{id}", &format!("site/{id}")).await
    }

    /// The site with this exact name.
    pub async fn site_named(&self, name: &str) -> Result<Option<Site>, ApiError> {
        let sites: Vec<Site> = self
            .list_all("GET site", "site", &[("query", name.to_string())])
            .await?;
        Ok(sites.into_iter().find(|s| s.name == name))
    }

    // ---- IP blocks -------------------------------------------------------------------------

    /// IP blocks in a site with this exact name.
    pub async fn ip_blocks_named(
        &self,
        site_id: &str,
        name: &str,
    ) -> Result<Vec<IpBlock>, ApiError> {
        let all: Vec<IpBlock> = self
            .list_all(
                "GET ipblock",
                "ipblock",
                &[("siteId", site_id.to_string()), ("query", name.to_string())],
            )
            .await?;
        Ok(all.into_iter().filter(|b| b.name == name).collect())
    }

    /// `GET ipblock/{id}`; `None` on 404.
    pub async fn ip_block(&self, id: &str) -> Result<Option<IpBlock>, ApiError> {
        self.get("GET ipblock/{id}", &format!("ipblock/{id}")).await
    }

    /// Creates an IP block, adopting one of the same name.
    pub async fn create_ip_block(
        &self,
        request: &IpBlockCreateRequest,
    ) -> Result<IpBlock, ApiError> {
        self.create_or_adopt("POST ipblock", "ipblock", request, |id| async move {
            match id {
                Some(id) => self.ip_block(&id).await,
                None => Ok(self
                    .ip_blocks_named(&request.site_id, &request.name)
                    .await?
                    .into_iter()
                    .next()),
            }
        })
        .await
    }

    /// `DELETE ipblock/{id}` (202; 404 counts as done).
    pub async fn delete_ip_block(&self, id: &str) -> Result<(), ApiError> {
        self.delete(
            "DELETE ipblock/{id}",
            &format!("ipblock/{id}"),
            &[202, 200, 204],
        )
        .await
    }

    // ---- VPCs ------------------------------------------------------------------------------

    /// VPCs in a site with this exact name.
    pub async fn vpcs_named(&self, site_id: &str, name: &str) -> Result<Vec<Vpc>, ApiError> {
        let all: Vec<Vpc> = self
            .list_all(
                "GET vpc",
                "vpc",
                &[("siteId", site_id.to_string()), ("query", name.to_string())],
            )
            .await?;
        Ok(all.into_iter().filter(|v| v.name == name).collect())
    }

    /// `GET vpc/{id}`; `None` on 404.
    pub async fn vpc(&self, id: &str) -> Result<Option<Vpc>, ApiError> {
        self.get("GET vpc/{id}", &format!("vpc/{id}")).await
    }

    /// Creates a VPC (client-chosen id), adopting one of the same name.
    pub async fn create_vpc(&self, request: &VpcCreateRequest) -> Result<Vpc, ApiError> {
        self.create_or_adopt("POST vpc", "vpc", request, |id| async move {
            if let Some(id) = id.or_else(|| request.id.clone())
                && let Some(vpc) = self.vpc(&id).await?
            {
                return Ok(Some(vpc));
            }
            Ok(self
                .vpcs_named(&request.site_id, &request.name)
                .await?
                .into_iter()
                .next())
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
        self.delete("DELETE vpc/{id}", &format!("vpc/{id}"), &[202, 200, 204])
            .await
    }

    // ---- subnets ---------------------------------------------------------------------------

    /// Every subnet of a VPC.
    pub async fn subnets_of(&self, vpc_id: &str) -> Result<Vec<Subnet>, ApiError> {
        self.list_all("GET subnet", "subnet", &[("vpcId", vpc_id.to_string())])
            .await
    }

    /// `GET subnet/{id}`; `None` on 404.
    pub async fn subnet(&self, id: &str) -> Result<Option<Subnet>, ApiError> {
        self.get("GET subnet/{id}", &format!("subnet/{id}")).await
    }

    /// Creates a subnet, adopting one of the same name in the VPC.
    pub async fn create_subnet(&self, request: &SubnetCreateRequest) -> Result<Subnet, ApiError> {
        self.create_or_adopt("POST subnet", "subnet", request, |id| async move {
            match id {
                Some(id) => self.subnet(&id).await,
                None => Ok(self
                    .subnets_of(&request.vpc_id)
                    .await?
                    .into_iter()
                    .find(|s| s.name == request.name)),
            }
        })
        .await
    }

    /// `DELETE subnet/{id}` (204).
    pub async fn delete_subnet(&self, id: &str) -> Result<(), ApiError> {
        self.delete(
            "DELETE subnet/{id}",
            &format!("subnet/{id}"),
            &[204, 200, 202],
        )
        .await
    }

    // ---- network security groups -------------------------------------------------------------

    /// NSGs in a site with this exact name.
    pub async fn nsgs_named(&self, site_id: &str, name: &str) -> Result<Vec<Nsg>, ApiError> {
        let all: Vec<Nsg> = self
            .list_all(
                "GET network-security-group",
                "network-security-group",
                &[("siteId", site_id.to_string()), ("query", name.to_string())],
            )
            .await?;
        Ok(all.into_iter().filter(|n| n.name == name).collect())
    }

    /// `GET network-security-group/{id}`; `None` on 404.
    pub async fn nsg(&self, id: &str) -> Result<Option<Nsg>, ApiError> {
        self.get(
            "GET network-security-group/{id}",
            &format!("network-security-group/{id}"),
        )
        .await
    }

    /// Creates an NSG, adopting one of the same name.
    pub async fn create_nsg(&self, request: &NsgCreateRequest) -> Result<Nsg, ApiError> {
        self.create_or_adopt(
            "POST network-security-group",
            "network-security-group",
            request,
            |id| async move {
                match id {
                    Some(id) => self.nsg(&id).await,
                    None => Ok(self
                        .nsgs_named(&request.site_id, &request.name)
                        .await?
                        .into_iter()
                        .next()),
                }
            },
        )
        .await
    }

    /// `DELETE network-security-group/{id}` (202).
    pub async fn delete_nsg(&self, id: &str) -> Result<(), ApiError> {
        self.delete(
            "DELETE network-security-group/{id}",
            &format!("network-security-group/{id}"),
            &[202, 200, 204],
        )
        .await
    }

    // ---- instances -------------------------------------------------------------------------

    /// Instances in a site with this exact name (the API filters by `name`).
    pub async fn instances_named(
        &self,
        site_id: &str,
        name: &str,
    ) -> Result<Vec<Instance>, ApiError> {
        let all: Vec<Instance> = self
            .list_all(
                "GET instance",
                "instance",
                &[("siteId", site_id.to_string()), ("name", name.to_string())],
            )
            .await?;
        Ok(all.into_iter().filter(|i| i.name == name).collect())
    }

    /// Every instance in a VPC.
    pub async fn instances_in_vpc(&self, vpc_id: &str) -> Result<Vec<Instance>, ApiError> {
        self.list_all("GET instance", "instance", &[("vpcId", vpc_id.to_string())])
            .await
    }

    /// `GET instance/{id}`; `None` on 404.
    pub async fn instance(&self, id: &str) -> Result<Option<Instance>, ApiError> {
        self.get("GET instance/{id}", &format!("instance/{id}"))
            .await
    }

    /// Creates an instance, adopting one of the same name in the VPC.
    pub async fn create_instance(
        &self,
        request: &InstanceCreateRequest,
    ) -> Result<Instance, ApiError> {
        self.create_or_adopt("POST instance", "instance", request, |id| async move {
            match id {
                Some(id) => self.instance(&id).await,
                None => {
                    let all: Vec<Instance> = self
                        .list_all(
                            "GET instance",
                            "instance",
                            &[
                                ("vpcId", request.vpc_id.clone()),
                                ("name", request.name.clone()),
                            ],
                        )
                        .await?;
                    Ok(all.into_iter().find(|i| i.name == request.name))
                }
            }
        })
        .await
    }

    /// `DELETE instance/{id}` (202).
    pub async fn delete_instance(&self, id: &str) -> Result<(), ApiError> {
        self.delete(
            "DELETE instance/{id}",
            &format!("instance/{id}"),
            &[202, 200, 204],
        )
        .await
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
