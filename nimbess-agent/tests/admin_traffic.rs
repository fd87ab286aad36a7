//! AdminNetworkPolicy and BaselineAdminNetworkPolicy through the kernel
//! driver, with real TCP traffic between network namespaces: the agent (in
//! a namespace playing the host) reads Namespaces, Pods, a NetworkPolicy,
//! ANPs and the BANP from `--resources dir:PATH` and renders every pod's
//! tiers in the `ip nimbess-policy` table; pods open connections to each
//! other and see which are answered and which are dropped. Needs root.

mod support;
mod traffic;

use std::net::SocketAddrV4;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use support::{AgentProcess, Netns, first_ip, policy_chains, unique};
use traffic::serve_on;

/// Two namespaces, `shop` and `other`; in `shop` a server (its port 8080
/// named `http`) and a client, in `other` a client (`outsider`) and a pod
/// nothing but the baseline selects (`lone`).
const CLUSTER: &str = "apiVersion: v1\nkind: Namespace\nmetadata: {name: shop, labels: {tier: shop}}\n---\n\
apiVersion: v1\nkind: Namespace\nmetadata: {name: other, labels: {tier: other}}\n---\n\
apiVersion: v1\nkind: Pod\nmetadata: {name: server, namespace: shop, labels: {app: server}}\nspec: {containers: [{name: c, image: x, ports: [{name: http, containerPort: 8080}]}]}\n---\n\
apiVersion: v1\nkind: Pod\nmetadata: {name: client, namespace: shop, labels: {app: client}}\nspec: {containers: [{name: c, image: x}]}\n---\n\
apiVersion: v1\nkind: Pod\nmetadata: {name: outsider, namespace: other, labels: {app: client}}\nspec: {containers: [{name: c, image: x}]}\n---\n\
apiVersion: v1\nkind: Pod\nmetadata: {name: lone, namespace: other, labels: {app: lone}}\nspec: {containers: [{name: c, image: x}]}\n";

/// `shop`'s NetworkPolicy: the server takes pods labelled `app: client`
/// of every namespace on its port named `http` (8080), nothing else.
const ALLOW_CLIENTS: &str = "apiVersion: networking.k8s.io/v1\nkind: NetworkPolicy\nmetadata: {name: allow-clients, namespace: shop}\nspec:\n  podSelector: {matchLabels: {app: server}}\n  policyTypes: [Ingress]\n  ingress:\n  - from: [{namespaceSelector: {}, podSelector: {matchLabels: {app: client}}}]\n    ports: [{protocol: TCP, port: http}]\n";

/// At priority 10, for `shop`'s pods: `other` denied, `shop`'s own pods
/// passed to the NetworkPolicies on TCP 8080 and 9090. At priority 20 an
/// Allow of `shop`'s pods on 9090 the Pass comes before.
const GUARD: &str = "apiVersion: policy.networking.k8s.io/v1alpha1\nkind: AdminNetworkPolicy\nmetadata: {name: guard}\nspec:\n  priority: 10\n  subject: {namespaces: {matchLabels: {tier: shop}}}\n  ingress:\n  - name: no-other\n    action: Deny\n    from: [{namespaces: {matchLabels: {tier: other}}}]\n  - name: shop-to-np\n    action: Pass\n    from: [{namespaces: {matchLabels: {tier: shop}}}]\n    ports: [{portNumber: {protocol: TCP, port: 8080}}, {portNumber: {protocol: TCP, port: 9090}}]\n---\n\
apiVersion: policy.networking.k8s.io/v1alpha1\nkind: AdminNetworkPolicy\nmetadata: {name: later}\nspec:\n  priority: 20\n  subject: {namespaces: {matchLabels: {tier: shop}}}\n  ingress:\n  - name: shop-9090\n    action: Allow\n    from: [{namespaces: {matchLabels: {tier: shop}}}]\n    ports: [{portNumber: {protocol: TCP, port: 9090}}]\n";

/// The baseline for every pod: clients allowed on TCP 9090, everything
/// else from the cluster denied.
const BASELINE: &str = "apiVersion: policy.networking.k8s.io/v1alpha1\nkind: BaselineAdminNetworkPolicy\nmetadata: {name: default}\nspec:\n  subject: {namespaces: {}}\n  ingress:\n  - name: clients-9090\n    action: Allow\n    from: [{pods: {namespaceSelector: {}, podSelector: {matchLabels: {app: client}}}}]\n    ports: [{portNumber: {protocol: TCP, port: 9090}}]\n  - name: no-one-else\n    action: Deny\n    from: [{namespaces: {}}]\n";

/// Write `file` in `dir` with `yaml` (`None`: remove it) and wait until the
/// agent's policy chains are `want`.
fn publish(
    dir: &Path,
    file: &str,
    yaml: Option<&str>,
    host: &str,
    want: &[String],
    agent: &AgentProcess,
) {
    let path = dir.join(file);
    match yaml {
        Some(y) => std::fs::write(&path, y).expect("write resources"),
        None => std::fs::remove_file(&path).expect("remove resources"),
    }
    let mut want = want.to_vec();
    want.sort();
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let have = policy_chains(host);
        if have == want {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "after {file}: policy chains {have:?}, want {want:?}\n{}",
            agent.log()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// One connection from the pod at `from` to `dst`: the answer, "refused"
/// or "timeout". What should answer gets a generous 10 s (a loaded
/// machine); what should not costs the 1 s the drop takes to show.
fn one(from: &Netns, dst: SocketAddrV4, expect_answer: bool) -> String {
    let patience = Duration::from_secs(if expect_answer { 10 } else { 1 });
    traffic::in_netns(&from.path(), move || traffic::answer_within(dst, patience))
}

#[test]
fn admin_policies_decide_before_and_the_baseline_after_the_network_policies() {
    if !support::root(
        "admin_policies_decide_before_and_the_baseline_after_the_network_policies",
        "creates network namespaces, veths, bridges and nftables rules",
    ) {
        return;
    }
    let host = Netns::new("ah");
    let resources = tempfile::tempdir().expect("tempdir");
    let net = unique("an");
    let yaml = format!("driver: kernel\nnetworks:\n  - name: {net}\n    subnet: 10.236.0.0/24\n");
    let prefix = ["ip", "netns", "exec", host.name.as_str()];
    let flag = format!("dir:{}", resources.path().display());
    let agent =
        AgentProcess::start_with(&yaml, "kernel", &[&net], &prefix, &["--resources", &flag]);
    let server = Netns::new("as");
    let client = Netns::new("ac");
    let outsider = Netns::new("ao");
    let lone = Netns::new("al");
    let mut ips = Vec::new();
    for (pod, ns, name) in [
        (&server, "shop", "server"),
        (&client, "shop", "client"),
        (&outsider, "other", "outsider"),
        (&lone, "other", "lone"),
    ] {
        let (code, result) = agent.cni_for_pod("ADD", &net, &pod.name, &pod.path(), (ns, name));
        assert_eq!(code, 0, "{result}\n{}", agent.log());
        ips.push(first_ip(&result));
    }
    let (server_ip, client_ip, outsider_ip, lone_ip) = (ips[0], ips[1], ips[2], ips[3]);
    for pod in [&server, &lone] {
        serve_on(&pod.path(), "8080", 8080);
        serve_on(&pod.path(), "9090", 9090);
    }
    let server_at = |port| SocketAddrV4::new(server_ip, port);
    let lone_at = |port| SocketAddrV4::new(lone_ip, port);
    let chain = |direction: &str, ip| format!("{direction}.{ip}");
    let pass = |ip| format!("in.{ip}.pass");
    let dir = resources.path();

    // the NetworkPolicy alone: every client reaches the server's 8080
    std::fs::write(dir.join("cluster.yaml"), CLUSTER).expect("cluster");
    publish(
        dir,
        "np.yaml",
        Some(ALLOW_CLIENTS),
        &host.name,
        &[chain("in", server_ip)],
        &agent,
    );
    assert_eq!(one(&client, server_at(8080), true), "8080");
    assert_eq!(
        one(&outsider, server_at(8080), true),
        "8080",
        "the NetworkPolicy lets the other namespace's client in"
    );
    assert_eq!(one(&client, server_at(9090), false), "timeout");
    assert_eq!(one(&outsider, lone_at(8080), true), "8080", "lone is open");

    // the ANPs: shop's pods get admin entries and a .pass chain each
    let shop_chains = vec![
        chain("in", server_ip),
        pass(server_ip),
        chain("in", client_ip),
        pass(client_ip),
    ];
    publish(
        dir,
        "anp.yaml",
        Some(GUARD),
        &host.name,
        &shop_chains,
        &agent,
    );
    assert_eq!(
        one(&outsider, server_at(8080), false),
        "timeout",
        "the Deny at priority 10 beats the namespace's allowing NetworkPolicy"
    );
    assert_eq!(
        one(&client, server_at(8080), true),
        "8080",
        "the Pass hands the decision to the NetworkPolicy, which allows"
    );
    assert_eq!(
        one(&client, server_at(9090), false),
        "timeout",
        "the Pass hands the decision to the NetworkPolicy, which isolates \
         (the later ANP's Allow is not reached)"
    );
    assert_eq!(
        one(&server, SocketAddrV4::new(client_ip, 9090), true),
        "refused",
        "a Pass where no NetworkPolicy isolates: the SYN gets to the client \
         (nothing listens there), not dropped"
    );
    assert_eq!(
        one(&outsider, lone_at(8080), true),
        "8080",
        "lone still open"
    );
    assert_eq!(agent.cli(&["verify"]), (0, "no drift\n".to_string()));

    // the baseline: only where nothing else decided
    let mut all_chains = shop_chains.clone();
    all_chains.extend([chain("in", outsider_ip), chain("in", lone_ip)]);
    publish(
        dir,
        "banp.yaml",
        Some(BASELINE),
        &host.name,
        &all_chains,
        &agent,
    );
    assert_eq!(
        one(&client, lone_at(9090), true),
        "9090",
        "the baseline's Allow decides for a pod nothing else selects"
    );
    assert_eq!(
        one(&client, lone_at(8080), false),
        "timeout",
        "the baseline's Deny too"
    );
    assert_eq!(
        one(&client, server_at(8080), true),
        "8080",
        "the NetworkPolicy decided: the baseline's Deny does not apply"
    );
    assert_eq!(
        one(&client, server_at(9090), false),
        "timeout",
        "the NetworkPolicy isolates: the baseline's Allow does not apply"
    );
    assert_eq!(
        one(&outsider, server_at(8080), false),
        "timeout",
        "the ANP's Deny still first"
    );
    assert_eq!(agent.cli(&["verify"]), (0, "no drift\n".to_string()));

    // drift: the server's lower tiers flushed by hand are named and
    // rendered again
    let flushed = pass(server_ip);
    let ok = Command::new("ip")
        .args(["netns", "exec", &host.name, "nft", "flush", "chain", "ip"])
        .args(["nimbess-policy", &flushed])
        .status()
        .expect("nft");
    assert!(ok.success());
    let (code, out) = agent.cli(&["verify"]);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains(&flushed), "{out}");
    assert_eq!(
        agent.cli(&["verify"]),
        (0, "no drift\n".to_string()),
        "repaired"
    );
    assert_eq!(one(&client, server_at(9090), false), "timeout");

    // everything removed: open again
    publish(dir, "banp.yaml", None, &host.name, &shop_chains, &agent);
    publish(
        dir,
        "anp.yaml",
        None,
        &host.name,
        &[chain("in", server_ip)],
        &agent,
    );
    assert_eq!(one(&outsider, server_at(8080), true), "8080");
    publish(dir, "np.yaml", None, &host.name, &[], &agent);
    assert_eq!(one(&client, server_at(9090), true), "9090");
    assert_eq!(one(&client, lone_at(8080), true), "8080");
}
