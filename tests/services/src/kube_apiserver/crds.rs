//! CustomResourceDefinitions on the real API server: applied as the cluster's admin would
//! apply them, then waited for until the server serves their resources (`Established`), which
//! every test does before it creates an object of one.
//!
//! The wait follows each CRD with a watch (kube-runtime's `await_condition`), not a polling
//! loop. Its deadline is a thread that sleeps until then and wakes the task: this library
//! depends on kube but not on a runtime's timers.

use std::future::Future;
use std::pin::{Pin, pin};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::wait::{await_condition, conditions};

/// Why CRDs were not applied or did not become Established.
#[derive(Debug, thiserror::Error)]
pub enum CrdError {
    /// The server refused or failed the server-side apply of a CRD.
    #[error("applying CRD {name} failed: {source}")]
    Apply {
        /// The CRD's name.
        name: String,
        /// kube's error (the API's status for a refusal).
        source: kube::Error,
    },
    /// Watching a CRD for its conditions failed.
    #[error("watching CRD {name} for Established failed: {detail}")]
    Watch {
        /// The CRD's name.
        name: String,
        /// What failed.
        detail: String,
    },
    /// The CRD was deleted, or never created, while it was waited for.
    #[error("CRD {name} does not exist")]
    Missing {
        /// The CRD's name.
        name: String,
    },
    /// The deadline passed first.
    #[error("CRD {name} not Established within {within:?}; its conditions: {conditions}")]
    NotEstablished {
        /// The CRD's name.
        name: String,
        /// How long it was waited for (from the start of the wait for all of them).
        within: Duration,
        /// Its conditions at the deadline (`type=status (reason: message)`, or `none`).
        conditions: String,
    },
}

/// Server-side applies each of `crds` as `manager` (forced, as `kubectl apply --server-side
/// --force-conflicts` does), then waits until all are Established, for at most `within`.
pub async fn apply_crds(
    client: &kube::Client,
    crds: &[CustomResourceDefinition],
    manager: &str,
    within: Duration,
) -> Result<(), CrdError> {
    let api: Api<CustomResourceDefinition> = Api::all(client.clone());
    let mut names = Vec::with_capacity(crds.len());
    for crd in crds {
        let name = crd.metadata.name.clone().unwrap_or_default();
        api.patch(
            &name,
            &PatchParams::apply(manager).force(),
            &Patch::Apply(crd),
        )
        .await
        .map_err(|source| CrdError::Apply {
            name: name.clone(),
            source,
        })?;
        names.push(name);
    }
    wait_crds_established(client, &names, within).await
}

/// Waits until every CRD of `names` has condition `Established` True, for at most `within` in
/// all. Refused with the CRD's conditions at the deadline (a names conflict shows there as
/// `NamesAccepted=False`).
pub async fn wait_crds_established(
    client: &kube::Client,
    names: &[String],
    within: Duration,
) -> Result<(), CrdError> {
    let api: Api<CustomResourceDefinition> = Api::all(client.clone());
    let deadline = Instant::now() + within;
    for name in names {
        let established = await_condition(api.clone(), name, conditions::is_crd_established());
        match before(deadline, established).await {
            Some(Ok(Some(_))) => {}
            Some(Ok(None)) => return Err(CrdError::Missing { name: name.clone() }),
            Some(Err(e)) => {
                return Err(CrdError::Watch {
                    name: name.clone(),
                    detail: e.to_string(),
                });
            }
            None => {
                let conditions = match api.get_opt(name).await {
                    Ok(Some(crd)) => describe_conditions(&crd),
                    Ok(None) => "none (the CRD does not exist)".to_string(),
                    Err(e) => format!("unknown (reading the CRD failed: {e})"),
                };
                return Err(CrdError::NotEstablished {
                    name: name.clone(),
                    within,
                    conditions,
                });
            }
        }
    }
    Ok(())
}

/// A CRD's conditions, one `type=status (reason: message)` each, or `none`.
fn describe_conditions(crd: &CustomResourceDefinition) -> String {
    let listed: Vec<String> = crd
        .status
        .iter()
        .flat_map(|s| s.conditions.iter().flatten())
        .map(|c| {
            format!(
                "{}={} ({}: {})",
                c.type_,
                c.status,
                c.reason.as_deref().unwrap_or(""),
                c.message.as_deref().unwrap_or("")
            )
        })
        .collect();
    if listed.is_empty() {
        "none".to_string()
    } else {
        listed.join(", ")
    }
}

/// `work`'s output, or None when `deadline` passes first.
async fn before<F: Future>(deadline: Instant, work: F) -> Option<F::Output> {
    let mut work = pin!(work);
    let mut alarm = Alarm {
        at: deadline,
        armed: false,
    };
    std::future::poll_fn(|cx| {
        if let Poll::Ready(out) = work.as_mut().poll(cx) {
            return Poll::Ready(Some(out));
        }
        match Pin::new(&mut alarm).poll(cx) {
            Poll::Ready(()) => Poll::Ready(None),
            Poll::Pending => Poll::Pending,
        }
    })
    .await
}

/// Ready at `at`; the first poll before then starts a thread that wakes the task at `at`.
struct Alarm {
    at: Instant,
    armed: bool,
}

impl Future for Alarm {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let now = Instant::now();
        if now >= self.at {
            return Poll::Ready(());
        }
        if !self.armed {
            self.armed = true;
            let waker = cx.waker().clone();
            let wait = self.at - now;
            std::thread::spawn(move || {
                std::thread::sleep(wait);
                waker.wake();
            });
        }
        Poll::Pending
    }
}

#[cfg(test)]
mod tests;
