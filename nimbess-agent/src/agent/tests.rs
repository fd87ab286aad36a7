use super::*;
use crate::cni::Attachment;
use crate::driver::sim::SimDriver;

fn spec(name: &str, subnet: &str) -> NetworkSpec {
    NetworkSpec::l2(name, subnet.parse().expect("cidr"))
}

/// A stand-in for a netns (the sim driver needs an existing path only).
fn fake_netns(dir: &std::path::Path, name: &str) -> String {
    let path = dir.join(name);
    std::fs::write(&path, b"").expect("fake netns");
    path.display().to_string()
}

/// An agent on the sim driver with its state in `dir`.
async fn sim_agent(dir: &std::path::Path, networks: &[NetworkSpec]) -> Agent {
    let store = StateStore::open(dir).expect("store");
    Agent::start(store, networks, Driver::Sim(SimDriver::new()))
        .await
        .expect("start")
}

fn req(container: &str, network: &str, netns: &str) -> CniRequest {
    CniRequest {
        cni_version: "1.1.0".into(),
        container_id: container.into(),
        netns: netns.into(),
        ifname: "eth0".into(),
        network: network.into(),
        ..Default::default()
    }
}

#[tokio::test]
async fn add_del_gc_and_restart_with_the_sim_driver() {
    let dir = tempfile::tempdir().expect("tmp");
    let netns = dir.path().join("ns");
    std::fs::write(&netns, b"").expect("fake netns");
    let netns = netns.display().to_string();
    let nets = [spec("blue", "10.5.0.0/29"), spec("red", "10.6.0.0/24")];
    let store = StateStore::open(&dir.path().join("state")).expect("store");
    let agent = Agent::start(store.clone(), &nets, Driver::Sim(SimDriver::new()))
        .await
        .expect("start");

    let a = agent.add(&req("a", "blue", &netns)).await.expect("a");
    assert_eq!(a.ips[0].address.to_string(), "10.5.0.2/29");
    assert_eq!(a.ips[0].gateway, Some("10.5.0.1".parse().expect("ip")));
    // same (container, ifname, network): the stored result
    assert_eq!(
        agent.add(&req("a", "blue", &netns)).await.expect("again"),
        a
    );
    // same (container, ifname) on another network: 7
    assert_eq!(
        agent
            .add(&req("a", "red", &netns))
            .await
            .expect_err("7")
            .code,
        ErrorCode::InvalidConfig
    );
    assert_eq!(
        agent
            .add(&req("x", "green", &netns))
            .await
            .expect_err("7")
            .code,
        ErrorCode::InvalidConfig
    );
    assert_eq!(
        agent
            .add(&req("x", "blue", "/no/such/netns"))
            .await
            .expect_err("4")
            .code,
        ErrorCode::InvalidEnvironment
    );
    assert_eq!(
        agent
            .check(&req("zz", "blue", &netns))
            .await
            .expect_err("3")
            .code,
        ErrorCode::UnknownContainer
    );
    agent.check(&req("a", "blue", &netns)).await.expect("check");

    // fill the /29: hosts .2-.6 (gateway .1 never handed out)
    for c in ["b", "c", "d", "e"] {
        agent.add(&req(c, "blue", &netns)).await.expect("fill");
    }
    assert_eq!(
        agent
            .status(&req("", "blue", &netns))
            .await
            .expect_err("full")
            .code,
        ErrorCode::NotAvailable
    );
    assert_eq!(
        agent
            .add(&req("f", "blue", &netns))
            .await
            .expect_err("11")
            .code,
        ErrorCode::TryAgainLater
    );
    {
        let st = agent.lock().await;
        assert!(
            st.model.port_of("f", "eth0").is_none(),
            "failed ADD leaves no model entry"
        );
        assert_eq!(nephrite_pipeline::violations(&st.model), vec![]);
    }

    // DEL is idempotent and frees the address
    agent.del(&req("b", "blue", "")).await.expect("del");
    agent.del(&req("b", "blue", "")).await.expect("del again");
    agent.del(&req("never", "blue", "")).await.expect("unknown");
    let f = agent.add(&req("f", "blue", &netns)).await.expect("reuse");
    assert_eq!(f.ips[0].address.to_string(), "10.5.0.3/29");

    // restart: state survives, DEL of an old pod succeeds and frees its address
    drop(agent);
    let agent = Agent::start(store.clone(), &nets, Driver::Sim(SimDriver::new()))
        .await
        .expect("restart");
    assert_eq!(
        agent.add(&req("a", "blue", &netns)).await.expect("stored"),
        a
    );
    agent
        .del(&req("a", "blue", ""))
        .await
        .expect("del after restart");
    assert!(
        store
            .load()
            .expect("load")
            .ipam
            .held_by(
                "blue",
                &Owner {
                    container_id: "a".into(),
                    ifname: "eth0".into()
                }
            )
            .is_none()
    );

    // GC keeps only the valid attachments of the network
    let mut gc = req("", "blue", "");
    gc.valid_attachments = vec![Attachment {
        container_id: "c".into(),
        ifname: "eth0".into(),
    }];
    agent.gc(&gc).await.expect("gc");
    let st = agent.lock().await;
    let left: Vec<_> = st
        .model
        .ports()
        .values()
        .map(|p| p.container_id.clone())
        .collect();
    assert_eq!(left, vec!["c".to_string()]);
}

#[tokio::test]
async fn reload_applies_acl_to_every_port_pipeline_of_the_network() {
    let dir = tempfile::tempdir().expect("tmp");
    let netns = dir.path().join("ns");
    std::fs::write(&netns, b"").expect("fake netns");
    let netns = netns.display().to_string();
    let agent = sim_agent(dir.path(), &[spec("blue", "10.5.0.0/24")]).await;
    agent.add(&req("a", "blue", &netns)).await.expect("a");
    agent.add(&req("b", "blue", &netns)).await.expect("b");
    let mut with_acl = spec("blue", "10.5.0.0/24");
    with_acl.acl = vec![nephrite_pipeline::AclRule {
        action: nephrite_pipeline::AclAction::Deny,
        src: None,
        dst: None,
        protocol: Some(nephrite_pipeline::AclProtocol::Icmp),
        port: None,
    }];
    let plan = agent.reload(&[with_acl]).await.expect("reload");
    assert_eq!(plan.acl_changed.len(), 2);
    // a network with ports cannot vanish
    assert!(agent.reload(&[]).await.is_err());
}

#[test]
fn the_fabric_adds_networks_and_the_config_wins_on_a_shared_name() {
    let mut view = FabricView::default();
    let mut theirs = spec("blue", "10.9.0.0/24");
    theirs.mtu = Some(9000);
    view.networks.insert("blue".into(), theirs);
    view.networks
        .insert("green".into(), spec("green", "10.8.0.0/24"));
    let configured = [spec("blue", "10.5.0.0/24"), spec("red", "10.6.0.0/24")];
    let effective = fabric::effective_networks(&configured, &view);
    let names: Vec<&str> = effective.iter().map(|n| n.name.as_str()).collect();
    assert_eq!(names, ["blue", "green", "red"]);
    assert_eq!(effective[0], configured[0], "this host's config wins");
}

#[tokio::test]
async fn dead_ports_are_freed_at_start_before_an_add_and_on_demand() {
    let dir = tempfile::tempdir().expect("tmp");
    let ns = |name: &str| fake_netns(dir.path(), name);
    let (ns_a, ns_b, ns_c) = (ns("a"), ns("b"), ns("c"));
    let nets = [spec("blue", "10.5.0.0/24"), spec("red", "10.6.0.0/24")];
    let store = StateStore::open(&dir.path().join("state")).expect("store");
    let agent = Agent::start(store.clone(), &nets, Driver::Sim(SimDriver::new()))
        .await
        .expect("start");
    let a = agent.add(&req("a", "blue", &ns_a)).await.expect("a");
    agent.add(&req("c", "red", &ns_c)).await.expect("c");

    // a's netns goes while the agent is down: freed at start
    drop(agent);
    std::fs::remove_file(&ns_a).expect("rm");
    let agent = Agent::start(store.clone(), &nets, Driver::Sim(SimDriver::new()))
        .await
        .expect("restart");
    let owner_a = Owner {
        container_id: "a".into(),
        ifname: "eth0".into(),
    };
    assert!(
        store
            .load()
            .expect("load")
            .ipam
            .held_by("blue", &owner_a)
            .is_none()
    );
    let b = agent.add(&req("b", "blue", &ns_b)).await.expect("b");
    assert_eq!(
        b.ips[0].address, a.ips[0].address,
        "a's address is free again"
    );

    // b's netns goes under a running agent: the next ADD on blue frees it
    std::fs::remove_file(&ns_b).expect("rm");
    let d = agent.add(&req("d", "blue", &ns("d"))).await.expect("d");
    assert_eq!(d.ips[0].address, b.ips[0].address);

    // c's netns goes, nothing ADDs on red: the reaper frees it
    std::fs::remove_file(&ns_c).expect("rm");
    assert_eq!(agent.reap_dead_ports().await, 1);
    assert_eq!(agent.reap_dead_ports().await, 0);
    let ids: Vec<String> = agent
        .ports()
        .await
        .into_iter()
        .map(|p| p.container_id)
        .collect();
    assert_eq!(ids, ["d"]);
}

#[tokio::test]
async fn a_repeat_add_in_another_netns_plugs_the_port_there() {
    let dir = tempfile::tempdir().expect("tmp");
    let ns = |name: &str| fake_netns(dir.path(), name);
    let (first, second) = (ns("first"), ns("second"));
    let agent = sim_agent(dir.path(), &[spec("blue", "10.5.0.0/24")]).await;
    let r1 = agent.add(&req("a", "blue", &first)).await.expect("first");
    assert_eq!(r1.interfaces[0].sandbox.as_deref(), Some(first.as_str()));
    let r2 = agent.add(&req("a", "blue", &second)).await.expect("second");
    assert_eq!(r2.interfaces[0].sandbox.as_deref(), Some(second.as_str()));
    assert_eq!(r2.ips, r1.ips, "the address is kept");
    let ports = agent.ports().await;
    assert_eq!(ports.len(), 1);
    assert_eq!(ports[0].netns, second);
    // and the same netns again is the stored result
    assert_eq!(
        agent.add(&req("a", "blue", &second)).await.expect("again"),
        r2
    );
}

#[tokio::test]
async fn an_add_into_the_agents_own_namespace_is_refused() {
    let dir = tempfile::tempdir().expect("tmp");
    let agent = sim_agent(dir.path(), &[spec("blue", "10.5.0.0/24")]).await;
    let own = format!("/proc/{}/ns/net", std::process::id());
    for netns in ["/proc/self/ns/net", "/proc/1/ns/net", own.as_str()] {
        let e = agent
            .add(&req("x", "blue", netns))
            .await
            .expect_err("the agent's namespace");
        assert_eq!(e.code, ErrorCode::InvalidEnvironment, "{netns}");
        assert!(e.msg.contains(netns), "{}", e.msg);
    }
    assert!(agent.ports().await.is_empty());
}

fn vif_ref(uid: &str, key: &str) -> crate::vif::VifRef {
    crate::vif::VifRef {
        pod_uid: uid.into(),
        key: key.into(),
    }
}

fn claim(uid: &str, key: &str, network: &str) -> crate::vif::VifClaim {
    crate::vif::VifClaim {
        vif: vif_ref(uid, key),
        network: network.into(),
        pod_namespace: "ns".into(),
        pod_name: "pod".into(),
    }
}

#[tokio::test]
async fn vifs_are_idempotent_plugged_by_add_and_survive_a_restart() {
    use crate::vif::VifFailure;
    let dir = tempfile::tempdir().expect("tmp");
    let netns = fake_netns(dir.path(), "ns");
    let nets = [spec("blue", "10.5.0.0/29"), spec("red", "10.6.0.0/24")];
    let state = dir.path().join("state");
    let agent = sim_agent(&state, &nets).await;

    let a = agent
        .allocate_vif(&claim("u1", "net/a", "red"))
        .await
        .expect("a");
    assert_eq!(a.entry.address.to_string(), "10.6.0.2/24");
    assert_eq!(a.gateway, Some("10.6.0.1".parse().expect("ip")));
    assert_eq!(a.plugged, None);
    // the same VIF again: the same address, nothing more held
    let again = agent
        .allocate_vif(&claim("u1", "net/a", "red"))
        .await
        .expect("again");
    assert_eq!(again, a);
    // the same VIF on another network, an unknown network, an empty key: refused by name
    let other = agent
        .allocate_vif(&claim("u1", "net/a", "blue"))
        .await
        .expect_err("other");
    assert!(
        matches!(&other, VifFailure::Invalid(m) if m.contains("red")),
        "{other}"
    );
    let unknown = agent
        .allocate_vif(&claim("u1", "k", "green"))
        .await
        .expect_err("unknown");
    assert_eq!(unknown, VifFailure::UnknownNetwork("green".into()));
    assert!(unknown.to_string().contains("green"));
    assert!(matches!(
        agent.allocate_vif(&claim("u1", "", "red")).await,
        Err(VifFailure::Invalid(_))
    ));

    // an ADD naming the VIF plugs its address; a plain ADD on red gets another one
    let mut plug = req("c1", "red", &netns);
    plug.ifname = "eth1".into();
    plug.vif = Some(vif_ref("u1", "net/a"));
    let result = agent.add(&plug).await.expect("plug");
    assert_eq!(
        result.ips[0].address,
        nephrite_pipeline::IpCidr::V4(a.entry.address)
    );
    let plain = agent.add(&req("c2", "red", &netns)).await.expect("plain");
    assert_ne!(
        plain.ips[0].address,
        nephrite_pipeline::IpCidr::V4(a.entry.address)
    );
    let plugged = agent.vif(&vif_ref("u1", "net/a")).await.expect("get");
    assert_eq!(
        plugged.plugged.as_ref().map(|p| p.ifname.as_str()),
        Some("eth1")
    );
    // the plugged interface carries the MAC the VIF reserved; the plain one the driver's own
    let reserved = a.entry.mac.expect("a reserved MAC");
    assert_eq!(result.interfaces[0].mac, Some(reserved));
    assert_eq!(plugged.plugged.as_ref().and_then(|p| p.mac), Some(reserved));
    assert_eq!(
        agent
            .lock()
            .await
            .model
            .port_of("c1", "eth1")
            .map(|p| p.requested_mac),
        Some(Some(reserved))
    );
    assert_eq!(
        plain.interfaces[0].mac,
        Some(crate::driver::sim::sim_mac(&port_id("c2", "eth0")))
    );
    // a second interface naming the same VIF, an unknown VIF, another network: 7
    let mut twice = req("c3", "red", &netns);
    twice.vif = Some(vif_ref("u1", "net/a"));
    assert_eq!(
        agent.add(&twice).await.expect_err("twice").code,
        ErrorCode::InvalidConfig
    );
    twice.vif = Some(vif_ref("u9", "net/a"));
    assert_eq!(
        agent.add(&twice).await.expect_err("unknown").code,
        ErrorCode::InvalidConfig
    );
    let mut wrong_net = req("c3", "blue", &netns);
    wrong_net.vif = Some(vif_ref("u1", "net/a"));
    assert_eq!(
        agent.add(&wrong_net).await.expect_err("net").code,
        ErrorCode::InvalidConfig
    );

    // GC keeps reserved VIFs; DEL unplugs and keeps the reservation
    let mut gc = req("", "red", "");
    gc.valid_attachments = vec![Attachment {
        container_id: "c1".into(),
        ifname: "eth1".into(),
    }];
    agent.gc(&gc).await.expect("gc");
    assert_eq!(agent.vifs(Some("u1")).await.len(), 1);
    let mut del = req("c1", "red", &netns);
    del.ifname = "eth1".into();
    agent.del(&del).await.expect("del");
    let unplugged = agent.vif(&vif_ref("u1", "net/a")).await.expect("kept");
    assert_eq!(unplugged.plugged, None);
    assert_eq!(unplugged.entry.address, a.entry.address);
    // plugged again, then the agent restarts on the same state: the VIF and its port stay
    agent.add(&plug).await.expect("plug again");
    drop(agent);
    let agent = sim_agent(&state, &nets).await;
    let back = agent.vifs(Some("u1")).await;
    assert_eq!(back.len(), 1);
    assert_eq!(back[0].entry.address, a.entry.address);
    assert_eq!(back[0].plugged.as_ref().and_then(|p| p.mac), Some(reserved));
    // a second VIF of the pod, listed in key order; another pod's is not listed
    agent
        .allocate_vif(&claim("u1", "main", "blue"))
        .await
        .expect("main");
    agent
        .allocate_vif(&claim("u2", "main", "blue"))
        .await
        .expect("u2");
    let keys: Vec<String> = agent
        .vifs(Some("u1"))
        .await
        .into_iter()
        .map(|v| v.entry.vif.key)
        .collect();
    assert_eq!(keys, ["main", "net/a"]);
    assert_eq!(agent.vifs(None).await.len(), 3);

    // release unplugs the port and frees the address for the next comer
    assert!(
        agent
            .release_vif(&vif_ref("u1", "net/a"))
            .await
            .expect("release")
    );
    assert!(
        !agent
            .release_vif(&vif_ref("u1", "net/a"))
            .await
            .expect("twice")
    );
    assert_eq!(
        agent.vif(&vif_ref("u1", "net/a")).await,
        Err(VifFailure::NotFound(vif_ref("u1", "net/a")))
    );
    {
        let st = agent.lock().await;
        assert!(st.model.port_of("c1", "eth1").is_none());
        let held = &st.ipam.pool("red").expect("pool").held;
        assert!(!held.contains_key(&a.entry.address.addr), "{held:?}");
    }
    drop(agent);
    let agent = sim_agent(&state, &nets).await;
    assert!(
        agent
            .vifs(Some("u1"))
            .await
            .iter()
            .all(|v| v.entry.vif.key != "net/a")
    );
    let next = agent
        .allocate_vif(&claim("u3", "x", "red"))
        .await
        .expect("next");
    assert_eq!(next.entry.address, a.entry.address);
}
