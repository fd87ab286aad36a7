//! The gRPC face of the agent: `nimbess.cni.v1.Cni` (what the plugin
//! calls) and `nimbess.cni.v1.Agent` (what `ports`, `pipelines`,
//! `networks` and `verify` call).

use std::collections::BTreeMap;
use std::sync::Arc;

use nephrite_pipeline::{Module, pipeline_dot, pipeline_text};
use nephrite_proto::nimbess::cni::v1::{
    self as pb, agent_server::Agent as AgentApi, cni_server::Cni,
};
use serde::Serialize;
use serde_json::json;
use tonic::{Request, Response, Status};

use crate::agent::Agent;
use crate::driver::ModuleObject;
use crate::plugin::{CniFailure, SUPPORTED_VERSIONS};

/// Both services over one agent.
#[derive(Debug, Clone)]
pub struct AgentService {
    agent: Arc<Agent>,
}

impl AgentService {
    /// Serve `agent`.
    pub fn new(agent: Arc<Agent>) -> Self {
        AgentService { agent }
    }
}

fn reply(
    outcome: Result<Option<pb::CniResult>, CniFailure>,
) -> Result<Response<pb::CniReply>, Status> {
    Ok(Response::new(match outcome {
        Ok(result) => pb::CniReply {
            result,
            error: None,
        },
        Err(f) => pb::CniReply {
            result: None,
            error: Some(pb::CniError {
                code: f.code,
                msg: f.msg,
                details: f.details,
            }),
        },
    }))
}

#[tonic::async_trait]
impl Cni for AgentService {
    async fn add(
        &self,
        request: Request<pb::CniRequest>,
    ) -> Result<Response<pb::CniReply>, Status> {
        let req = request.into_inner();
        let outcome = self.agent.add(&req).await.map(Some);
        match &outcome {
            Ok(_) => {
                tracing::info!(container = %req.container_id, ifname = %req.ifname, network = %req.network, "ADD")
            }
            Err(f) => {
                tracing::warn!(container = %req.container_id, ifname = %req.ifname, code = f.code, msg = %f.msg, details = %f.details, "ADD failed")
            }
        }
        reply(outcome)
    }

    async fn del(
        &self,
        request: Request<pb::CniRequest>,
    ) -> Result<Response<pb::CniReply>, Status> {
        let req = request.into_inner();
        reply(self.agent.del(&req).await.map(|()| None))
    }

    async fn check(
        &self,
        request: Request<pb::CniRequest>,
    ) -> Result<Response<pb::CniReply>, Status> {
        reply(self.agent.check(&request.into_inner()).await.map(|()| None))
    }

    async fn status(
        &self,
        request: Request<pb::CniRequest>,
    ) -> Result<Response<pb::CniReply>, Status> {
        reply(
            self.agent
                .status(&request.into_inner())
                .await
                .map(|()| None),
        )
    }

    async fn gc(&self, request: Request<pb::CniRequest>) -> Result<Response<pb::CniReply>, Status> {
        reply(self.agent.gc(&request.into_inner()).await.map(|()| None))
    }

    async fn version(
        &self,
        _: Request<pb::VersionRequest>,
    ) -> Result<Response<pb::VersionReply>, Status> {
        Ok(Response::new(pb::VersionReply {
            supported_versions: SUPPORTED_VERSIONS.iter().map(|s| s.to_string()).collect(),
        }))
    }
}

/// A module instance with its kernel object and counters, as `pipelines -o json` shows it.
#[derive(Debug, Serialize)]
struct ModuleView<'a> {
    #[serde(flatten)]
    module: &'a Module,
    data_plane: ModuleObject,
}

fn to_json<T: Serialize>(value: &T) -> Result<String, Status> {
    serde_json::to_string_pretty(value).map_err(|e| Status::internal(format!("encode: {e}")))
}

#[tonic::async_trait]
impl AgentApi for AgentService {
    async fn list_ports(
        &self,
        _: Request<pb::ListPortsRequest>,
    ) -> Result<Response<pb::JsonReply>, Status> {
        let st = self.agent.lock().await;
        let ports: Vec<_> = st.model.ports().values().collect();
        Ok(Response::new(pb::JsonReply {
            json: to_json(&ports)?,
        }))
    }

    async fn list_networks(
        &self,
        _: Request<pb::ListNetworksRequest>,
    ) -> Result<Response<pb::JsonReply>, Status> {
        let st = self.agent.lock().await;
        let nets: Vec<_> = st
            .model
            .networks()
            .values()
            .map(|n| {
                let pool = st.ipam.pool(&n.spec.name);
                json!({
                    "spec": n.spec,
                    "gateway": n.spec.gateway(),
                    "meta_pipeline": n.meta,
                    "ports": st.model.ports().values().filter(|p| p.network == n.spec.name).count(),
                    "addresses_held": pool.map_or(0, |p| p.held.len()),
                })
            })
            .collect();
        Ok(Response::new(pb::JsonReply {
            json: to_json(&nets)?,
        }))
    }

    async fn get_pipelines(
        &self,
        request: Request<pb::GetPipelinesRequest>,
    ) -> Result<Response<pb::PipelinesReply>, Status> {
        let want = request.into_inner().port;
        let st = self.agent.lock().await;
        let rendered = st.model.rendered();
        let ports: Vec<String> = if want.is_empty() {
            rendered.pipelines.keys().cloned().collect()
        } else if rendered.pipelines.contains_key(&want) {
            vec![want]
        } else {
            return Err(Status::not_found(format!("no pipeline for port {want:?}")));
        };
        let mut objects = st.driver.objects(&st.model).await;
        let mut json_out = BTreeMap::new();
        let mut text = String::new();
        let mut dot = String::new();
        for port in &ports {
            let Some(p) = rendered.pipelines.get(port) else {
                continue;
            };
            let modules: Vec<ModuleView> = p
                .modules
                .iter()
                .filter_map(|id| rendered.modules.get(id))
                .map(|m| ModuleView {
                    module: m,
                    data_plane: objects.remove(&m.id).unwrap_or_default(),
                })
                .collect();
            json_out.insert(
                port.clone(),
                json!({"network": p.network, "modules": to_json_value(&modules)?}),
            );
            text.push_str(&pipeline_text(&rendered, port).unwrap_or_default());
            dot.push_str(&pipeline_dot(&rendered, port).unwrap_or_default());
        }
        Ok(Response::new(pb::PipelinesReply {
            json: to_json(&json_out)?,
            text,
            dot,
        }))
    }

    async fn verify(
        &self,
        _: Request<pb::VerifyRequest>,
    ) -> Result<Response<pb::VerifyReply>, Status> {
        let st = self.agent.lock().await;
        let mut drift: Vec<String> = nephrite_pipeline::violations(&st.model)
            .into_iter()
            .map(|v| format!("model: {}", v.0))
            .collect();
        drift.extend(
            st.driver
                .verify(&st.model)
                .await
                .map_err(|e| Status::unavailable(format!("cannot read the data plane: {e}")))?,
        );
        Ok(Response::new(pb::VerifyReply { drift }))
    }
}

fn to_json_value<T: Serialize>(value: &T) -> Result<serde_json::Value, Status> {
    serde_json::to_value(value).map_err(|e| Status::internal(format!("encode: {e}")))
}
