//! The client's power, reboot and machine-interface calls against the simulator, behind the
//! proxy that checks every request and response against openapi.yaml.

mod support;

use std::time::Duration;

use nephrite_bmm_provider::client::types::Instance;
use nephrite_bmm_provider::client::{ApiError, BmmClient};
use nephrite_bmm_sim::SimConfig;
use support::{Harness, eventually, fast_config, ready_instance};

async fn status_becomes(client: &BmmClient, id: &str, status: &str) -> Instance {
    eventually(Duration::from_secs(10), || async {
        client
            .instance(id)
            .await
            .ok()
            .flatten()
            .filter(|i| i.status.as_deref() == Some(status))
    })
    .await
}

#[tokio::test]
async fn a_reboot_goes_through_rebooting_and_back_to_ready() {
    let h = Harness::start(SimConfig {
        reboot_delay: Duration::from_millis(300),
        ..fast_config()
    })
    .await;
    let client = h.client();
    let instance = ready_instance(&client, "reboot-0", "10.30.0.0").await;
    let address = instance.interfaces[0].ip_addresses[0].clone();
    assert!(instance.interfaces[0].mac_address.is_some());

    let rebooting = client.reboot_instance(&instance.id).await.expect("reboot");
    assert_eq!(rebooting.status.as_deref(), Some("Rebooting"));
    // A second reboot while it reboots is refused with the API's 400.
    let again = client.reboot_instance(&instance.id).await;
    assert!(matches!(again, Err(ApiError::Rejected { .. })), "{again:?}");
    let back = status_becomes(&client, &instance.id, "Ready").await;
    assert_eq!(back.interfaces[0].ip_addresses, vec![address.clone()]);
    let history = client
        .instance_status_history(&instance.id)
        .await
        .expect("history");
    assert_eq!(history[1].status.as_deref(), Some("Rebooting"));

    // The machine reports the instance's address on its primary interface.
    let machine_id = back.machine_id.clone().expect("machine");
    let machine = client
        .machine(&machine_id)
        .await
        .expect("machine")
        .expect("exists");
    let primary = &machine.machine_interfaces[0];
    assert_eq!(primary.is_primary, Some(true));
    assert_eq!(primary.ip_addresses, vec![address]);
    h.assert_contract_held();
}

#[tokio::test]
async fn the_tray_of_an_instance_switches_its_power() {
    let h = Harness::start(SimConfig {
        reboot_delay: Duration::from_millis(300),
        ..fast_config()
    })
    .await;
    let client = h.client();
    let instance = ready_instance(&client, "power-0", "10.30.0.0").await;
    let site = instance.site_id.clone().expect("site");
    let machine = instance.machine_id.clone().expect("machine");
    let tray = client
        .machine_tray(&site, &machine)
        .await
        .expect("trays")
        .expect("a tray");
    assert_eq!(tray.power_state.as_deref(), Some("on"));

    client
        .set_tray_power(&site, &tray.id, "off")
        .await
        .expect("off");
    let off = client.machine_tray(&site, &machine).await.expect("trays");
    assert_eq!(off.and_then(|t| t.power_state).as_deref(), Some("off"));
    // Powering on boots the host: the instance is Rebooting, then Ready.
    client
        .set_tray_power(&site, &tray.id, "on")
        .await
        .expect("on");
    assert_eq!(
        h.sim.instance_status(&instance.id).as_deref(),
        Some("Rebooting")
    );
    status_becomes(&client, &instance.id, "Ready").await;
    h.assert_contract_held();
}

#[tokio::test]
async fn a_storm_of_5xx_is_answered_until_it_ends() {
    let h = Harness::start(fast_config()).await;
    h.sim.fail_next(3, 502);
    let raw = reqwest::Client::new();
    let url = format!("{}/v2/org/{}/carbide/tenant/current", h.url, support::ORG);
    for _ in 0..3 {
        let answer = raw
            .get(&url)
            .bearer_auth(support::token().expose())
            .send()
            .await
            .expect("send");
        assert_eq!(answer.status().as_u16(), 502);
    }
    let answer = raw
        .get(&url)
        .bearer_auth(support::token().expose())
        .send()
        .await
        .expect("send");
    assert_eq!(answer.status().as_u16(), 200);
    h.assert_contract_held();
}
