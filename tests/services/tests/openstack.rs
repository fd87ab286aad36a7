//! The real Octavia and Neutron APIs start once for this binary and do real work: a network
//! and subnet in Neutron, a load balancer in Octavia that reaches ACTIVE.
//!
//! One test on purpose: under nextest every test is a process, and each would start its own
//! services (~20 s, ~900 MB).

use std::time::{Duration, Instant};

use anyhow::{Context, bail, ensure};
use nephrite_test_services::{OpenStack, new_project_id, process::tree_rss_bytes};
use serde_json::{Value, json};

#[test]
fn octavia_and_neutron_answer_real_calls_in_a_fresh_project() -> anyhow::Result<()> {
    let cloud = match OpenStack::shared() {
        Ok(cloud) => cloud,
        Err(e) => {
            e.skip("octavia_and_neutron_answer_real_calls_in_a_fresh_project");
            return Ok(());
        }
    };
    let memory: u64 = cloud.pids().into_iter().map(tree_rss_bytes).sum();
    eprintln!(
        "OpenStack started in {:.1} s, {} MiB resident; Octavia {}, Neutron {}",
        cloud.started_in().as_secs_f64(),
        memory / (1024 * 1024),
        cloud.octavia_url(),
        cloud.neutron_url()
    );
    let again = OpenStack::shared().map_err(anyhow::Error::msg)?;
    ensure!(
        std::ptr::eq(cloud, again),
        "the second call shares the first start"
    );

    let http = reqwest::blocking::Client::builder()
        .timeout(Duration::from_secs(60))
        .build()?;
    let project = new_project_id();

    // Neutron: with noauth the project is the body's project_id.
    let neutron = format!("{}/v2.0", cloud.neutron_url());
    let network = post(
        &http,
        &format!("{neutron}/networks"),
        &project,
        json!({"network": {"name": "services", "project_id": project}}),
    )?;
    let network_id = text(&network["network"]["id"])?;
    let subnet = post(
        &http,
        &format!("{neutron}/subnets"),
        &project,
        json!({"subnet": {"name": "services", "network_id": network_id, "ip_version": 4,
                          "cidr": "10.0.0.0/24", "project_id": project}}),
    )?;
    let subnet_id = text(&subnet["subnet"]["id"])?;
    ensure!(
        subnet["subnet"]["project_id"] == project.as_str(),
        "{subnet}"
    );
    let listed: Value = http
        .get(format!("{neutron}/networks?project_id={project}"))
        .send()?
        .error_for_status()?
        .json()?;
    ensure!(
        listed["networks"].as_array().map(Vec::len) == Some(1),
        "one network in the fresh project: {listed}"
    );

    // Octavia: the load balancer goes PENDING_CREATE → ACTIVE through the worker.
    let octavia = format!("{}/v2/lbaas", cloud.octavia_url());
    let created = post(
        &http,
        &format!("{octavia}/loadbalancers"),
        &project,
        json!({"loadbalancer": {"name": "smoke", "vip_subnet_id": subnet_id,
                                "project_id": project}}),
    )?;
    let lb_id = text(&created["loadbalancer"]["id"])?;
    let began = Instant::now();
    loop {
        let lb: Value = http
            .get(format!("{octavia}/loadbalancers/{lb_id}"))
            .header("X-Project-Id", &project)
            .send()?
            .error_for_status()?
            .json()?;
        match lb["loadbalancer"]["provisioning_status"].as_str() {
            Some("ACTIVE") => break,
            Some(status) if status.starts_with("PENDING_") => {}
            _ => bail!("unexpected load balancer {lb}"),
        }
        ensure!(
            began.elapsed() < Duration::from_secs(60),
            "still {} after 60 s",
            lb["loadbalancer"]["provisioning_status"]
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    eprintln!(
        "load balancer ACTIVE {:.2} s after its creation answered",
        began.elapsed().as_secs_f64()
    );
    Ok(())
}

fn post(
    http: &reqwest::blocking::Client,
    url: &str,
    project: &str,
    body: Value,
) -> anyhow::Result<Value> {
    let response = http
        .post(url)
        .header("X-Project-Id", project)
        .json(&body)
        .send()
        .with_context(|| format!("POST {url}"))?;
    let status = response.status();
    let answer: Value = response.json().with_context(|| format!("POST {url}"))?;
    ensure!(status.is_success(), "POST {url}: {status} {answer}");
    Ok(answer)
}

fn text(value: &Value) -> anyhow::Result<String> {
    value
        .as_str()
        .map(str::to_owned)
        .with_context(|| format!("not a string: {value}"))
}
