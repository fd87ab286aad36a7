//! The yardstick: a bare Octavia client that makes a call and polls the load balancer tightly
//! (every [`POLL`]) until it is `ACTIVE` again, with nothing of the driver around it (no
//! backoff, no read-back, no executor). What it measures is Octavia's own time for a call: the
//! API, the cast to the worker, the worker's flow on the noop drivers and the database.

use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use nephrite_l7::octavia::{Call, Method, Tree, answer_key};
use reqwest::StatusCode;
use serde_json::Value;

/// How often the bare client reads the load balancer's status while it is pending.
pub const POLL: Duration = Duration::from_millis(25);

/// A plain HTTP client of Octavia's v2 API for one project (noauth: `X-Project-Id`).
pub struct Bare {
    http: reqwest::Client,
    base: String,
    project: String,
}

impl Bare {
    /// A client of the Octavia at `url` (`http://127.0.0.1:PORT`) for `project`.
    pub fn new(url: &str, project: &str) -> anyhow::Result<Bare> {
        Ok(Bare {
            http: reqwest::Client::builder()
                .timeout(Duration::from_secs(60))
                .build()?,
            base: format!("{url}/v2/lbaas"),
            project: project.to_owned(),
        })
    }

    /// `method` on `path` (under `/v2/lbaas/`) with `body`, then the load balancer `lb` polled
    /// every [`POLL`] until it is no longer `PENDING_*`: the answer's body (`Null` when empty).
    /// A 409 "immutable" (Octavia still finishing a change) is sent again after [`POLL`].
    pub async fn call(
        &self,
        lb: &str,
        method: reqwest::Method,
        path: &str,
        body: Option<&Value>,
    ) -> anyhow::Result<Value> {
        let url = format!("{}/{}", self.base, path.trim_start_matches('/'));
        let text = loop {
            let mut request = self
                .http
                .request(method.clone(), &url)
                .header("X-Project-Id", &self.project);
            if let Some(body) = body {
                request = request.json(body);
            }
            let answer = request
                .send()
                .await
                .with_context(|| format!("{method} {url}"))?;
            let status = answer.status();
            let text = answer.text().await?;
            if status == StatusCode::CONFLICT && text.contains("immutable") {
                tokio::time::sleep(POLL).await;
                continue;
            }
            if !status.is_success() {
                bail!("{method} {url}: {status}: {text}");
            }
            break text;
        };
        self.wait_active(lb).await?;
        if text.trim().is_empty() {
            return Ok(Value::Null);
        }
        serde_json::from_str(&text).with_context(|| format!("{method} {url}: answer {text}"))
    }

    /// Polls load balancer `lb` every [`POLL`] until it is not `PENDING_*`; an error unless it
    /// is then `ACTIVE`.
    pub async fn wait_active(&self, lb: &str) -> anyhow::Result<()> {
        let url = format!("{}/loadbalancers/{lb}", self.base);
        let began = Instant::now();
        loop {
            let answer: Value = self
                .http
                .get(&url)
                .header("X-Project-Id", &self.project)
                .send()
                .await?
                .error_for_status()?
                .json()
                .await?;
            let status = answer
                .pointer("/loadbalancer/provisioning_status")
                .and_then(Value::as_str)
                .with_context(|| format!("GET {url}: no provisioning_status in {answer}"))?;
            match status {
                "ACTIVE" => return Ok(()),
                pending if pending.starts_with("PENDING_") => {}
                other => bail!("load balancer {lb} is {other}"),
            }
            if began.elapsed() > Duration::from_secs(300) {
                bail!("load balancer {lb} still {status} after 300 s");
            }
            tokio::time::sleep(POLL).await;
        }
    }

    /// Runs `plan` on load balancer `lb` call by call, each to `ACTIVE`, performing each on
    /// `tree` (the tree the plan was made from): the kind and time of each call.
    pub async fn run_plan(
        &self,
        lb: &str,
        plan: &[Call],
        tree: &mut Tree,
    ) -> anyhow::Result<Vec<(&'static str, f64)>> {
        let mut created: Vec<Option<String>> = Vec::with_capacity(plan.len());
        let mut times = Vec::with_capacity(plan.len());
        for call in plan {
            let request = call
                .request(lb, &created)
                .map_err(|e| anyhow::anyhow!("{call:?}: {e}"))?;
            let method = match request.method {
                Method::Post => reqwest::Method::POST,
                Method::Put => reqwest::Method::PUT,
                Method::Delete => reqwest::Method::DELETE,
            };
            let began = Instant::now();
            let answer = self
                .call(lb, method, &request.path, request.body.as_ref())
                .await?;
            times.push((kind_of(call), began.elapsed().as_secs_f64()));
            let id = match answer_key(call) {
                Some(key) => Some(
                    answer
                        .pointer(&format!("/{key}/id"))
                        .and_then(Value::as_str)
                        .with_context(|| format!("no {key}.id in {answer}"))?
                        .to_owned(),
                ),
                None => None,
            };
            let answered = id.clone().unwrap_or_default();
            tree.apply(call, &created, &mut || answered.clone())
                .map_err(|e| anyhow::anyhow!("{call:?} on the kept tree: {e}"))?;
            created.push(id);
        }
        Ok(times)
    }
}

/// A call's kind: what it does to which object (`create member`, `delete L7 policy`, …).
pub fn kind_of(call: &Call) -> &'static str {
    match call {
        Call::CreatePool { .. } => "create pool",
        Call::DeletePool { .. } => "delete pool",
        Call::CreateMember { .. } => "create member",
        Call::UpdateMember { .. } => "update member",
        Call::DeleteMember { .. } => "delete member",
        Call::CreateListener { .. } => "create listener",
        Call::UpdateListener { .. } => "update listener",
        Call::DeleteListener { .. } => "delete listener",
        Call::CreatePolicy { .. } => "create L7 policy",
        Call::UpdatePolicy { .. } => "update L7 policy",
        Call::DeletePolicy { .. } => "delete L7 policy",
        Call::CreateRule { .. } => "create L7 rule",
        Call::UpdateRule { .. } => "update L7 rule",
        Call::DeleteRule { .. } => "delete L7 rule",
    }
}
