//! The REST client against bmm-sim, through a proxy that checks every request body and every
//! response against openapi.yaml.

mod support;

use std::collections::BTreeMap;
use std::time::Duration;

use nephrite_bmm_provider::client::types::*;
use nephrite_bmm_provider::client::{ApiError, BmmClient, ClientConfig, RetryPolicy, Token};
use nephrite_bmm_sim::{Kind, SimConfig, auth};
use serde_json::{Value, json};
use support::{Harness, ORG, SECRET, eventually, fast_config};

struct Network {
    site: String,
    tenant: String,
    vpc: Vpc,
    subnet: Subnet,
    block: IpBlock,
}

async fn network(client: &BmmClient, name: &str) -> Network {
    let tenant = client.current_tenant().await.expect("tenant").id;
    let site = client
        .site_named("sim-site")
        .await
        .expect("sites")
        .expect("the simulator's site")
        .id;
    let block = client
        .create_ip_block(&IpBlockCreateRequest {
            name: format!("{name}-block"),
            site_id: site.clone(),
            routing_type: "Datacenter Only".into(),
            prefix: "10.20.0.0".into(),
            prefix_length: 23,
            protocol_version: "IPv4".into(),
        })
        .await
        .expect("ip block");
    let mut labels = BTreeMap::new();
    labels.insert("owner".to_string(), name.to_string());
    let vpc = client
        .create_vpc(&VpcCreateRequest {
            id: Some(uuid::Uuid::new_v4().to_string()),
            name: format!("{name}-vpc"),
            site_id: site.clone(),
            network_virtualization_type: Some("ETHERNET_VIRTUALIZER".into()),
            labels: Some(labels),
        })
        .await
        .expect("vpc");
    // Children are accepted while the parents are still Pending.
    assert_eq!(vpc.status.as_deref(), Some("Pending"));
    let subnet = client
        .create_subnet(&SubnetCreateRequest {
            name: format!("{name}-cp"),
            vpc_id: vpc.id.clone(),
            ipv4_block_id: block.id.clone(),
            prefix_length: 24,
        })
        .await
        .expect("subnet");
    Network {
        site,
        tenant,
        vpc,
        subnet,
        block,
    }
}

#[tokio::test]
async fn full_lifecycle_follows_the_contract() {
    let h = Harness::start(fast_config()).await;
    let client = h.client();
    let net = network(&client, "c1").await;
    assert_eq!(
        net.block.routing_type.as_deref(),
        Some("DatacenterOnly"),
        "requested as 'Datacenter Only'"
    );
    assert_eq!(net.subnet.ipv4_prefix.as_deref(), Some("10.20.0.0"));

    let nsg = client
        .create_nsg(&NsgCreateRequest {
            name: "c1-nsg".into(),
            site_id: net.site.clone(),
            rules: vec![NsgRule {
                name: Some("api".into()),
                direction: "INGRESS".into(),
                source_port_range: None,
                destination_port_range: Some("6443".into()),
                protocol: "TCP".into(),
                action: "PERMIT".into(),
                priority: Some(100),
                source_prefix: "0.0.0.0/0".into(),
                destination_prefix: "0.0.0.0/0".into(),
            }],
            labels: None,
        })
        .await
        .expect("nsg");
    let attached = client
        .set_vpc_nsg(&net.vpc.id, Some(&nsg.id))
        .await
        .expect("attach");
    assert_eq!(
        attached.network_security_group_id.as_deref(),
        Some(nsg.id.as_str())
    );

    let types = client.instance_types(&net.site).await.expect("types");
    assert_eq!(types.len(), 1);
    let machines = client
        .machines(&net.site, Some(&types[0].id))
        .await
        .expect("machines");
    assert!(machines.len() >= 64);
    let instance = client
        .create_instance(&InstanceCreateRequest {
            name: "c1-cp-0".into(),
            tenant_id: net.tenant.clone(),
            instance_type_id: Some(types[0].id.clone()),
            machine_id: None,
            vpc_id: net.vpc.id.clone(),
            user_data: Some("#cloud-config\n".into()),
            operating_system_id: None,
            labels: None,
            interfaces: vec![InterfaceCreateRequest {
                subnet_id: net.subnet.id.clone(),
                is_physical: true,
                virtual_function_id: None,
            }],
            ssh_key_group_ids: vec![],
            allow_unhealthy_machine: None,
        })
        .await
        .expect("instance");
    let ready = eventually(Duration::from_secs(10), || async {
        client
            .instance(&instance.id)
            .await
            .expect("get")
            .filter(|i| i.status.as_deref() == Some("Ready"))
    })
    .await;
    let address = ready.interfaces[0]
        .ip_addresses
        .first()
        .cloned()
        .expect("a Ready instance has an address");
    assert!(
        address.starts_with("10.20.0."),
        "{address} is in the subnet"
    );
    let history = client
        .instance_status_history(&instance.id)
        .await
        .expect("history");
    assert!(
        history
            .iter()
            .any(|h| h.status.as_deref() == Some("Provisioning"))
    );
    assert_eq!(
        client
            .instance_interfaces(&instance.id)
            .await
            .expect("ifaces")
            .len(),
        1
    );
    let named = client
        .instances_named(&net.site, "c1-cp-0")
        .await
        .expect("by name");
    assert_eq!(named.len(), 1);

    // Deletion: dependants refuse, order works, 404 counts as done.
    let refused = client
        .delete_vpc(&net.vpc.id)
        .await
        .expect_err("VPC with instances");
    assert!(matches!(refused, ApiError::Rejected { .. }), "{refused:?}");
    client
        .delete_instance(&instance.id)
        .await
        .expect("delete instance");
    let machine_id = ready.machine_id.clone().expect("machine");
    eventually(Duration::from_secs(10), || async {
        client
            .instance(&instance.id)
            .await
            .expect("get")
            .is_none()
            .then_some(())
    })
    .await;
    let freed = client.machines(&net.site, None).await.expect("machines");
    assert!(
        freed
            .iter()
            .any(|m| m.id == machine_id && m.instance_id.is_none()),
        "the machine returns to the pool"
    );
    client.set_vpc_nsg(&net.vpc.id, None).await.expect("detach");
    client.delete_nsg(&nsg.id).await.expect("nsg delete");
    client
        .delete_subnet(&net.subnet.id)
        .await
        .expect("subnet delete (204)");
    assert!(
        client.subnet(&net.subnet.id).await.expect("get").is_none(),
        "a subnet DELETE removes it at once"
    );
    client
        .delete_vpc(&net.vpc.id)
        .await
        .expect("vpc delete (202)");
    client
        .delete_subnet(&net.subnet.id)
        .await
        .expect("404 on delete counts as done");
    eventually(Duration::from_secs(5), || async {
        client
            .vpc(&net.vpc.id)
            .await
            .expect("get")
            .is_none()
            .then_some(())
    })
    .await;
    client
        .delete_ip_block(&net.block.id)
        .await
        .expect("block delete");
    eventually(Duration::from_secs(5), || async {
        client
            .ip_block(&net.block.id)
            .await
            .expect("get")
            .is_none()
            .then_some(())
    })
    .await;
    for kind in Kind::ALL {
        assert_eq!(h.sim.live(kind), 0, "{kind:?} left over");
    }
    h.assert_contract_held();
    let seen = h.operations_seen();
    for op in [
        "POST vpc",
        "PATCH vpc/{vpcId}",
        "DELETE vpc/{vpcId}",
        "POST subnet",
        "DELETE subnet/{subnetId}",
        "POST network-security-group",
        "POST instance",
        "GET instance/{instanceId}/status-history",
        "GET instance/{instanceId}/interface",
        "GET instance/type",
        "GET machine",
        "GET tenant/current",
        "GET site",
        "POST ipblock",
        "DELETE ipblock/{ipBlockId}",
    ] {
        assert!(seen.iter().any(|s| s == op), "{op} was not exercised");
    }
}

#[tokio::test]
async fn a_duplicate_name_is_adopted_not_created_twice() {
    let h = Harness::start(fast_config()).await;
    let client = h.client();
    let net = network(&client, "dup").await;
    let again = client
        .create_vpc(&VpcCreateRequest {
            id: Some(uuid::Uuid::new_v4().to_string()),
            name: "dup-vpc".into(),
            site_id: net.site.clone(),
            network_virtualization_type: None,
            labels: None,
        })
        .await
        .expect("adopted");
    assert_eq!(again.id, net.vpc.id);
    let subnet = client
        .create_subnet(&SubnetCreateRequest {
            name: "dup-cp".into(),
            vpc_id: net.vpc.id.clone(),
            ipv4_block_id: net.block.id.clone(),
            prefix_length: 24,
        })
        .await
        .expect("adopted");
    assert_eq!(subnet.id, net.subnet.id);
    assert_eq!(
        (h.sim.created(Kind::Vpc), h.sim.created(Kind::Subnet)),
        (1, 1)
    );
    // The raw answer is a 409 carrying the existing id.
    let raw = reqwest::Client::new()
        .post(format!("{}/v2/org/{ORG}/carbide/vpc", h.url))
        .bearer_auth(support::token().expose())
        .json(&json!({"name": "dup-vpc", "siteId": net.site}))
        .send()
        .await
        .expect("send");
    assert_eq!(raw.status().as_u16(), 409);
    let body: Value = raw.json().await.expect("json");
    assert_eq!(body["data"]["id"], json!(net.vpc.id));
    h.assert_contract_held();
}

#[tokio::test]
async fn lost_create_answers_are_adopted_and_faults_retried_without_duplicates() {
    let h = Harness::start(SimConfig {
        lost_response_rate: 1.0,
        fault_rate: 0.2,
        ..fast_config()
    })
    .await;
    let client = h.client();
    let net = network(&client, "lossy").await;
    assert!(!net.vpc.id.is_empty());
    assert_eq!(h.sim.created(Kind::IpBlock), 1);
    assert_eq!(h.sim.created(Kind::Vpc), 1);
    assert_eq!(h.sim.created(Kind::Subnet), 1);
    let metrics = reqwest::get(format!("{}/metrics", h.sim_url))
        .await
        .expect("metrics")
        .text()
        .await
        .expect("text");
    assert!(
        metrics.contains(r#"bmm_sim_objects_created_total{kind="vpc"} 1"#),
        "{metrics}"
    );
    assert!(
        metrics.contains("bmm_sim_faults_injected_total"),
        "{metrics}"
    );
    h.assert_contract_held();
}

#[tokio::test]
async fn retry_after_of_a_429_is_honoured() {
    let h = Harness::start(SimConfig {
        retry_after: Some(Duration::from_secs(1)),
        ..fast_config()
    })
    .await;
    // Backoff alone would retry within 10 ms: only the server's Retry-After makes it wait.
    let mut config = ClientConfig::new(&h.url, ORG, support::token());
    config.retry = RetryPolicy {
        max_attempts: 4,
        base: Duration::from_millis(5),
        cap: Duration::from_secs(60),
    };
    let client = BmmClient::new(config).expect("client");
    h.sim.throttle_next(2);
    let started = std::time::Instant::now();
    let tenant = client
        .current_tenant()
        .await
        .expect("answered after the 429s");
    assert!(!tenant.id.is_empty());
    assert!(
        started.elapsed() >= Duration::from_secs(2),
        "two 429s with Retry-After: 1 must delay the call by 2 s, not {:?}",
        started.elapsed()
    );
    assert_eq!(h.sim.requests_answered(), 3, "two refusals, one answer");
    assert_eq!(h.sim.faults_injected(), 2);
    h.assert_contract_held();
}

#[tokio::test]
async fn lists_page_through_x_pagination() {
    let h = Harness::start(SimConfig {
        machines: 230,
        ..fast_config()
    })
    .await;
    let client = h.client();
    let site = client
        .site_named("sim-site")
        .await
        .expect("site")
        .expect("exists")
        .id;
    let machines = client.machines(&site, None).await.expect("machines");
    assert_eq!(machines.len(), 230, "three pages of at most 100");
    let mut ids: Vec<&str> = machines.iter().map(|m| m.id.as_str()).collect();
    ids.dedup();
    assert_eq!(ids.len(), 230);
    let page = reqwest::Client::new()
        .get(format!(
            "{}/v2/org/{ORG}/carbide/machine?pageNumber=3&pageSize=100",
            h.url
        ))
        .bearer_auth(support::token().expose())
        .send()
        .await
        .expect("send");
    let paging: Value =
        serde_json::from_str(page.headers()["X-Pagination"].to_str().expect("ascii"))
            .expect("json");
    assert_eq!(paging["total"], json!(230));
    assert_eq!(page.json::<Vec<Value>>().await.expect("json").len(), 30);
    let too_big = reqwest::Client::new()
        .get(format!(
            "{}/v2/org/{ORG}/carbide/machine?pageSize=101",
            h.url
        ))
        .bearer_auth(support::token().expose())
        .send()
        .await
        .expect("send");
    assert_eq!(too_big.status().as_u16(), 400);
    h.assert_contract_held();
}

#[tokio::test]
async fn invalid_requests_get_400_with_the_api_message() {
    let h = Harness::start(fast_config()).await;
    let client = h.client();
    let site = client
        .site_named("sim-site")
        .await
        .expect("site")
        .expect("exists")
        .id;
    // Straight to the simulator: the contract proxy would (rightly) flag this request.
    let raw = reqwest::Client::new()
        .post(format!("{}/v2/org/{ORG}/carbide/vpc", h.sim_url))
        .bearer_auth(support::token().expose())
        .json(&json!({"siteId": "not-a-uuid", "networkVirtualizationType": "VXLAN"}))
        .send()
        .await
        .expect("send");
    assert_eq!(raw.status().as_u16(), 400);
    let body: Value = raw.json().await.expect("json");
    let schema = nephrite_bmm_sim::openapi::component("CarbideAPIError");
    assert_eq!(
        nephrite_bmm_sim::openapi::violations(&schema, &body).expect("schema"),
        Vec::<String>::new()
    );
    assert_eq!(body["source"], json!("carbide"));
    let data = body["data"].as_object().expect("data by field");
    assert!(data.keys().any(|k| k.contains("siteId")), "{body}");
    assert!(
        data.keys().any(|k| k.contains("networkVirtualizationType")),
        "{body}"
    );
    assert!(
        data.values()
            .any(|v| v.as_str().is_some_and(|s| s.contains("name"))),
        "required name: {body}"
    );
    let err = client
        .create_nsg(&NsgCreateRequest {
            name: "bad".into(),
            site_id: site,
            rules: vec![NsgRule {
                name: None,
                direction: "INGRESS".into(),
                source_port_range: None,
                destination_port_range: Some("22".into()),
                protocol: "ICMP".into(),
                action: "PERMIT".into(),
                priority: None,
                source_prefix: "0.0.0.0/0".into(),
                destination_prefix: "0.0.0.0/0".into(),
            }],
            labels: None,
        })
        .await
        .expect_err("ports with ICMP");
    match err {
        ApiError::Rejected { message, .. } => assert!(message.contains("ICMP"), "{message}"),
        other => panic!("{other:?}"),
    }
    h.assert_contract_held();
}

#[tokio::test]
async fn bearer_tokens_are_checked() {
    let h = Harness::start(fast_config()).await;
    let with = |token: String, org: &str| {
        BmmClient::new(ClientConfig::new(h.url.clone(), org, Token::new(token))).expect("client")
    };
    let now = jiff::Timestamp::now().as_second() as u64;
    let cases = [
        (String::new(), ORG, 401),
        ("garbage".to_string(), ORG, 401),
        (
            auth::issue("other-secret", ORG, now, Duration::from_secs(60)).expect("t"),
            ORG,
            401,
        ),
        (
            auth::issue(SECRET, ORG, now - 7200, Duration::from_secs(60)).expect("t"),
            ORG,
            401,
        ),
        (
            auth::issue(SECRET, "other-org", now, Duration::from_secs(60)).expect("t"),
            ORG,
            403,
        ),
    ];
    for (token, org, want) in cases {
        match with(token, org).current_tenant().await {
            Err(ApiError::Auth { status, .. }) => assert_eq!(status, want),
            other => panic!("expected {want}, got {other:?}"),
        }
    }
    h.assert_contract_held();
}
