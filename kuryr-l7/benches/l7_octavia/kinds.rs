//! The time of each kind of call, from the call until the load balancer is `ACTIVE` again,
//! made two ways on the same load balancer, interleaved: as the driver makes it
//! ([`Octavia::execute`] with the driver's own [`Settle`](nephrite_kuryr_l7::openstack::octavia::Settle))
//! and by the [`Bare`] client polling every 25 ms. The difference is the driver's waiting; what
//! both take is Octavia's.

use std::collections::BTreeMap;
use std::time::Instant;

use anyhow::Context;
use nephrite_kuryr_l7::openstack::octavia::Octavia;
use reqwest::Method;
use serde_json::{Value, json};

use super::bare::Bare;
use super::median;

/// The calls of one round, in an order that leaves the load balancer as it found it: every
/// create, update and delete the driver's plans make (there is no pool update), on a pool,
/// member, listener, L7 policy and L7 rule of their own.
pub const KINDS: [&str; 14] = [
    "create pool",
    "create member",
    "update member",
    "create listener",
    "update listener",
    "create L7 policy",
    "create L7 rule",
    "update L7 rule",
    "update L7 policy",
    "delete L7 rule",
    "delete L7 policy",
    "delete member",
    "delete listener",
    "delete pool",
];

/// Who makes the calls.
#[derive(Clone, Copy)]
enum Client<'a> {
    Driver(&'a Octavia),
    Bare(&'a Bare),
}

impl Client<'_> {
    async fn call(
        self,
        lb: &str,
        method: Method,
        path: &str,
        body: Option<Value>,
    ) -> anyhow::Result<Value> {
        match self {
            Client::Driver(octavia) => Ok(octavia.execute(lb, method, path, body.as_ref()).await?),
            Client::Bare(bare) => bare.call(lb, method, path, body.as_ref()).await,
        }
    }
}

/// The id of the object under `key` in a create's answer.
fn id_in(answer: &Value, key: &str) -> anyhow::Result<String> {
    answer
        .pointer(&format!("/{key}/id"))
        .and_then(Value::as_str)
        .map(str::to_owned)
        .with_context(|| format!("no {key}.id in {answer}"))
}

/// One round of [`KINDS`] on load balancer `lb` by `client`: each call's time in seconds, in
/// the order of [`KINDS`].
async fn round(client: Client<'_>, lb: &str, port: u16) -> anyhow::Result<Vec<f64>> {
    let mut times = Vec::with_capacity(KINDS.len());
    let mut timed = async |method: Method, path: String, body: Option<Value>| {
        let began = Instant::now();
        let answer = client.call(lb, method, &path, body).await;
        times.push(began.elapsed().as_secs_f64());
        answer
    };
    let pool = id_in(
        &timed(
            Method::POST,
            "pools".into(),
            Some(json!({"pool": {"name": "kind-probe", "loadbalancer_id": lb,
                "protocol": "HTTP", "lb_algorithm": "ROUND_ROBIN"}})),
        )
        .await?,
        "pool",
    )?;
    let member = id_in(
        &timed(
            Method::POST,
            format!("pools/{pool}/members"),
            Some(json!({"member": {"address": "10.0.254.1", "protocol_port": 80, "weight": 1}})),
        )
        .await?,
        "member",
    )?;
    timed(
        Method::PUT,
        format!("pools/{pool}/members/{member}"),
        Some(json!({"member": {"weight": 2}})),
    )
    .await?;
    let listener = id_in(
        &timed(
            Method::POST,
            "listeners".into(),
            Some(
                json!({"listener": {"name": "kind-probe", "loadbalancer_id": lb,
                "protocol": "HTTP", "protocol_port": port}}),
            ),
        )
        .await?,
        "listener",
    )?;
    timed(
        Method::PUT,
        format!("listeners/{listener}"),
        Some(json!({"listener": {"default_pool_id": pool}})),
    )
    .await?;
    let policy = id_in(
        &timed(
            Method::POST,
            "l7policies".into(),
            Some(json!({"l7policy": {"listener_id": listener, "position": 1,
                "action": "REDIRECT_TO_POOL", "redirect_pool_id": pool}})),
        )
        .await?,
        "l7policy",
    )?;
    let rule = id_in(
        &timed(
            Method::POST,
            format!("l7policies/{policy}/rules"),
            Some(
                json!({"rule": {"type": "HOST_NAME", "compare_type": "EQUAL_TO",
                "value": "a.example.com"}}),
            ),
        )
        .await?,
        "rule",
    )?;
    timed(
        Method::PUT,
        format!("l7policies/{policy}/rules/{rule}"),
        Some(
            json!({"rule": {"type": "HOST_NAME", "compare_type": "EQUAL_TO",
            "value": "b.example.com"}}),
        ),
    )
    .await?;
    timed(
        Method::PUT,
        format!("l7policies/{policy}"),
        Some(json!({"l7policy": {"position": 1, "action": "REJECT"}})),
    )
    .await?;
    timed(
        Method::DELETE,
        format!("l7policies/{policy}/rules/{rule}"),
        None,
    )
    .await?;
    timed(Method::DELETE, format!("l7policies/{policy}"), None).await?;
    timed(
        Method::DELETE,
        format!("pools/{pool}/members/{member}"),
        None,
    )
    .await?;
    timed(Method::DELETE, format!("listeners/{listener}"), None).await?;
    timed(Method::DELETE, format!("pools/{pool}"), None).await?;
    Ok(times)
}

/// `rounds` rounds by each client on load balancer `lb`, the two taking turns and the first
/// of each round alternating; prints each kind's medians and their ratio.
pub async fn measure(
    octavia: &Octavia,
    bare: &Bare,
    lb: &str,
    rounds: usize,
) -> anyhow::Result<()> {
    let mut driver: BTreeMap<usize, Vec<f64>> = BTreeMap::new();
    let mut tight: BTreeMap<usize, Vec<f64>> = BTreeMap::new();
    for r in 0..rounds {
        let order = if r % 2 == 0 {
            [Client::Driver(octavia), Client::Bare(bare)]
        } else {
            [Client::Bare(bare), Client::Driver(octavia)]
        };
        for client in order {
            let times = round(client, lb, 8081).await?;
            let into = match client {
                Client::Driver(_) => &mut driver,
                Client::Bare(_) => &mut tight,
            };
            for (kind, took) in times.into_iter().enumerate() {
                into.entry(kind).or_default().push(took);
            }
        }
    }
    println!(
        "call kinds, {rounds} rounds each way, interleaved: the call until the load balancer is ACTIVE again"
    );
    println!(
        "  {:<18} {:>10} {:>10} {:>8}",
        "kind", "driver ms", "bare ms", "ratio"
    );
    let (mut all_driver, mut all_bare) = (Vec::new(), Vec::new());
    for (index, kind) in KINDS.iter().enumerate() {
        let mut d = driver.remove(&index).unwrap_or_default();
        let mut b = tight.remove(&index).unwrap_or_default();
        all_driver.extend_from_slice(&d);
        all_bare.extend_from_slice(&b);
        let (d, b) = (median(&mut d), median(&mut b));
        println!(
            "  {kind:<18} {:>10.0} {:>10.0} {:>8.2}",
            d * 1e3,
            b * 1e3,
            d / b
        );
    }
    let (d, b) = (median(&mut all_driver), median(&mut all_bare));
    println!(
        "  {:<18} {:>10.0} {:>10.0} {:>8.2}",
        "every kind",
        d * 1e3,
        b * 1e3,
        d / b
    );
    Ok(())
}
