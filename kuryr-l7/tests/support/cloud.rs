//! Octavia and Neutron clients of a fresh project on the test services (noauth): what the
//! OpenStack tests and the `l7_octavia` bench set up first. Included by path from `benches/`.

use std::sync::Arc;
use std::time::Duration;

use nephrite_kuryr_l7::openstack::auth::Credentials;
use nephrite_kuryr_l7::openstack::neutron::Neutron;
use nephrite_kuryr_l7::openstack::octavia::{Octavia, Settle};
use nephrite_kuryr_l7::openstack::{Endpoint, Session};
use nephrite_test_services::{OpenStack, new_project_id};

/// A project's clients: its id, Octavia (polling every `poll` while a load balancer settles)
/// and Neutron.
pub fn project_clients(
    cloud: &OpenStack,
    poll: Duration,
) -> anyhow::Result<(String, Octavia, Neutron)> {
    let project = new_project_id();
    let session = Arc::new(Session::new(
        Credentials::NoAuth {
            project_id: project.clone(),
        },
        Duration::from_secs(60),
    )?);
    let octavia = Octavia::new(
        session.clone(),
        Endpoint::Url(cloud.octavia_url()),
        Settle {
            poll,
            timeout: Duration::from_secs(120),
        },
    );
    let neutron = Neutron::new(session, Endpoint::Url(cloud.neutron_url()));
    Ok((project, octavia, neutron))
}
