//! Dead ports: a port whose network namespace is gone can carry no traffic
//! again, and a runtime that lost track of it (its DEL failed while the
//! agent was down, and it has no GC) never frees it. The agent frees such
//! ports itself, as a DEL would: at start-up before the data plane is
//! reconciled, before every ADD on the same network, and periodically.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use nephrite_pipeline::{Ipam, Model, Owner, Port};

use super::{Agent, AgentState};
use crate::driver::Driver;

/// True when a local port's netns is gone. Other hosts' ports are theirs
/// to judge.
fn is_dead(port: &Port) -> bool {
    !port.is_remote() && !Path::new(&port.netns).exists()
}

/// Take the dead ports out of a model loaded from disk, with their
/// addresses, before the data plane is reconciled with it (their FIB
/// entries would point at veths that went with their netns). Returns the
/// ports taken, for [`discard_leftovers`].
pub(super) fn take_dead(model: &mut Model, ipam: &mut Ipam) -> Vec<Port> {
    let dead: Vec<Port> = model
        .ports()
        .values()
        .filter(|p| is_dead(p))
        .cloned()
        .collect();
    for port in &dead {
        if let Err(e) = model.remove_port(&port.id) {
            tracing::warn!(port = %port.id, error = %e, "dead port not removed from the model");
            continue;
        }
        ipam.release_everywhere(&Owner {
            container_id: port.container_id.clone(),
            ifname: port.ifname.clone(),
        });
        tracing::info!(port = %port.id, netns = %port.netns, address = %port.address, "netns gone: port freed");
    }
    dead
}

/// Remove what the data plane still holds of ports [`take_dead`] took
/// (ACL tables, ip rules: the veth went with the netns).
pub(super) async fn discard_leftovers(driver: &mut Driver, dead: &[Port]) {
    for port in dead {
        driver.discard_port(port).await;
    }
}

impl AgentState {
    /// Free every dead port (of `network` only, when given) as a DEL
    /// would; returns how many were freed. Failures are logged and the
    /// port is tried again next time.
    pub(super) async fn reap(&mut self, network: Option<&str>) -> usize {
        let dead: Vec<(String, String, String)> = self
            .model
            .ports()
            .values()
            .filter(|p| network.is_none_or(|n| p.network == n) && is_dead(p))
            .map(|p| (p.container_id.clone(), p.ifname.clone(), p.netns.clone()))
            .collect();
        let mut freed = 0;
        for (container, ifname, netns) in dead {
            match self.delete(&container, &ifname).await {
                Ok(()) => {
                    freed += 1;
                    tracing::info!(container, ifname, netns, "netns gone: port freed");
                }
                Err(e) => {
                    tracing::warn!(container, ifname, netns, error = %e, "dead port not freed; retrying later")
                }
            }
        }
        freed
    }
}

impl Agent {
    /// Free every port whose netns is gone; returns how many.
    pub async fn reap_dead_ports(&self) -> usize {
        self.state.lock().await.reap(None).await
    }

    /// [`Agent::reap_dead_ports`] every `period`, until the process ends.
    pub async fn reap_periodically(self: Arc<Self>, period: Duration) {
        let mut ticks = tokio::time::interval(period);
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        ticks.tick().await;
        loop {
            ticks.tick().await;
            self.reap_dead_ports().await;
        }
    }
}
