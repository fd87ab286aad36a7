//! The Services' load-balancer modules: what the northbound derived, the
//! difference the data plane renders, their place in the port pipelines,
//! and drift (named, then repaired).

use std::collections::BTreeMap;

use nephrite_pipeline::{
    LoadBalancer, LoadBalancerDiff, LoadBalancerKey, PortId, diff_load_balancers,
    place_load_balancers,
};

use super::{Agent, AgentState};
use crate::driver::DriverError;

impl Agent {
    /// Make `lbs` the Services' load-balancer modules: the data plane
    /// renders what changed. Returns the difference applied.
    ///
    /// # Errors
    /// The data plane refused them (the previous modules stay recorded and
    /// rendered).
    pub async fn set_services(
        &self,
        lbs: BTreeMap<LoadBalancerKey, LoadBalancer>,
    ) -> Result<LoadBalancerDiff, DriverError> {
        let mut st = self.state.lock().await;
        let diff = diff_load_balancers(&st.services, &lbs);
        if diff.is_empty() {
            return Ok(diff);
        }
        st.driver.apply_services(&lbs)?;
        st.services = lbs;
        Ok(diff)
    }

    /// The load-balancer modules of the port pipelines: by port, the
    /// modules its pipeline holds (every pod of this host reaches every
    /// ClusterIP).
    pub async fn service_modules(&self) -> BTreeMap<PortId, Vec<(String, LoadBalancerKey)>> {
        let st = self.state.lock().await;
        let ports: Vec<&nephrite_pipeline::Port> = st.model.ports().values().collect();
        place_load_balancers(&ports, &st.services)
    }

    /// The Services' modules (inspection).
    pub async fn services(&self) -> BTreeMap<LoadBalancerKey, LoadBalancer> {
        self.state.lock().await.services.clone()
    }
}

impl AgentState {
    /// Drift between the Services' modules and the data plane, one line
    /// each; what drifted is rendered again.
    pub(crate) fn verify_services(&mut self) -> Vec<String> {
        let lbs = self.services.clone();
        let drift = self.driver.verify_services(&lbs);
        if !drift.is_empty()
            && let Err(e) = self.driver.apply_services(&lbs)
        {
            tracing::warn!(error = %e, "the Services' drift could not be repaired");
        }
        drift
    }
}
