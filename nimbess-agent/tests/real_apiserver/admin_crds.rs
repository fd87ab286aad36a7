//! The AdminNetworkPolicy and BaselineAdminNetworkPolicy CRDs of
//! `deploy/admin-network-policies.yaml` on the real kube-apiserver: every
//! field kept, the API's limits enforced, an ANP on the server followed by
//! the agent with only its manifest's access and named by `explain --kube`.

use super::*;

/// The CRDs of `deploy/admin-network-policies.yaml`.
const CRDS: &str = "deploy/admin-network-policies.yaml";

/// Apply [`CRDS`] as `admin` (kept when a test of this binary applied
/// them already) and wait until the server serves both kinds.
fn apply_crds(rt: &Runtime, admin: &kube::Client) {
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/deploy/admin-network-policies.yaml"
    );
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("reading {path}: {e}"));
    let crds: Api<CustomResourceDefinition> = Api::all(admin.clone());
    let mut names = Vec::new();
    for doc in serde_norway::Deserializer::from_str(&text) {
        let value = <Value as serde::Deserialize>::deserialize(doc).expect("a YAML document");
        let crd: CustomResourceDefinition = from_json(value);
        let name = crd.metadata.name.clone().expect("a CRD's name");
        match rt.block_on(crds.create(&PostParams::default(), &crd)) {
            Ok(_) => {}
            Err(kube::Error::Api(s)) if s.code == 409 => {}
            Err(e) => panic!("{CRDS}: the server refused CRD {name}: {e}"),
        }
        names.push(name);
    }
    assert_eq!(names.len(), 2, "{CRDS}: {names:?}");
    let deadline = Instant::now() + PATIENCE;
    for name in &names {
        loop {
            let crd = rt.block_on(crds.get(name)).expect("get the CRD");
            let established = crd
                .status
                .and_then(|s| s.conditions)
                .unwrap_or_default()
                .iter()
                .any(|c| c.type_ == "Established" && c.status == "True");
            if established {
                break;
            }
            assert!(Instant::now() < deadline, "CRD {name} never established");
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

/// The API of `kind` (`AdminNetworkPolicy`, `BaselineAdminNetworkPolicy`) as untyped objects.
fn admin_api(client: &kube::Client, kind: &str) -> Api<kube::api::DynamicObject> {
    let gvk = kube::api::GroupVersionKind::gvk("policy.networking.k8s.io", "v1alpha1", kind);
    let plural = format!("{}ies", kind.to_lowercase().trim_end_matches('y'));
    Api::all_with(
        client.clone(),
        &kube::api::ApiResource::from_gvk_with_plural(&gvk, &plural),
    )
}

/// An ANP using every field of the API (every peer and port form, both
/// directions), with nothing left for the server to default.
fn every_field(name: &str, ns: &str) -> Value {
    let pods = json!({"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": ns}},
                      "podSelector": {"matchExpressions": [{"key": "role", "operator": "In", "values": ["server"]}]}});
    json!({
        "apiVersion": "policy.networking.k8s.io/v1alpha1", "kind": "AdminNetworkPolicy",
        "metadata": {"name": name},
        "spec": {
            "priority": 900,
            "subject": {"pods": pods},
            "ingress": [{
                "name": "from-everywhere", "action": "Pass",
                "from": [{"namespaces": {"matchLabels": {"kubernetes.io/metadata.name": ns}}},
                         {"pods": pods}],
                "ports": [{"portNumber": {"protocol": "UDP", "port": 53}},
                          {"namedPort": "http"},
                          {"portRange": {"protocol": "SCTP", "start": 9000, "end": 9100}}],
            }],
            "egress": [{
                "name": "to-nodes-and-networks", "action": "Allow",
                "to": [{"nodes": {"matchExpressions": [{"key": "node-role.kubernetes.io/control-plane", "operator": "Exists"}]}},
                       {"networks": ["192.0.2.0/24", "198.51.100.0/24"]}],
                "ports": [{"portNumber": {"protocol": "TCP", "port": 443}}],
            }],
        },
    })
}

#[test]
fn the_admin_policy_crds_keep_every_field_and_the_agent_follows_an_anp_from_the_server() {
    let test =
        "the_admin_policy_crds_keep_every_field_and_the_agent_follows_an_anp_from_the_server";
    if !support::root(test, "creates network namespaces, veths and nftables rules") {
        return;
    }
    let Some(kube) = server(test) else {
        return;
    };
    let rt = Runtime::new().expect("runtime");
    let _entered = rt.enter();
    let endpoint = kube.endpoint();
    let admin = endpoint.client().expect("admin client");
    apply_crds(&rt, &admin);
    let anps = admin_api(&admin, "AdminNetworkPolicy");
    let banps = admin_api(&admin, "BaselineAdminNetworkPolicy");
    let ns = unique("na");

    // every field comes back as sent: the schema prunes nothing
    let roundtrip = unique("every");
    let sent = every_field(&roundtrip, &ns);
    let object: kube::api::DynamicObject = from_json(sent.clone());
    rt.block_on(anps.create(&PostParams::default(), &object))
        .unwrap_or_else(|e| panic!("the server refused an ANP of every field: {e}"));
    let back = rt.block_on(anps.get(&roundtrip)).expect("get it back");
    assert_eq!(
        back.data["spec"], sent["spec"],
        "the server changed the spec"
    );
    rt.block_on(anps.delete(&roundtrip, &DeleteParams::default()))
        .expect("delete it");

    // and the API's limits hold
    let refused = |api: &Api<kube::api::DynamicObject>, value: Value, field: &str| {
        let object: kube::api::DynamicObject = from_json(value);
        match rt.block_on(api.create(&PostParams::default(), &object)) {
            Err(kube::Error::Api(s)) => {
                assert_eq!(s.code, 422, "{s:?}");
                assert!(s.message.contains(field), "{field}: {}", s.message);
            }
            other => panic!("accepted, wanted refused on {field}: {other:?}"),
        }
    };
    let mut bad = every_field(&unique("bad"), &ns);
    bad["spec"]["priority"] = json!(1001);
    refused(&anps, bad, "spec.priority");
    let mut bad = every_field(&unique("bad"), &ns);
    bad["spec"]["ingress"][0]["action"] = json!("Drop");
    refused(&anps, bad, "spec.ingress[0].action");
    let mut bad = every_field(&unique("bad"), &ns);
    bad["spec"]["ingress"][0]["from"][0]["pods"] = bad["spec"]["subject"]["pods"].clone();
    refused(&anps, bad, "spec.ingress[0].from[0]");
    let mut banp = every_field("not-default", &ns);
    banp["kind"] = json!("BaselineAdminNetworkPolicy");
    banp["spec"]
        .as_object_mut()
        .expect("spec")
        .remove("priority");
    banp["spec"]["ingress"][0]["action"] = json!("Allow");
    refused(&banps, banp, "default");

    // the agent, with its manifest's access only, follows an ANP from the server
    let yaml = manifest_text();
    let credentials = rt
        .block_on(endpoint.apply_access(MANIFEST, &yaml, ACCOUNT))
        .unwrap_or_else(|e| panic!("applying {MANIFEST}'s access: {e}"));
    let namespace: Namespace = from_json(json!({"metadata": {"name": ns}}));
    rt.block_on(Api::<Namespace>::all(admin.clone()).create(&PostParams::default(), &namespace))
        .expect("create the namespace");
    let account: ServiceAccount =
        from_json(json!({"metadata": {"name": "default", "namespace": ns}}));
    rt.block_on(
        Api::<ServiceAccount>::namespaced(admin.clone(), &ns)
            .create(&PostParams::default(), &account),
    )
    .expect("create the namespace's default ServiceAccount");
    let host = Netns::new("rh");
    relay_api_into(&rt, &host, endpoint.addr());
    let dir = tempfile::tempdir().expect("tempdir");
    let kubeconfig = support::write(dir.path(), "kubeconfig", &credentials.kubeconfig);
    let env = format!("KUBECONFIG={}", kubeconfig.display());
    let net = unique("rn");
    let config = format!("driver: kernel\nnetworks:\n  - name: {net}\n    subnet: 10.242.0.0/24\n");
    let prefix = [
        "ip",
        "netns",
        "exec",
        host.name.as_str(),
        "env",
        env.as_str(),
    ];
    let agent = AgentProcess::start_with(&config, "kernel", &[&net], &prefix, &["--kube"]);
    let pods_api: Api<Pod> = Api::namespaced(admin.clone(), &ns);
    let mut pods = Vec::new();
    let mut ips = Vec::new();
    for (name, role) in [("server", "server"), ("client", "client")] {
        rt.block_on(pods_api.create(&PostParams::default(), &pod(&ns, name, role)))
            .unwrap_or_else(|e| panic!("create Pod {name}: {e}"));
        let netns = Netns::new("rp");
        let (code, result) =
            agent.cni_for_pod("ADD", &net, &netns.name, &netns.path(), (&ns, name));
        assert_eq!(code, 0, "ADD {name}: {result}\n{}", agent.log());
        ips.push(first_ip(&result));
        pods.push(netns);
    }
    let (server_ip, client_ip) = (ips[0], ips[1]);
    traffic::serve_on(&pods[0].path(), "server", 8080);
    let to_server = SocketAddrV4::new(server_ip, 8080);
    let ask = |patience| {
        traffic::in_netns(&pods[1].path(), move || {
            traffic::answer_within(to_server, patience)
        })
    };
    assert_eq!(ask(Duration::from_secs(10)), "server");

    let guard = unique("guard");
    let deny: kube::api::DynamicObject = from_json(json!({
        "apiVersion": "policy.networking.k8s.io/v1alpha1", "kind": "AdminNetworkPolicy",
        "metadata": {"name": guard},
        "spec": {
            "priority": 20,
            "subject": {"pods": {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": ns}},
                                 "podSelector": {"matchLabels": {"role": "server"}}}},
            "ingress": [{"name": "no-clients", "action": "Deny",
                         "from": [{"pods": {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": ns}},
                                            "podSelector": {"matchLabels": {"role": "client"}}}}],
                         "ports": [{"namedPort": "http"}]}],
        },
    }));
    rt.block_on(anps.create(&PostParams::default(), &deny))
        .expect("create the ANP");
    let chain = format!("in.{server_ip}");
    wait_until("the ANP's chain", &agent, || {
        policy_chains(&host.name).contains(&chain)
    });
    assert_eq!(ask(Duration::from_secs(1)), "timeout");

    // explain --kube, in the host namespace with the agent's credentials, names the ANP's rule
    let out = Command::new("ip")
        .args([
            "netns",
            "exec",
            &host.name,
            "env",
            &env,
            support::AGENT,
            "explain",
        ])
        .args([
            &format!("{ns}/client"),
            &format!("{ns}/server"),
            "8080",
            "--kube",
            "--live",
        ])
        .arg("--socket")
        .arg(&agent.socket)
        .output()
        .expect("explain");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        text.contains(&format!(
            "denied by ingress: AdminNetworkPolicy {guard} (priority 20) ingress[0] \"no-clients\": Deny"
        )),
        "{text}"
    );
    assert!(text.contains("live: model and kernel agree"), "{text}");
    assert!(
        text.contains(&format!(
            "ip saddr {client_ip} meta l4proto tcp th dport 8080 drop"
        )),
        "{text}"
    );

    rt.block_on(anps.delete(&guard, &DeleteParams::default()))
        .expect("delete the ANP");
    wait_until("the ANP's chain gone", &agent, || {
        !policy_chains(&host.name).contains(&chain)
    });
    assert_eq!(ask(Duration::from_secs(10)), "server");
    for (pod, name) in pods.iter().zip(["server", "client"]) {
        let (code, result) = agent.cni_for_pod("DEL", &net, &pod.name, &pod.path(), (&ns, name));
        assert_eq!(code, 0, "DEL {name}: {result}");
    }
    drop(agent);
    let _ = rt.block_on(Api::<Namespace>::all(admin).delete(&ns, &DeleteParams::default()));
}
