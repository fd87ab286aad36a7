//! What the inspection subcommands (`ports`, `networks`, `pipelines`,
//! `verify`, `explain`) see of the agent: read-only views of the model, its pools and
//! the data plane, taken under the agent's lock.

use std::collections::BTreeMap;

use nephrite_pipeline::{
    MetaPipeline, Module, NetworkSpec, Port, PortId, pipeline_dot, pipeline_text,
};
use serde::Serialize;

use super::Agent;
use crate::driver::{DriverError, ModuleObject};

/// A network as `networks -o json` shows it.
#[derive(Debug, Clone, Serialize)]
pub struct NetworkView {
    /// The declaration.
    pub spec: NetworkSpec,
    /// Its gateway address.
    pub gateway: Option<std::net::Ipv4Addr>,
    /// Its meta pipeline.
    pub meta_pipeline: MetaPipeline,
    /// Ports on it (this host's and other hosts').
    pub ports: usize,
    /// Addresses its pool holds.
    pub addresses_held: usize,
}

/// A module instance with its data-plane object and counters.
#[derive(Debug, Clone, Serialize)]
pub struct ModuleView {
    /// The module.
    #[serde(flatten)]
    pub module: Module,
    /// What renders it.
    pub data_plane: ModuleObject,
}

/// A port pipeline as `pipelines -o json` shows it.
#[derive(Debug, Clone, Serialize)]
pub struct PipelineView {
    /// The network.
    pub network: String,
    /// Its module instances in order.
    pub modules: Vec<ModuleView>,
    /// The Services' load-balancer modules placed in it.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub load_balancers: Vec<LoadBalancerView>,
}

/// A load-balancer module instance of a port pipeline.
#[derive(Debug, Clone, Serialize)]
pub struct LoadBalancerView {
    /// Its id (`lb.<ns>.<service>.<proto>.<port>.<port id>`).
    pub id: String,
    /// The Service port it renders.
    pub service: nephrite_pipeline::LoadBalancerKey,
    /// Its VIP and backends.
    #[serde(flatten)]
    pub module: nephrite_pipeline::LoadBalancer,
}

/// Port pipelines: by port, and printed as text and Graphviz DOT.
#[derive(Debug, Clone, Default)]
pub struct PipelinesView {
    /// By port id.
    pub ports: BTreeMap<PortId, PipelineView>,
    /// Human-readable text.
    pub text: String,
    /// Graphviz DOT.
    pub dot: String,
}

/// A port that has no pipeline.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("no pipeline for port {0:?}")]
pub struct NoSuchPipeline(pub String);

impl Agent {
    /// Every port of the model.
    pub async fn ports(&self) -> Vec<Port> {
        self.state
            .lock()
            .await
            .model
            .ports()
            .values()
            .cloned()
            .collect()
    }

    /// Every network with its meta pipeline and pool use.
    pub async fn networks(&self) -> Vec<NetworkView> {
        let st = self.state.lock().await;
        st.model
            .networks()
            .values()
            .map(|n| NetworkView {
                spec: n.spec.clone(),
                gateway: n.spec.gateway(),
                meta_pipeline: n.meta.clone(),
                ports: st
                    .model
                    .ports()
                    .values()
                    .filter(|p| p.network == n.spec.name)
                    .count(),
                addresses_held: st.ipam.pool(&n.spec.name).map_or(0, |p| p.held.len()),
            })
            .collect()
    }

    /// The pipelines of every port, or of `port` alone.
    ///
    /// # Errors
    /// `port` has no pipeline.
    pub async fn pipelines(&self, port: Option<&str>) -> Result<PipelinesView, NoSuchPipeline> {
        let st = self.state.lock().await;
        let rendered = st.model.rendered();
        let ports: Vec<String> = match port {
            None => rendered.pipelines.keys().cloned().collect(),
            Some(p) if rendered.pipelines.contains_key(p) => vec![p.to_string()],
            Some(p) => return Err(NoSuchPipeline(p.to_string())),
        };
        let mut objects = st.driver.objects(&st.model).await;
        let local: Vec<&Port> = st.model.ports().values().collect();
        let mut placed = nephrite_pipeline::place_load_balancers(&local, &st.services);
        let mut view = PipelinesView::default();
        for port in &ports {
            let Some(p) = rendered.pipelines.get(port) else {
                continue;
            };
            let modules = p
                .modules
                .iter()
                .filter_map(|id| rendered.modules.get(id))
                .map(|m| ModuleView {
                    module: m.clone(),
                    data_plane: objects.remove(&m.id).unwrap_or_default(),
                })
                .collect();
            let load_balancers: Vec<LoadBalancerView> = placed
                .remove(port)
                .unwrap_or_default()
                .into_iter()
                .filter_map(|(id, key)| {
                    let module = st.services.get(&key)?.clone();
                    Some(LoadBalancerView {
                        id,
                        service: key,
                        module,
                    })
                })
                .collect();
            view.text
                .push_str(&pipeline_text(&rendered, port).unwrap_or_default());
            for lb in &load_balancers {
                let backends: Vec<String> = lb
                    .module
                    .backends
                    .iter()
                    .map(|b| format!("{}:{}", b.address, b.port))
                    .collect();
                view.text.push_str(&format!(
                    "  {}: load_balancer {}:{} -> [{}]\n",
                    lb.id,
                    lb.module.vip,
                    lb.service.port,
                    backends.join(", ")
                ));
            }
            view.ports.insert(
                port.clone(),
                PipelineView {
                    network: p.network.clone(),
                    modules,
                    load_balancers,
                },
            );
            view.dot
                .push_str(&pipeline_dot(&rendered, port).unwrap_or_default());
        }
        Ok(view)
    }

    /// Differences between the model and the data plane, one line each
    /// (the model's own broken promises first).
    ///
    /// # Errors
    /// The data plane cannot be read.
    pub async fn verify(&self) -> Result<Vec<String>, DriverError> {
        let mut guard = self.state.lock().await;
        let st = &mut *guard;
        let mut drift: Vec<String> = nephrite_pipeline::violations(&st.model)
            .into_iter()
            .map(|v| format!("model: {}", v.0))
            .collect();
        drift.extend(st.driver.verify(&st.model).await?);
        drift.extend(st.verify_services());
        Ok(drift)
    }

    /// What `explain` reads of the agent: its networks, its ports with the
    /// pods they belong to, the Services' load balancers and the policy
    /// tiers it rendered.
    pub async fn cluster(&self) -> crate::explain::cluster::AgentCluster {
        let st = self.state.lock().await;
        crate::explain::cluster::AgentCluster {
            networks: st
                .model
                .networks()
                .values()
                .map(|n| n.spec.clone())
                .collect(),
            ports: st
                .model
                .ports()
                .values()
                .map(|p| crate::explain::cluster::PortAt {
                    pod: p.pod.clone(),
                    address: p.address.addr,
                    network: p.network.clone(),
                    netns: (p.remote.is_none() && !p.netns.is_empty()).then(|| p.netns.clone()),
                })
                .collect(),
            load_balancers: st
                .services
                .iter()
                .map(|(k, lb)| (k.clone(), lb.clone()))
                .collect(),
            tiers: st.policies.clone(),
        }
    }
}
