//! Test support: a simulator on a free port behind the contract proxy, and plain HTTP calls to
//! it (these tests judge the simulator, so they do not go through any client of it).

#![allow(dead_code)]

use std::time::Duration;

use nephrite_bmm_sim::contract::ContractProxy;
use nephrite_bmm_sim::{INSTANCE_TYPE_ID, Sim, SimConfig, auth};
use reqwest::Method;
use serde_json::{Value, json};

pub const ORG: &str = "acme";
pub const SECRET: &str = "test-secret";

/// A simulator with fast progressions and the test secret.
pub fn fast_config() -> SimConfig {
    SimConfig::quick(SECRET)
}

/// A token of `org`, signed with the test secret, valid for ten minutes.
pub fn token_for(org: &str) -> String {
    let now = jiff::Timestamp::now().as_second() as u64;
    auth::issue(SECRET, org, now, Duration::from_secs(600)).expect("token")
}

/// A running simulator and the contract proxy in front of it.
pub struct Harness {
    pub sim: Sim,
    /// The simulator's own address.
    pub sim_url: String,
    /// Checks what goes through it against `openapi.yaml`.
    pub proxy: ContractProxy,
}

impl Harness {
    pub async fn start(config: SimConfig) -> Harness {
        let sim = Sim::new(config);
        let sim_url = sim.serve_on_loopback().await.expect("serve the simulator");
        let proxy = ContractProxy::start(&sim_url).await.expect("proxy");
        Harness {
            sim,
            sim_url,
            proxy,
        }
    }

    /// `method path` straight to the simulator: the status and the body (`Null` when none).
    pub async fn call(
        &self,
        method: Method,
        path: &str,
        token: Option<&str>,
        body: Option<Value>,
    ) -> (u16, Value) {
        send(&self.sim_url, method, path, token, body).await
    }

    /// `method path` as `acme`, through the contract proxy; fails unless it answers `expect`.
    pub async fn acme(
        &self,
        method: Method,
        path: &str,
        body: Option<Value>,
        expect: u16,
    ) -> Value {
        let at = format!("/v2/org/{ORG}/carbide/{path}");
        let (status, answer) = send(
            self.proxy.url(),
            method.clone(),
            &at,
            Some(&token_for(ORG)),
            body,
        )
        .await;
        assert_eq!(status, expect, "{method} {at}: {answer}");
        answer
    }

    /// A Ready instance named `name` in a fresh network of its own (IP block `block`/23),
    /// made through the contract proxy.
    pub async fn ready_instance(&self, name: &str, block: &str) -> Value {
        let site = self.sim.site_id();
        let tenant = self.acme(Method::GET, "tenant/current", None, 200).await;
        let block = self
            .acme(
                Method::POST,
                "ipblock",
                Some(json!({"name": format!("{name}-block"), "siteId": site,
                    "routingType": "Datacenter Only", "prefix": block, "prefixLength": 23,
                    "protocolVersion": "IPv4"})),
                201,
            )
            .await;
        let vpc = self
            .acme(
                Method::POST,
                "vpc",
                Some(json!({"name": format!("{name}-vpc"), "siteId": site})),
                201,
            )
            .await;
        let subnet = self
            .acme(
                Method::POST,
                "subnet",
                Some(json!({"name": format!("{name}-net"), "vpcId": vpc["id"],
                    "ipv4BlockId": block["id"], "prefixLength": 24})),
                201,
            )
            .await;
        let instance = self
            .acme(
                Method::POST,
                "instance",
                Some(json!({"name": name, "tenantId": tenant["id"],
                    "instanceTypeId": INSTANCE_TYPE_ID, "vpcId": vpc["id"],
                    "interfaces": [{"subnetId": subnet["id"], "isPhysical": true}]})),
                201,
            )
            .await;
        let id = instance["id"].as_str().expect("instance id").to_string();
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        loop {
            let now = self
                .acme(Method::GET, &format!("instance/{id}"), None, 200)
                .await;
            if now["status"] == "Ready" {
                return now;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "{name} not Ready: {now}"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Fails the test if a request or response through the proxy broke the contract.
    pub fn assert_contract_held(&self) {
        let v = self.proxy.violations();
        assert!(v.is_empty(), "contract violations:\n{}", v.join("\n"));
    }
}

async fn send(
    base: &str,
    method: Method,
    path: &str,
    token: Option<&str>,
    body: Option<Value>,
) -> (u16, Value) {
    let mut request = reqwest::Client::new().request(method, format!("{base}{path}"));
    if let Some(t) = token {
        request = request.bearer_auth(t);
    }
    if let Some(b) = body {
        request = request.json(&b);
    }
    let answer = request.send().await.expect("send");
    let status = answer.status().as_u16();
    let bytes = answer.bytes().await.expect("body");
    (
        status,
        serde_json::from_slice(&bytes).unwrap_or(Value::Null),
    )
}
