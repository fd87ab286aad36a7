//! The kernel driver's host prerequisites: none but the kernel. An agent
//! whose `PATH` holds no program at all (so no `nft`) renders a Service
//! and a NetworkPolicy and reads them back for `verify`, all over netlink;
//! `nft`, run by the test, only observes the tables. Needs root.

mod support;
mod traffic;

use std::process::Command;
use std::time::{Duration, Instant};

use support::{AgentProcess, Netns, first_ip, unique};
use traffic::in_netns;

/// `nft -j list table ip TABLE` in the namespace at `netns` (empty: no
/// such table).
fn listing(netns: &str, table: &'static str) -> String {
    in_netns(netns, move || {
        let out = Command::new("nft")
            .args(["-j", "list", "table", "ip", table])
            .output()
            .expect("run nft (the test's observer)");
        String::from_utf8_lossy(&out.stdout).into_owned()
    })
}

#[test]
fn the_kernel_driver_renders_services_and_policies_with_no_program_on_path() {
    if !support::root(
        "the_kernel_driver_renders_services_and_policies_with_no_program_on_path",
        "creates a network namespace, a bridge and nftables tables",
    ) {
        return;
    }
    let host = Netns::new("np");
    let resources = tempfile::tempdir().expect("tempdir");
    let empty = tempfile::tempdir().expect("an empty PATH directory");
    let net = unique("nq");
    let yaml = format!("driver: kernel\nnetworks:\n  - name: {net}\n    subnet: 10.234.0.0/24\n");
    let path = format!("PATH={}", empty.path().display());
    let prefix = ["ip", "netns", "exec", host.name.as_str(), "env", &path];
    let flag = format!("dir:{}", resources.path().display());
    let agent =
        AgentProcess::start_with(&yaml, "kernel", &[&net], &prefix, &["--resources", &flag]);
    let pod = Netns::new("nr");
    let (_, result) = agent.cni_for_pod("ADD", &net, &pod.name, &pod.path(), ("default", "server"));
    let pod_ip = first_ip(&result);
    std::fs::write(
        resources.path().join("objects.yaml"),
        format!(
            "kind: Service\napiVersion: v1\nmetadata: {{name: web, namespace: default}}\nspec: {{clusterIP: 10.96.0.10, ports: [{{port: 80, targetPort: 8080}}]}}\n---\n\
             kind: EndpointSlice\napiVersion: discovery.k8s.io/v1\nmetadata: {{name: web-1, namespace: default, labels: {{kubernetes.io/service-name: web}}}}\naddressType: IPv4\nports: [{{port: 8080}}]\nendpoints: [{{addresses: [\"{pod_ip}\"]}}]\n---\n\
             apiVersion: v1\nkind: Pod\nmetadata: {{name: server, namespace: default}}\nspec: {{containers: [{{name: c, image: x}}]}}\n---\n\
             kind: NetworkPolicy\napiVersion: networking.k8s.io/v1\nmetadata: {{name: deny-all, namespace: default}}\nspec: {{podSelector: {{}}, policyTypes: [Ingress]}}\n"
        ),
    )
    .expect("resources");
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let services = listing(&host.path(), "nimbess-svc");
        let policy = listing(&host.path(), "nimbess-policy");
        if services.contains("be.default.web.tcp.80")
            && services.contains(&pod_ip.to_string())
            && policy.contains(&format!("in.{pod_ip}"))
        {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the Service and the policy were not rendered within 30 s\nservices: {services}\npolicy: {policy}\nlog:\n{}",
            agent.log()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let (code, out) = agent.cli(&["verify"]);
    assert_eq!(code, 0, "verify reads the tables back over netlink: {out}");
    let log = agent.log();
    assert!(
        !log.contains("No such file or directory"),
        "the agent tried to run a program: {log}"
    );
}
