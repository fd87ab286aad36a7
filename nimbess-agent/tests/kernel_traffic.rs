//! Real traffic between pods (network namespaces) through the kernel
//! driver. Needs root (CAP_NET_ADMIN); skipped loudly otherwise.

mod support;

use std::collections::BTreeSet;
use std::sync::Arc;

use nimbess_agent::naming::{bridge_name, host_veth_name};
use support::{AgentProcess, Netns, first_ip, link_exists, ping, unique};

fn root(test: &str) -> bool {
    support::root(test, "creates network namespaces, veths and bridges")
}

fn config(nets: &[(&str, &str)]) -> String {
    let mut s = String::from("driver: kernel\nnetworks:\n");
    for (name, subnet) in nets {
        s.push_str(&format!("  - name: {name}\n    subnet: {subnet}\n"));
    }
    s
}

#[test]
fn pods_on_one_network_ping_and_networks_are_isolated() {
    if !root("pods_on_one_network_ping_and_networks_are_isolated") {
        return;
    }
    let blue = unique("blue");
    let red = unique("red");
    let agent = AgentProcess::start(
        &config(&[(&blue, "10.201.0.0/24"), (&red, "10.201.0.0/24")]),
        "kernel",
        &[&blue, &red],
    );
    let (a, b, c) = (Netns::new("pa"), Netns::new("pb"), Netns::new("pc"));
    let (code, ra) = agent.cni("ADD", &blue, &a.name, &a.path());
    assert_eq!(code, 0, "{ra}\n{}", agent.log());
    let (_, rb) = agent.cni("ADD", &blue, &b.name, &b.path());
    // c is on another network with the same subnet: same address space, no path
    let (_, rc) = agent.cni("ADD", &red, &c.name, &c.path());
    assert_eq!(
        first_ip(&rc),
        first_ip(&ra),
        "red hands out the same first address"
    );

    assert_eq!(
        ping(&a.path(), first_ip(&rb), 3),
        3,
        "a reaches b\n{}",
        agent.log()
    );
    assert_eq!(ping(&b.path(), first_ip(&ra), 3), 3, "b reaches a");
    let (_, rb2) = (0, rb.clone());
    assert_eq!(
        ping(&c.path(), first_ip(&rb2), 2),
        0,
        "red cannot reach blue"
    );
    assert_eq!(agent.cli(&["verify"]), (0, "no drift\n".to_string()));

    // counters: A's pipeline (its ingress, B's egress) counts the pings, C's does not move
    let counters = |port: &str| -> serde_json::Value {
        let (code, out) = agent.cli(&["pipelines", "--port", port, "-o", "json"]);
        assert_eq!(code, 0);
        serde_json::from_str(&out).expect("json")
    };
    let pa = format!("port_{}_eth0", a.name);
    let pc = format!("port_{}_eth0", c.name);
    let packets = |v: &serde_json::Value, port: &str, module: &str| -> u64 {
        v[port]["modules"]
            .as_array()
            .expect("modules")
            .iter()
            .find(|m| m["id"] == module)
            .and_then(|m| m["data_plane"]["packets"].as_u64())
            .unwrap_or_else(|| panic!("{module} in {v}"))
    };
    let pb = format!("port_{}_eth0", b.name);
    let before_a = counters(&pa);
    let before_c = counters(&pc);
    assert_eq!(ping(&a.path(), first_ip(&rb), 20), 20);
    let after_a = counters(&pa);
    let after_c = counters(&pc);
    let ingress = format!("{pa}_ingress");
    let b_egress = format!("{pb}_egress");
    assert!(packets(&after_a, &pa, &ingress) >= packets(&before_a, &pa, &ingress) + 20);
    assert!(packets(&after_a, &pa, &b_egress) >= packets(&before_a, &pa, &b_egress) + 20);
    let c_ingress = format!("{pc}_ingress");
    assert_eq!(
        packets(&after_c, &pc, &c_ingress),
        packets(&before_c, &pc, &c_ingress)
    );
    let object = after_a[&pa]["modules"][0]["data_plane"]["object"]
        .as_str()
        .unwrap_or("");
    assert!(object.contains(&host_veth_name(&pa)), "{object}");
}

#[test]
fn deleting_a_fib_entry_by_hand_breaks_only_that_path_and_verify_names_it() {
    if !root("deleting_a_fib_entry_by_hand_breaks_only_that_path_and_verify_names_it") {
        return;
    }
    let net = unique("fib");
    let agent = AgentProcess::start(&config(&[(&net, "10.202.0.0/24")]), "kernel", &[&net]);
    let (a, b, c) = (Netns::new("fa"), Netns::new("fb"), Netns::new("fc"));
    let (_, ra) = agent.cni("ADD", &net, &a.name, &a.path());
    let (_, rb) = agent.cni("ADD", &net, &b.name, &b.path());
    let (_, rc) = agent.cni("ADD", &net, &c.name, &c.path());
    assert_eq!(ping(&a.path(), first_ip(&rb), 2), 2);
    // drop B's static FDB entry: frames to B's MAC now reach no pod (no learning, no flooding)
    let mac_b = rb["interfaces"][0]["mac"]
        .as_str()
        .expect("mac")
        .to_string();
    let veth_b = host_veth_name(&format!("port_{}_eth0", b.name));
    let status = std::process::Command::new("bridge")
        .args(["fdb", "del", &mac_b, "dev", &veth_b, "master"])
        .status()
        .expect("bridge");
    assert!(status.success());
    assert_eq!(ping(&a.path(), first_ip(&rb), 3), 0, "A→B is broken");
    assert_eq!(ping(&a.path(), first_ip(&rc), 2), 2, "A→C still works");
    let (code, out) = agent.cli(&["verify"]);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains(&mac_b) && out.contains(&veth_b), "{out}");
    let _ = ra;
}

#[test]
fn del_frees_the_veth_and_the_address_and_failed_add_rolls_back() {
    if !root("del_frees_the_veth_and_the_address_and_failed_add_rolls_back") {
        return;
    }
    let net = unique("del");
    let agent = AgentProcess::start(&config(&[(&net, "10.203.0.0/24")]), "kernel", &[&net]);
    let a = Netns::new("da");
    let (_, ra) = agent.cni("ADD", &net, &a.name, &a.path());
    let veth = host_veth_name(&format!("port_{}_eth0", a.name));
    assert!(link_exists(&veth));
    assert_eq!(agent.cni("CHECK", &net, &a.name, &a.path()).0, 0);
    assert_eq!(agent.cni("DEL", &net, &a.name, &a.path()).0, 0);
    assert!(!link_exists(&veth), "the veth is gone");
    assert_eq!(agent.cni("DEL", &net, &a.name, &a.path()).0, 0, "DEL again");

    // a pod whose eth0 already exists: the driver fails (101), nothing is left behind
    let b = Netns::new("db");
    let status = std::process::Command::new("ip")
        .args([
            "-n", &b.name, "link", "add", "eth0", "type", "veth", "peer", "name", "eth0p",
        ])
        .status()
        .expect("ip");
    assert!(status.success());
    let (code, err) = agent.cni("ADD", &net, &b.name, &b.path());
    assert_eq!((code, err["code"].as_u64()), (1, Some(101)), "{err}");
    assert!(!link_exists(&host_veth_name(&format!(
        "port_{}_eth0",
        b.name
    ))));
    let (_, ports) = agent.cli(&["ports", "-o", "json"]);
    assert_eq!(ports.trim(), "[]");
    // and the address was never taken: the next pod gets the one DEL freed
    let c = Netns::new("dc");
    let (_, rc) = agent.cni("ADD", &net, &c.name, &c.path());
    assert_eq!(first_ip(&rc), first_ip(&ra));
    assert_eq!(agent.cli(&["verify"]).0, 0);
}

#[test]
fn kill_9_restart_adopts_and_pods_keep_pinging() {
    if !root("kill_9_restart_adopts_and_pods_keep_pinging") {
        return;
    }
    let net = unique("rst");
    let mut agent = AgentProcess::start(&config(&[(&net, "10.204.0.0/24")]), "kernel", &[&net]);
    let (a, b) = (Netns::new("ra"), Netns::new("rb"));
    let (_, _ra) = agent.cni("ADD", &net, &a.name, &a.path());
    let (_, rb) = agent.cni("ADD", &net, &b.name, &b.path());
    let veth = host_veth_name(&format!("port_{}_eth0", a.name));
    let ifindex_before =
        std::fs::read_to_string(format!("/sys/class/net/{veth}/ifindex")).expect("ifindex");
    agent.kill9();
    assert_eq!(
        ping(&a.path(), first_ip(&rb), 2),
        2,
        "traffic does not need the agent"
    );
    agent.spawn();
    let ifindex_after =
        std::fs::read_to_string(format!("/sys/class/net/{veth}/ifindex")).expect("ifindex");
    assert_eq!(
        ifindex_before, ifindex_after,
        "the veth was adopted, not recreated"
    );
    assert_eq!(ping(&a.path(), first_ip(&rb), 2), 2);
    assert_eq!(agent.cli(&["verify"]).0, 0, "{}", agent.cli(&["verify"]).1);
    assert_eq!(agent.cni("DEL", &net, &b.name, &b.path()).0, 0);
    assert_eq!(ping(&a.path(), first_ip(&rb), 1), 0);
}

#[test]
fn fifty_concurrent_adds_get_distinct_addresses() {
    if !root("fifty_concurrent_adds_get_distinct_addresses") {
        return;
    }
    let net = unique("many");
    assert!(!link_exists(&bridge_name(&net)));
    let agent = Arc::new(AgentProcess::start(
        &config(&[(&net, "10.205.0.0/24")]),
        "kernel",
        &[&net],
    ));
    let pods: Vec<Arc<Netns>> = (0..50).map(|_| Arc::new(Netns::new("m"))).collect();
    let handles: Vec<_> = pods
        .iter()
        .map(|pod| {
            let agent = Arc::clone(&agent);
            let pod = Arc::clone(pod);
            let net = net.clone();
            std::thread::spawn(move || agent.cni("ADD", &net, &pod.name, &pod.path()))
        })
        .collect();
    let mut addresses = BTreeSet::new();
    for h in handles {
        let (code, r) = h.join().expect("thread");
        assert_eq!(code, 0, "{r}");
        addresses.insert(first_ip(&r));
    }
    assert_eq!(addresses.len(), 50);
    assert!(!addresses.contains(&"10.205.0.1".parse().expect("gw")));
    assert_eq!(
        ping(
            &pods[0].path(),
            first_ip(&agent.cni("ADD", &net, &pods[49].name, &pods[49].path()).1),
            1
        ),
        1
    );
    assert_eq!(agent.cli(&["verify"]).0, 0);
}

#[test]
fn gc_frees_ports_whose_netns_vanished() {
    if !root("gc_frees_ports_whose_netns_vanished") {
        return;
    }
    let net = unique("gc");
    let agent = AgentProcess::start(&config(&[(&net, "10.206.0.0/24")]), "kernel", &[&net]);
    let keep = Netns::new("gk");
    let gone = Netns::new("gg");
    agent.cni("ADD", &net, &keep.name, &keep.path());
    let (_, rg) = agent.cni("ADD", &net, &gone.name, &gone.path());
    let gone_name = gone.name.clone();
    drop(gone); // netns (and with it the veth) deleted behind the agent's back
    let conf = serde_json::json!({"cniVersion":"1.1.0","name":net,"type":"nimbess-cni","agentSocket":agent.socket,
        "cni.dev/valid-attachments":[{"containerID": keep.name, "ifname":"eth0"}]}).to_string();
    let env = std::collections::BTreeMap::from([("CNI_COMMAND", "GC".to_string())]);
    assert_eq!(support::run_plugin(&env, &conf).0, 0);
    let (_, ports) = agent.cli(&["ports", "-o", "json"]);
    assert!(!ports.contains(&gone_name), "{ports}");
    let fresh = Netns::new("gf");
    let (_, rf) = agent.cni("ADD", &net, &fresh.name, &fresh.path());
    assert_eq!(first_ip(&rf), first_ip(&rg), "the address was freed");
    assert_eq!(agent.cli(&["verify"]).0, 0);
}

#[test]
fn acl_by_sighup_reaches_every_port_pipeline_and_spares_other_networks() {
    if !root("acl_by_sighup_reaches_every_port_pipeline_and_spares_other_networks") {
        return;
    }
    let blue = unique("acl");
    let red = unique("aclr");
    let plain = config(&[(&blue, "10.207.0.0/24"), (&red, "10.208.0.0/24")]);
    let agent = AgentProcess::start(&plain, "kernel", &[&blue, &red]);
    let (a, b, c) = (Netns::new("aa"), Netns::new("ab"), Netns::new("ac"));
    let (d, e) = (Netns::new("ad"), Netns::new("ae"));
    let (_, ra) = agent.cni("ADD", &blue, &a.name, &a.path());
    let (_, rb) = agent.cni("ADD", &blue, &b.name, &b.path());
    let (_, rc) = agent.cni("ADD", &blue, &c.name, &c.path());
    agent.cni("ADD", &red, &d.name, &d.path());
    let (_, re) = agent.cni("ADD", &red, &e.name, &e.path());
    assert_eq!(ping(&a.path(), first_ip(&rb), 1), 1);

    // an unrelated ping runs on red while blue's ACL changes
    let (d_path, e_ip) = (d.path(), first_ip(&re));
    let unrelated = std::thread::spawn(move || support::ping_paced(&d_path, e_ip, 40, 25));
    // the rule goes on blue only: insert it after blue's subnet line
    let blue_subnet = "    subnet: 10.207.0.0/24\n";
    let acl = format!(
        "    acl:\n      - action: deny\n        dst: {}/32\n        protocol: icmp\n",
        first_ip(&rb)
    );
    std::fs::write(
        &agent.config,
        plain.replace(blue_subnet, &format!("{blue_subnet}{acl}")),
    )
    .expect("config");
    agent.hup();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    while ping(&a.path(), first_ip(&rb), 1) == 1 {
        assert!(
            std::time::Instant::now() < deadline,
            "ACL never applied\n{}",
            agent.log()
        );
    }
    let tc = |ns: &Netns| {
        let dev = host_veth_name(&format!("port_{}_eth0", ns.name));
        let out = std::process::Command::new("tc")
            .args(["filter", "show", "dev", &dev, "ingress"])
            .output()
            .expect("tc");
        format!("{dev}: {}", String::from_utf8_lossy(&out.stdout))
    };
    assert_eq!(
        ping(&c.path(), first_ip(&rb), 2),
        0,
        "c's pipeline holds the rule too\n{}\n{}\n{}",
        tc(&a),
        tc(&c),
        agent.log()
    );
    // the rule is stateless: anything to b is dropped (echo replies too), the rest flows
    assert_eq!(ping(&c.path(), first_ip(&ra), 2), 2, "c → a is not matched");
    assert_eq!(ping(&a.path(), first_ip(&rc), 2), 2, "a → c is not matched");
    assert_eq!(unrelated.join().expect("ping"), 40, "red lost nothing");
    assert_eq!(agent.cli(&["verify"]), (0, "no drift\n".to_string()));
    let (_, json) = agent.cli(&[
        "pipelines",
        "--port",
        &format!("port_{}_eth0", a.name),
        "-o",
        "json",
    ]);
    assert!(json.contains("ingress filters (1 rules)"), "{json}");
}

#[test]
fn a_frame_to_a_mac_in_no_fib_reaches_no_pod() {
    if !root("a_frame_to_a_mac_in_no_fib_reaches_no_pod") {
        return;
    }
    let net = unique("nofib");
    let agent = AgentProcess::start(&config(&[(&net, "10.209.0.0/24")]), "kernel", &[&net]);
    let (a, b, c) = (Netns::new("na"), Netns::new("nb"), Netns::new("nc"));
    agent.cni("ADD", &net, &a.name, &a.path());
    let (_, rb) = agent.cni("ADD", &net, &b.name, &b.path());
    agent.cni("ADD", &net, &c.name, &c.path());
    assert_eq!(ping(&a.path(), first_ip(&rb), 1), 1);
    // a believes 10.209.0.99 lives at a MAC no FIB holds
    let status = std::process::Command::new("ip")
        .args([
            "-n",
            &a.name,
            "neigh",
            "add",
            "10.209.0.99",
            "lladdr",
            "02:de:ad:be:ef:01",
            "dev",
            "eth0",
            "nud",
            "permanent",
        ])
        .status()
        .expect("ip");
    assert!(status.success());
    let tx = |ns: &Netns| -> u64 {
        let dev = host_veth_name(&format!("port_{}_eth0", ns.name));
        std::fs::read_to_string(format!("/sys/class/net/{dev}/statistics/tx_packets"))
            .expect("stats")
            .trim()
            .parse()
            .expect("number")
    };
    let rx_a = |ns: &Netns| -> u64 {
        let dev = host_veth_name(&format!("port_{}_eth0", ns.name));
        std::fs::read_to_string(format!("/sys/class/net/{dev}/statistics/rx_packets"))
            .expect("stats")
            .trim()
            .parse()
            .expect("number")
    };
    // a's switch reports the network's FIB misses as its drops
    let pa = format!("port_{}_eth0", a.name);
    let misses = || -> u64 {
        let (code, out) = agent.cli(&["pipelines", "--port", &pa, "-o", "json"]);
        assert_eq!(code, 0);
        let v: serde_json::Value = serde_json::from_str(&out).expect("json");
        v[&pa]["modules"]
            .as_array()
            .expect("modules")
            .iter()
            .find(|m| m["id"] == format!("switch.{pa}"))
            .and_then(|m| m["data_plane"]["dropped"].as_u64())
            .unwrap_or_else(|| panic!("switch of {pa} in {v}"))
    };
    let (b0, c0, a0, m0) = (tx(&b), tx(&c), rx_a(&a), misses());
    assert_eq!(ping(&a.path(), "10.209.0.99".parse().expect("ip"), 10), 0);
    assert!(rx_a(&a) >= a0 + 10, "the frames entered a's pipeline");
    assert!(
        misses() >= m0 + 10,
        "the 10 misses are counted: {m0} → {}",
        misses()
    );
    // b and c may see an occasional broadcast, never the 10 unicast frames
    assert!(
        tx(&b) < b0 + 10 && tx(&c) < c0 + 10,
        "b {} → {}, c {} → {}",
        b0,
        tx(&b),
        c0,
        tx(&c)
    );
}
