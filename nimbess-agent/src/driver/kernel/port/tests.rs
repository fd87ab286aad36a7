//! The kernel driver creates a pod interface with the MAC its port asks for (root only: it
//! makes a network namespace, a bridge and veths).

use std::collections::BTreeMap;
use std::process::Command;

use nephrite_pipeline::{Mac, Model, NetworkSpec, PortRequest, port_id};

use super::KernelDriver;
use crate::naming::{bridge_name, miss_sink_name};

/// A named netns and the network's bridge and FIB-miss sink, removed on drop (also when an
/// assertion fails; the pod veths go with the netns).
struct Scratch {
    netns: String,
    bridge: String,
    sink: String,
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = Command::new("ip")
            .args(["netns", "del", &self.netns])
            .status();
        for link in [&self.sink, &self.bridge] {
            let _ = Command::new("ip").args(["link", "del", link]).status();
        }
    }
}

/// The MAC of `ifname` inside the named netns, as the kernel reports it.
fn mac_in(netns: &str, ifname: &str) -> Mac {
    let out = Command::new("ip")
        .args(["-n", netns, "-j", "link", "show", "dev", ifname])
        .output()
        .expect("ip link show");
    assert!(out.status.success(), "{ifname} in {netns}: {out:?}");
    let links: serde_json::Value = serde_json::from_slice(&out.stdout).expect("ip -j");
    links[0]["address"]
        .as_str()
        .expect("an address")
        .parse()
        .expect("a MAC")
}

#[tokio::test]
async fn the_pod_interface_carries_the_requested_mac_and_check_holds_it_to_it() {
    if let Err(e) = nephrite_test_services::require_root("creates a netns, a bridge and veths") {
        e.skip("the_pod_interface_carries_the_requested_mac_and_check_holds_it_to_it");
        return;
    }
    let network = format!("macreq{}", std::process::id());
    let scratch = Scratch {
        netns: format!("nb-macreq-{}", std::process::id()),
        bridge: bridge_name(&network),
        sink: miss_sink_name(&network),
    };
    let _ = Command::new("ip")
        .args(["netns", "del", &scratch.netns])
        .status();
    let added = Command::new("ip")
        .args(["netns", "add", &scratch.netns])
        .status()
        .expect("ip netns add");
    assert!(added.success(), "ip netns add {}", scratch.netns);
    let netns_path = format!("/run/netns/{}", scratch.netns);

    let spec = NetworkSpec::l2(&network, "10.249.7.0/24".parse().expect("cidr"));
    let specs = BTreeMap::from([(network.clone(), spec.clone())]);
    let mut model = Model::new();
    let mut driver =
        KernelDriver::new(super::super::firewall::NftFirewall::new()).expect("netlink");
    let plan = model.apply_networks(&[spec]).expect("network");
    driver.apply(&plan, &specs).await.expect("bridge");

    let wanted: Mac = "0e:42:00:11:22:33".parse().expect("mac");
    let mut plug = |ifname: &str, address: &str, mac: Option<Mac>| {
        model.add_port(PortRequest {
            container_id: "c-mac".into(),
            ifname: ifname.into(),
            netns: netns_path.clone(),
            network: network.clone(),
            address: address.parse().expect("cidr"),
            address6: None,
            pod: None,
            mac,
        })
    };
    let reserved = plug("eth1", "10.249.7.2/24", Some(wanted)).expect("eth1");
    let plain = plug("eth2", "10.249.7.3/24", None).expect("eth2");
    let mut facts = driver.apply(&reserved, &specs).await.expect("render eth1");
    facts.extend(driver.apply(&plain, &specs).await.expect("render eth2"));
    let facts: BTreeMap<_, _> = facts.into_iter().collect();

    // the requested MAC is the interface's and the facts' (what FDB entries are made from)
    let eth1 = port_id("c-mac", "eth1");
    assert_eq!(mac_in(&scratch.netns, "eth1"), wanted);
    assert_eq!(facts[&eth1].mac, wanted);
    // a port asking for none keeps the kernel's choice, reported as it is
    let eth2 = port_id("c-mac", "eth2");
    let own = mac_in(&scratch.netns, "eth2");
    assert_eq!(facts[&eth2].mac, own);
    assert_ne!(own, wanted);
    for (id, f) in facts {
        model.record_facts(&id, f).expect("facts");
    }
    let port1 = model.port(&eth1).expect("eth1").clone();
    driver
        .check(&port1, None)
        .await
        .expect("eth1 as ADD left it");
    driver
        .check(model.port(&eth2).expect("eth2"), None)
        .await
        .expect("eth2 as ADD left it");

    // changed by hand, CHECK names both MACs
    let changed = Command::new("ip")
        .args([
            "-n",
            &scratch.netns,
            "link",
            "set",
            "eth1",
            "address",
            "0e:42:00:99:99:99",
        ])
        .status()
        .expect("ip link set");
    assert!(changed.success());
    let drift = driver
        .check(&port1, None)
        .await
        .expect_err("drift")
        .to_string();
    assert!(
        drift.contains("0e:42:00:99:99:99") && drift.contains(&wanted.to_string()),
        "{drift}"
    );

    for id in [eth1, eth2] {
        let gone = model.remove_port(&id).expect("remove");
        driver.apply(&gone, &specs).await.expect("unplug");
    }
    let plan = model.apply_networks(&[]).expect("no networks");
    driver
        .apply(&plan, &BTreeMap::new())
        .await
        .expect("bridge removed");
    drop(scratch);
}
