//! Test support: a simulator on a free port and a contract proxy in front of it that checks
//! every request and response against `openapi.yaml`.

#![allow(dead_code)]

pub mod capi;

use std::time::Duration;

use nephrite_bmm_provider::client::{BmmClient, ClientConfig, RetryPolicy, Token};
use nephrite_bmm_sim::contract::ContractProxy;
use nephrite_bmm_sim::{Sim, SimConfig, auth};

pub const ORG: &str = "acme";
pub const SECRET: &str = "test-secret";

/// A running simulator behind a contract-checking proxy.
pub struct Harness {
    pub sim: Sim,
    /// The simulator's own address.
    pub sim_url: String,
    /// The proxy's address: point clients here.
    pub url: String,
    proxy: ContractProxy,
}

/// Another contract-checking proxy in front of the same simulator.
pub struct Front {
    /// Point clients here.
    pub url: String,
    proxy: ContractProxy,
}

impl Front {
    async fn start(target: &str) -> Front {
        let proxy = ContractProxy::start(target).await.expect("contract proxy");
        Front {
            url: proxy.url().to_string(),
            proxy,
        }
    }

    /// Operations this proxy forwarded.
    pub fn operations_seen(&self) -> Vec<String> {
        self.proxy.operations_seen()
    }

    /// Fails the test if a request or response through this proxy broke the contract.
    pub fn assert_contract_held(&self) {
        assert_held(&self.proxy);
    }
}

fn assert_held(proxy: &ContractProxy) {
    let v = proxy.violations();
    assert!(v.is_empty(), "contract violations:\n{}", v.join("\n"));
}

pub fn fast_config() -> SimConfig {
    SimConfig::quick(SECRET)
}

pub fn token() -> Token {
    let now = jiff::Timestamp::now().as_second() as u64;
    Token::new(auth::issue(SECRET, ORG, now, Duration::from_secs(3600)).expect("token"))
}

pub fn client(url: &str) -> BmmClient {
    let mut config = ClientConfig::new(url, ORG, token());
    config.retry = RetryPolicy {
        max_attempts: 12,
        base: Duration::from_millis(5),
        cap: Duration::from_millis(50),
    };
    config.timeout = Duration::from_secs(10);
    BmmClient::new(config).expect("client")
}

impl Harness {
    pub async fn start(config: SimConfig) -> Harness {
        let sim = Sim::new(config);
        let sim_url = sim.serve_on_loopback().await.expect("serve the simulator");
        let Front { url, proxy } = Front::start(&sim_url).await;
        Harness {
            sim,
            sim_url,
            url,
            proxy,
        }
    }

    /// Another contract-checking proxy in front of the same simulator (to tell apart who
    /// called); its violations are not part of [`Harness::assert_contract_held`].
    pub async fn front(&self) -> Front {
        Front::start(&self.sim_url).await
    }

    /// After the simulator processes the next `operation` (`"POST instance"`), the returned
    /// signal fires and the answer is held back forever.
    pub fn crash_after(&self, operation: &str) -> tokio::sync::oneshot::Receiver<()> {
        self.proxy.crash_after(operation)
    }

    pub fn client(&self) -> BmmClient {
        client(&self.url)
    }

    /// Fails the test if any request or response broke the contract.
    pub fn assert_contract_held(&self) {
        assert_held(&self.proxy);
    }

    pub fn operations_seen(&self) -> Vec<String> {
        self.proxy.operations_seen()
    }
}

/// Polls `f` every 20 ms until it returns `Some`, for at most `limit`.
pub async fn eventually<T, F, Fut>(limit: Duration, mut f: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let deadline = tokio::time::Instant::now() + limit;
    loop {
        if let Some(v) = f().await {
            return v;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "condition not reached within {limit:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// A Ready instance named `name` in a fresh network of its own (IP block `block`/23).
pub async fn ready_instance(
    client: &BmmClient,
    name: &str,
    block: &str,
) -> nephrite_bmm_provider::client::types::Instance {
    let tenant = client.current_tenant().await.expect("tenant").id;
    let site = client
        .site_named("sim-site")
        .await
        .expect("sites")
        .expect("site")
        .id;
    let block = client
        .create_ip_block(
            &nephrite_bmm_provider::client::types::IpBlockCreateRequest {
                name: format!("{name}-block"),
                site_id: site.clone(),
                routing_type: "Datacenter Only".into(),
                prefix: block.into(),
                prefix_length: 23,
                protocol_version: "IPv4".into(),
            },
        )
        .await
        .expect("ip block");
    let vpc = client
        .create_vpc(&nephrite_bmm_provider::client::types::VpcCreateRequest {
            id: None,
            name: format!("{name}-vpc"),
            site_id: site.clone(),
            network_virtualization_type: None,
            labels: None,
        })
        .await
        .expect("vpc");
    let subnet = client
        .create_subnet(&nephrite_bmm_provider::client::types::SubnetCreateRequest {
            name: format!("{name}-net"),
            vpc_id: vpc.id.clone(),
            ipv4_block_id: block.id,
            prefix_length: 24,
        })
        .await
        .expect("subnet");
    let types = client.instance_types(&site).await.expect("types");
    let instance = client
        .create_instance(
            &nephrite_bmm_provider::client::types::InstanceCreateRequest {
                name: name.into(),
                tenant_id: tenant,
                instance_type_id: Some(types[0].id.clone()),
                machine_id: None,
                vpc_id: vpc.id,
                user_data: None,
                operating_system_id: None,
                labels: None,
                interfaces: vec![
                    nephrite_bmm_provider::client::types::InterfaceCreateRequest {
                        subnet_id: subnet.id,
                        is_physical: true,
                        virtual_function_id: None,
                    },
                ],
                ssh_key_group_ids: vec![],
                allow_unhealthy_machine: None,
            },
        )
        .await
        .expect("instance");
    eventually(Duration::from_secs(10), || async {
        client
            .instance(&instance.id)
            .await
            .ok()
            .flatten()
            .filter(|i| i.status.as_deref() == Some("Ready"))
    })
    .await
}
