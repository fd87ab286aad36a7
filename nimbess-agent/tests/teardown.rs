//! `nimbess-agent teardown` and `serve --teardown-on-exit`, as root: an
//! agent in a network namespace of its own with a bridged and a routed
//! network, pods on both (one with an ACL), a Service and a NetworkPolicy;
//! beside it, objects of someone else named and numbered like the agent's
//! as closely as they can be. The teardown leaves nothing of Nimbess in the
//! namespace's links, ip rules, routes and nftables tables, and every
//! foreign object survives.

mod support;

use std::process::Command;
use std::time::{Duration, Instant};

use nimbess_agent::teardown::{AgentLinkKind, agent_link_kind, is_agent_nft_table, is_agent_table};
use support::{AGENT, AgentProcess, Netns, first_ip, unique};

/// Run `args` in the namespace `netns`; (success, stdout, stderr).
fn run_in(netns: &str, args: &[&str]) -> (bool, String, String) {
    let out = Command::new("ip")
        .args(["netns", "exec", netns])
        .args(args)
        .output()
        .expect("ip netns exec");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn must(netns: &str, args: &[&str]) {
    let (ok, _, err) = run_in(netns, args);
    assert!(ok, "{args:?} in {netns}: {err}");
}

/// What the namespace holds, one object a line, in the words of `ip` and `nft`.
struct Snapshot {
    links: Vec<String>,
    tables: Vec<String>,
    rules: Vec<String>,
    routes: Vec<String>,
}

impl Snapshot {
    fn of(netns: &str) -> Snapshot {
        let lines = |args: &[&str]| -> Vec<String> {
            let (ok, out, err) = run_in(netns, args);
            assert!(ok, "{args:?}: {err}");
            out.lines().map(str::to_string).collect()
        };
        let mut rules = lines(&["ip", "-4", "rule", "show"]);
        rules.extend(lines(&["ip", "-6", "rule", "show"]));
        let mut routes = lines(&["ip", "-4", "route", "show", "table", "all"]);
        routes.extend(lines(&["ip", "-6", "route", "show", "table", "all"]));
        Snapshot {
            links: lines(&["ip", "-o", "-d", "link", "show"]),
            tables: lines(&["nft", "list", "tables"]),
            rules,
            routes,
        }
    }

    /// Every line that is the agent's (by name and kind, table number or
    /// table name).
    fn of_nimbess(&self) -> Vec<String> {
        let mut out = Vec::new();
        for line in &self.links {
            // "7: nb0123456789: <…> … \    bridge …" (a veth's name carries "@peer")
            let name = line.split(": ").nth(1).unwrap_or_default();
            let name = name.split('@').next().unwrap_or_default();
            let kind = match agent_link_kind(name) {
                Some(AgentLinkKind::Bridge) => " bridge ",
                Some(AgentLinkKind::Veth) => " veth ",
                Some(AgentLinkKind::Vxlan) => " vxlan ",
                None => continue,
            };
            if line.contains(kind) {
                out.push(line.clone());
            }
        }
        for line in &self.tables {
            // "table ip nimbess-svc"
            let words: Vec<&str> = line.split_whitespace().collect();
            if let [_, family, name] = words.as_slice()
                && is_agent_nft_table(family, name)
            {
                out.push(line.clone());
            }
        }
        for line in self.rules.iter().chain(&self.routes) {
            let table = line
                .split_whitespace()
                .skip_while(|w| *w != "table" && *w != "lookup")
                .nth(1)
                .and_then(|t| t.parse::<u32>().ok());
            if table.is_some_and(is_agent_table) {
                out.push(line.clone());
            }
        }
        out
    }

    fn has_link(&self, name: &str) -> bool {
        self.links
            .iter()
            .filter_map(|l| l.split(": ").nth(1))
            .any(|n| n.split('@').next() == Some(name))
    }

    fn text(&self) -> String {
        [&self.links, &self.tables, &self.rules, &self.routes]
            .iter()
            .flat_map(|v| v.iter())
            .cloned()
            .collect::<Vec<_>>()
            .join("\n")
    }
}

/// Objects of someone else in `netns`, as close to the agent's as can be.
fn foreign_objects(netns: &str) {
    // a veth with a bridge's name: the kind says it is not the agent's
    must(
        netns,
        &[
            "ip",
            "link",
            "add",
            "nb0123456789",
            "type",
            "veth",
            "peer",
            "name",
            "foreignpeer",
        ],
    );
    must(netns, &["ip", "link", "add", "nbforeign", "type", "bridge"]);
    must(netns, &["ip", "link", "set", "nbforeign", "up"]);
    must(
        netns,
        &["ip", "addr", "add", "192.0.2.1/24", "dev", "nbforeign"],
    );
    must(
        netns,
        &[
            "ip",
            "rule",
            "add",
            "to",
            "198.51.100.0/24",
            "lookup",
            "100",
            "priority",
            "1000",
        ],
    );
    must(
        netns,
        &[
            "ip",
            "route",
            "add",
            "198.51.100.0/24",
            "dev",
            "nbforeign",
            "table",
            "100",
        ],
    );
    must(netns, &["nft", "add", "table", "ip", "nimbessy"]);
    must(netns, &["nft", "add", "table", "netdev", "keepme"]);
    must(netns, &["nft", "add", "table", "inet", "filter"]);
}

fn foreign_objects_survive(snap: &Snapshot) {
    let text = snap.text();
    assert!(
        snap.has_link("nb0123456789"),
        "the foreign veth named like a bridge went:\n{text}"
    );
    assert!(
        snap.has_link("nbforeign"),
        "the foreign bridge went:\n{text}"
    );
    assert!(
        snap.rules.iter().any(|r| r.contains("lookup 100")),
        "the foreign rule went:\n{text}"
    );
    assert!(
        snap.routes
            .iter()
            .any(|r| r.contains("198.51.100.0/24") && r.contains("table 100")),
        "the foreign route went:\n{text}"
    );
    for table in [
        "table ip nimbessy",
        "table netdev keepme",
        "table inet filter",
    ] {
        assert!(
            snap.tables.iter().any(|t| t == table),
            "{table} went:\n{text}"
        );
    }
}

/// Wait until `done` holds for the namespace's snapshot.
fn wait_for(netns: &str, what: &str, agent: &AgentProcess, done: impl Fn(&Snapshot) -> bool) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let snap = Snapshot::of(netns);
        if done(&snap) {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{what} not seen within 30 s:\n{}\nlog:\n{}",
            snap.text(),
            agent.log()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn teardown_removes_everything_of_nimbess_and_nothing_else() {
    if !support::root(
        "teardown_removes_everything_of_nimbess_and_nothing_else",
        "creates network namespaces, links, rules and nftables tables",
    ) {
        return;
    }
    let host = Netns::new("tdh");
    foreign_objects(&host.name);
    let (bridged, routed) = (unique("tdb"), unique("tdr"));
    let yaml = format!(
        "driver: kernel\nnetworks:\n\
         \x20 - name: {bridged}\n    subnet: 10.236.0.0/24\n    acl:\n      - action: deny\n        dst: 10.236.0.250/32\n        protocol: icmp\n\
         \x20 - name: {routed}\n    subnet: 10.237.0.0/24\n    kind: l3\n"
    );
    let resources = tempfile::tempdir().expect("tempdir");
    let flag = format!("dir:{}", resources.path().display());
    let prefix = ["ip", "netns", "exec", host.name.as_str()];
    let mut agent = AgentProcess::start_with(
        &yaml,
        "kernel",
        &[&bridged, &routed],
        &prefix,
        &["--resources", &flag, "--teardown-on-exit"],
    );
    let pods: Vec<Netns> = (0..3).map(|_| Netns::new("tdp")).collect();
    let mut server_ip = None;
    for (i, pod) in pods.iter().enumerate() {
        let network = if i == 2 { &routed } else { &bridged };
        let name = format!("pod{i}");
        let (code, result) =
            agent.cni_for_pod("ADD", network, &pod.name, &pod.path(), ("default", &name));
        assert_eq!(code, 0, "ADD {name}: {result}\nlog:\n{}", agent.log());
        server_ip.get_or_insert(first_ip(&result));
    }
    let server_ip = server_ip.expect("a pod");
    std::fs::write(
        resources.path().join("objects.yaml"),
        format!(
            "kind: Service\napiVersion: v1\nmetadata: {{name: web, namespace: default}}\nspec: {{clusterIP: 10.96.0.10, ports: [{{port: 80, targetPort: 8080}}]}}\n---\n\
             kind: EndpointSlice\napiVersion: discovery.k8s.io/v1\nmetadata: {{name: web-1, namespace: default, labels: {{kubernetes.io/service-name: web}}}}\naddressType: IPv4\nports: [{{port: 8080}}]\nendpoints: [{{addresses: [\"{server_ip}\"]}}]\n---\n\
             apiVersion: v1\nkind: Pod\nmetadata: {{name: pod0, namespace: default}}\nspec: {{containers: [{{name: c, image: x}}]}}\n---\n\
             kind: NetworkPolicy\napiVersion: networking.k8s.io/v1\nmetadata: {{name: deny-all, namespace: default}}\nspec: {{podSelector: {{}}, policyTypes: [Ingress]}}\n"
        ),
    )
    .expect("resources");
    let rendered = |s: &Snapshot| {
        let nimbess = s.of_nimbess().join("\n");
        [
            "table ip nimbess-svc",
            "table ip nimbess-policy",
            "table ip nimbess\n",
            "table netdev nv",
        ]
        .iter()
        .all(|t| format!("{nimbess}\n").contains(t))
            && s.rules.iter().any(|r| r.contains("iif nv"))
    };
    wait_for(&host.name, "the agent's data plane", &agent, rendered);
    let before = Snapshot::of(&host.name);
    let ours = before.of_nimbess();
    // two bridges' worth of sinks, three veths, a routed table: the test sees all kinds
    for kind in [" bridge ", " veth "] {
        assert!(
            ours.iter().any(|l| l.contains(kind)),
            "no {kind} link:\n{}",
            before.text()
        );
    }
    assert!(
        ours.iter().any(|l| l.contains("unreachable")),
        "no route of the routed network's table:\n{}",
        before.text()
    );

    // refused while the agent serves
    let socket = agent.socket.display().to_string();
    let (ok, _, err) = run_in(&host.name, &[AGENT, "teardown", "--socket", &socket]);
    assert!(!ok, "teardown ran beside a serving agent");
    assert!(err.contains("an agent is serving on"), "{err}");
    assert!(Snapshot::of(&host.name).of_nimbess().len() >= ours.len());

    // killed: the data plane stays until the teardown
    agent.kill9();
    assert_eq!(Snapshot::of(&host.name).of_nimbess().len(), ours.len());
    let (ok, out, err) = run_in(&host.name, &[AGENT, "teardown", "--socket", &socket]);
    assert!(ok, "teardown failed: {err}\n{out}");
    assert!(out.contains("removed link nb"), "{out}");
    assert!(
        out.contains("removed nftables table ip nimbess-svc"),
        "{out}"
    );
    let after = Snapshot::of(&host.name);
    assert_eq!(
        after.of_nimbess(),
        Vec::<String>::new(),
        "left:\n{}",
        after.text()
    );
    foreign_objects_survive(&after);
    // the pods' ends of the veths went with them
    for pod in &pods {
        let (ok, links, err) = run_in(&pod.name, &["ip", "-o", "link", "show"]);
        assert!(ok, "{err}");
        assert!(
            !links.contains("eth0"),
            "pod {} kept eth0:\n{links}",
            pod.name
        );
    }
    // again: nothing to do
    let (ok, out, err) = run_in(
        &host.name,
        &[AGENT, "teardown", "--socket", &socket, "-o", "json"],
    );
    assert!(ok, "{err}");
    assert_eq!(out.trim(), "[]");

    // started again on its state, the agent renders its data plane anew;
    // SIGTERM with --teardown-on-exit takes it down
    agent.spawn();
    wait_for(&host.name, "the data plane rendered again", &agent, |s| {
        let nimbess = s.of_nimbess().join("\n");
        nimbess.contains("table ip nimbess-svc") && nimbess.contains(" bridge ")
    });
    let mut child = agent.child.take().expect("the agent");
    let pid = child.id().to_string();
    assert!(
        Command::new("kill")
            .args(["-TERM", &pid])
            .status()
            .expect("kill")
            .success()
    );
    let status = child.wait().expect("wait for the agent");
    assert!(
        status.success(),
        "the agent exited {status}; log:\n{}",
        agent.log()
    );
    let after = Snapshot::of(&host.name);
    assert_eq!(
        after.of_nimbess(),
        Vec::<String>::new(),
        "left after SIGTERM:\n{}\nlog:\n{}",
        after.text(),
        agent.log()
    );
    foreign_objects_survive(&after);
}
