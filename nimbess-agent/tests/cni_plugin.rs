//! The plugin executed the way a runtime executes it (environment + stdin),
//! against a real agent process running the `sim` driver. What the plugin answers without an
//! agent is tested in its own package (`nimbess-agent/cni/tests/plugin_exec.rs`).

mod support;

use std::collections::BTreeMap;

use support::{AgentProcess, run_plugin};

const CONFIG: &str = "driver: sim\nnetworks:\n  - name: blue\n    subnet: 10.40.0.0/24\n  - name: red\n    subnet: 10.41.0.0/24\n    gateway: 10.41.0.254\n";

fn fake_netns(agent: &AgentProcess, name: &str) -> String {
    let p = agent.dir.join(name);
    std::fs::write(&p, b"").expect("fake netns");
    p.display().to_string()
}

#[test]
fn add_check_del_status_gc_against_the_agent() {
    let agent = AgentProcess::start(CONFIG, "sim", &[]);
    let ns1 = fake_netns(&agent, "ns1");
    let ns2 = fake_netns(&agent, "ns2");

    let (code, a) = agent.cni("ADD", "blue", "c1", &ns1);
    assert_eq!(code, 0, "{a}");
    assert_eq!(a["cniVersion"], "1.1.0");
    assert_eq!(a["ips"][0]["address"], "10.40.0.2/24");
    assert_eq!(a["ips"][0]["gateway"], "10.40.0.1");
    assert_eq!(a["interfaces"][0]["name"], "eth0");
    assert_eq!(a["interfaces"][0]["sandbox"], ns1.as_str());
    assert!(
        a["interfaces"][0]["mac"]
            .as_str()
            .is_some_and(|m| m.len() == 17)
    );
    // the same ADD again: the stored result; on another network: 7
    assert_eq!(agent.cni("ADD", "blue", "c1", &ns1), (0, a.clone()));
    assert_eq!(agent.cni("ADD", "red", "c1", &ns1).1["code"], 7);
    assert_eq!(agent.cni("ADD", "green", "c2", &ns2).1["code"], 7);
    // explicit gateway is skipped by IPAM
    let (_, r) = agent.cni("ADD", "red", "c2", &ns2);
    assert_eq!(r["ips"][0]["address"], "10.41.0.1/24");
    assert_eq!(r["ips"][0]["gateway"], "10.41.0.254");

    assert_eq!(agent.cni("CHECK", "blue", "c1", &ns1).0, 0);
    assert_eq!(agent.cni("CHECK", "blue", "nope", &ns1).1["code"], 3);
    assert_eq!(agent.cni("STATUS", "blue", "", "").0, 0);

    let (code, ports) = agent.cli(&["ports", "-o", "json"]);
    assert_eq!(code, 0);
    let ports: serde_json::Value = serde_json::from_str(&ports).expect("json");
    assert_eq!(ports.as_array().map(Vec::len), Some(2));
    let (code, dot) = agent.cli(&["pipelines", "--port", "port_c1_eth0", "-o", "dot"]);
    assert_eq!(code, 0);
    assert!(dot.starts_with("digraph \"port_c1_eth0\""), "{dot}");
    assert_eq!(agent.cli(&["verify"]).0, 0);

    // DEL: idempotent, also for unknown containers and empty netns
    assert_eq!(
        agent.cni("DEL", "blue", "c1", ""),
        (0, serde_json::Value::Null)
    );
    assert_eq!(agent.cni("DEL", "blue", "c1", "").0, 0);
    assert_eq!(agent.cni("DEL", "blue", "never-added", "/gone").0, 0);
    // the address is free again
    let (_, again) = agent.cni("ADD", "blue", "c3", &ns1);
    assert_eq!(again["ips"][0]["address"], "10.40.0.2/24");

    // GC with an empty list removes every attachment of the network, and only of it
    let gc_conf = serde_json::json!({"cniVersion":"1.1.0","name":"blue","type":"nimbess-cni","agentSocket":agent.socket,"cni.dev/valid-attachments":[]}).to_string();
    let env = BTreeMap::from([("CNI_COMMAND", "GC".to_string())]);
    assert_eq!(run_plugin(&env, &gc_conf).0, 0);
    let (_, ports) = agent.cli(&["ports", "-o", "json"]);
    let ports: serde_json::Value = serde_json::from_str(&ports).expect("json");
    let ids: Vec<_> = ports
        .as_array()
        .expect("list")
        .iter()
        .map(|p| p["id"].clone())
        .collect();
    assert_eq!(ids, vec![serde_json::json!("port_c2_eth0")]);
    // GC without the list is refused
    let no_list = agent.netconf("blue");
    assert_eq!(run_plugin(&env, &no_list).1["code"], 7);
}

#[test]
fn state_survives_kill_9() {
    let mut agent = AgentProcess::start(CONFIG, "sim", &[]);
    let ns = fake_netns(&agent, "ns");
    let (_, first) = agent.cni("ADD", "blue", "k1", &ns);
    agent.kill9();
    agent.spawn();
    assert_eq!(agent.cni("ADD", "blue", "k1", &ns), (0, first));
    assert_eq!(agent.cni("DEL", "blue", "k1", "").0, 0);
    let (_, second) = agent.cni("ADD", "blue", "k2", &ns);
    assert_eq!(
        second["ips"][0]["address"], "10.40.0.2/24",
        "the address was released"
    );
}

#[test]
fn the_socket_and_the_state_are_private_to_the_agents_user() {
    use std::os::unix::fs::PermissionsExt as _;
    let agent = AgentProcess::start(CONFIG, "sim", &["blue", "red"]);
    let mode = |p: &std::path::Path| {
        std::fs::metadata(p)
            .unwrap_or_else(|e| panic!("{}: {e}", p.display()))
            .permissions()
            .mode()
            & 0o777
    };
    assert_eq!(mode(&agent.socket), 0o600, "socket");
    let ns = fake_netns(&agent, "ns");
    let (code, out) = agent.cni("ADD", "blue", "c1", &ns);
    assert_eq!(code, 0, "{out}");
    for file in ["state.json", "state.journal"] {
        assert_eq!(mode(&agent.dir.join("state").join(file)), 0o600, "{file}");
    }
}

#[test]
fn hostile_input_is_refused() {
    let agent = AgentProcess::start(CONFIG, "sim", &["blue", "red"]);
    // the agent's own network namespace is no pod's
    let pid = agent.child.as_ref().expect("running").id();
    let own = format!("/proc/{pid}/ns/net");
    let (code, out) = agent.cni("ADD", "blue", "c1", &own);
    assert_eq!((code, out["code"].as_u64()), (1, Some(4)), "{out}");
    assert!(out["msg"].as_str().unwrap_or("").contains(&own), "{out}");
    let (_, ports) = agent.cli(&["ports", "-o", "json"]);
    assert_eq!(ports.trim(), "[]");
}

#[test]
fn a_service_cidr_overlapping_a_pod_network_is_refused_at_start() {
    let dir = tempfile::tempdir().expect("tmp");
    let config = dir.path().join("agent.yaml");
    std::fs::write(&config, CONFIG).expect("config");
    let out = std::process::Command::new(support::AGENT)
        .args(["serve", "--driver", "sim", "--service-cidr", "10.40.0.0/16"])
        .arg("--config")
        .arg(&config)
        .arg("--socket")
        .arg(dir.path().join("agent.sock"))
        .arg("--state-dir")
        .arg(dir.path().join("state"))
        .output()
        .expect("agent");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert!(
        stderr.contains("service CIDR 10.40.0.0/16 overlaps network blue (10.40.0.0/24)"),
        "{stderr}"
    );
    assert!(!dir.path().join("agent.sock").exists(), "never served");
}
