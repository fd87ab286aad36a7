//! What a container runtime without GC leaves behind: ports whose network
//! namespace vanished (their DEL failed while the agent was down, or never
//! came), and repeat ADDs for a restarted container in a new namespace.
//! Real namespaces, the kernel driver, the plugin executed as a runtime
//! does. Needs root; skipped loudly otherwise.

mod support;

use std::process::Command;
use std::time::{Duration, Instant};

use support::{AgentProcess, Netns, first_ip, ping, unique};

fn root(test: &str) -> bool {
    support::root(test, "creates network namespaces, veths and bridges")
}

fn config(network: &str, subnet: &str) -> String {
    format!("driver: kernel\nnetworks:\n  - name: {network}\n    subnet: {subnet}\n")
}

/// Remove a namespace the way a runtime does when a container stops.
fn remove_netns(ns: &Netns) {
    let ok = Command::new("ip")
        .args(["netns", "del", &ns.name])
        .status()
        .expect("ip netns del");
    assert!(ok.success(), "ip netns del {}", ns.name);
}

/// Containers with a port, as `nimbess-agent ports` lists them.
fn containers(agent: &AgentProcess) -> Vec<String> {
    let (code, out) = agent.cli(&["ports", "-o", "json"]);
    assert_eq!(code, 0, "{out}");
    let ports: Vec<serde_json::Value> = serde_json::from_str(&out).expect("json");
    let mut ids: Vec<String> = ports
        .iter()
        .filter_map(|p| p["container_id"].as_str().map(str::to_string))
        .collect();
    ids.sort();
    ids
}

fn sorted<const N: usize>(ids: [String; N]) -> Vec<String> {
    let mut ids = ids.to_vec();
    ids.sort();
    ids
}

fn has_eth0(ns: &str) -> bool {
    Command::new("ip")
        .args(["netns", "exec", ns, "ip", "-o", "link", "show", "eth0"])
        .output()
        .expect("ip netns exec")
        .status
        .success()
}

/// A pod of `kind` network vanishes while the agent is down, next to a pod
/// that lives on; after the restart an ADD succeeds with the freed address
/// and the pods talk.
fn a_pod_vanishes_while_the_agent_is_down(test: &str, kind: &str, subnet: &str) {
    if !root(test) {
        return;
    }
    let net = unique("st");
    let yaml = format!(
        "driver: kernel\nnetworks:\n  - name: {net}\n    subnet: {subnet}\n    kind: {kind}\n"
    );
    let mut agent = AgentProcess::start(&yaml, "kernel", &[&net]);
    let (ctr_x, ctr_a, ctr_b) = (unique("cx"), unique("ca"), unique("cb"));
    let (x, a) = (Netns::new("sx"), Netns::new("sa"));
    let (code, rx) = agent.cni("ADD", &net, &ctr_x, &x.path());
    assert_eq!(code, 0, "{rx}\n{}", agent.log());
    let (code, ra) = agent.cni("ADD", &net, &ctr_a, &a.path());
    assert_eq!(code, 0, "{ra}");

    // the agent is down while the runtime gives up on its DEL and removes the netns
    agent.kill9();
    remove_netns(&a);
    agent.spawn();

    let b = Netns::new("sb");
    let (code, rb) = agent.cni("ADD", &net, &ctr_b, &b.path());
    assert_eq!(code, 0, "ADD next to a dead port: {rb}\n{}", agent.log());
    assert_eq!(
        first_ip(&rb),
        first_ip(&ra),
        "the dead port's address was freed at start"
    );
    assert_eq!(containers(&agent), sorted([ctr_b, ctr_x]));
    assert_eq!(ping(&b.path(), first_ip(&rx), 2), 2, "b and x talk");
    assert_eq!(agent.cli(&["verify"]), (0, "no drift\n".to_string()));
}

#[test]
fn an_add_after_a_pod_vanished_while_the_agent_was_down_succeeds_and_reuses_its_address() {
    a_pod_vanishes_while_the_agent_is_down(
        "an_add_after_a_pod_vanished_while_the_agent_was_down_succeeds_and_reuses_its_address",
        "l2",
        "10.210.0.0/24",
    );
}

#[test]
fn the_same_on_a_routed_network() {
    a_pod_vanishes_while_the_agent_is_down("the_same_on_a_routed_network", "l3", "10.214.0.0/24");
}

#[test]
fn a_pod_whose_netns_vanished_is_freed_by_the_next_add_and_by_the_periodic_reaper() {
    let test = "a_pod_whose_netns_vanished_is_freed_by_the_next_add_and_by_the_periodic_reaper";
    if !root(test) {
        return;
    }
    let (blue, red) = (unique("sr"), unique("sr"));
    let yaml = format!(
        "driver: kernel\nnetworks:\n  - name: {blue}\n    subnet: 10.211.0.0/24\n  - name: {red}\n    subnet: 10.212.0.0/24\n"
    );
    let agent = AgentProcess::start_with(
        &yaml,
        "kernel",
        &[&blue, &red],
        &[],
        &["--reap-interval", "1"],
    );
    let (ctr_a, ctr_b, ctr_c, ctr_r) = (unique("ca"), unique("cb"), unique("cc"), unique("cr"));
    let (a, b) = (Netns::new("sa"), Netns::new("sb"));
    let (code, ra) = agent.cni("ADD", &blue, &ctr_a, &a.path());
    assert_eq!(code, 0, "{ra}\n{}", agent.log());
    let (code, rb) = agent.cni("ADD", &blue, &ctr_b, &b.path());
    assert_eq!(code, 0, "{rb}");

    // b's netns goes with the agent up; no DEL ever comes
    remove_netns(&b);
    let c = Netns::new("sc");
    let (code, rc) = agent.cni("ADD", &blue, &ctr_c, &c.path());
    assert_eq!(code, 0, "ADD next to a dead port: {rc}\n{}", agent.log());
    assert_eq!(first_ip(&rc), first_ip(&rb), "b's address is free again");
    assert_eq!(ping(&a.path(), first_ip(&rc), 2), 2, "a and c talk");

    // on another network nothing ADDs: the reaper frees the dead port
    let r = Netns::new("sr");
    let (code, rr) = agent.cni("ADD", &red, &ctr_r, &r.path());
    assert_eq!(code, 0, "{rr}");
    remove_netns(&r);
    let deadline = Instant::now() + Duration::from_secs(10);
    while containers(&agent).contains(&ctr_r) {
        assert!(
            Instant::now() < deadline,
            "dead port not reaped\n{}",
            agent.log()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    assert_eq!(containers(&agent), sorted([ctr_a, ctr_c]));
    assert_eq!(agent.cli(&["verify"]), (0, "no drift\n".to_string()));
}

#[test]
fn a_repeat_add_into_a_new_netns_plugs_the_pod_again() {
    let test = "a_repeat_add_into_a_new_netns_plugs_the_pod_again";
    if !root(test) {
        return;
    }
    let net = unique("sp");
    let agent = AgentProcess::start(&config(&net, "10.213.0.0/24"), "kernel", &[&net]);
    let (ctr, ctr_peer) = (unique("c"), unique("cp"));
    let peer = Netns::new("sp");
    let (code, rp) = agent.cni("ADD", &net, &ctr_peer, &peer.path());
    assert_eq!(code, 0, "{rp}\n{}", agent.log());

    let first = Netns::new("s1");
    let (code, r1) = agent.cni("ADD", &net, &ctr, &first.path());
    assert_eq!(code, 0, "{r1}");
    // the same ADD again is answered from the state
    let (code, again) = agent.cni("ADD", &net, &ctr, &first.path());
    assert_eq!((code, &again), (0, &r1));

    // `podman start` of a stopped container: same id and ifname, a new netns
    remove_netns(&first);
    let second = Netns::new("s2");
    let (code, r2) = agent.cni("ADD", &net, &ctr, &second.path());
    assert_eq!(code, 0, "{r2}\n{}", agent.log());
    assert_eq!(r2["interfaces"][0]["sandbox"], second.path().as_str());
    assert!(has_eth0(&second.name), "eth0 in the new netns");
    assert_eq!(
        ping(&second.path(), first_ip(&rp), 2),
        2,
        "the pod talks again"
    );

    // the same path, another namespace behind it (removed and created again)
    remove_netns(&second);
    let ok = Command::new("ip")
        .args(["netns", "add", &second.name])
        .status()
        .expect("ip netns add");
    assert!(ok.success());
    let (code, r3) = agent.cni("ADD", &net, &ctr, &second.path());
    assert_eq!(code, 0, "{r3}\n{}", agent.log());
    assert!(
        has_eth0(&second.name),
        "eth0 in the namespace behind the old path"
    );
    assert_eq!(ping(&second.path(), first_ip(&rp), 2), 2);
    assert_eq!(containers(&agent), sorted([ctr, ctr_peer]));
    assert_eq!(agent.cli(&["verify"]), (0, "no drift\n".to_string()));
}
