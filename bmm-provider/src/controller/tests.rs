//! How a reconcile's outcome feeds the per-object backoff.

use std::time::Duration;

use super::*;
use crate::client::{BmmClient, ClientConfig, Token};

/// A context whose Kubernetes client points at a port nothing listens on (nothing here calls
/// it), with a 100 ms → 10 s error backoff.
fn ctx() -> std::sync::Arc<Ctx> {
    let config = kube::Config::new("http://127.0.0.1:9".parse().expect("url"));
    let client = Client::try_from(config).expect("kube client");
    Ctx::shared(
        client,
        ControllerConfig {
            error_backoff: Duration::from_millis(100),
            error_backoff_max: Duration::from_secs(10),
            ..ControllerConfig::default()
        },
    )
}

fn credentials() -> credentials::Credentials {
    let config = ClientConfig::new("http://127.0.0.1:9", "org", Token::new("t"));
    credentials::Credentials {
        client: BmmClient::new(config).expect("bmm client"),
        secret: "ns/creds".into(),
        fingerprint: 1,
    }
}

/// The fix this pins: a reconcile whose BMM calls all succeed used to clear the object's
/// failures, so a Kubernetes write that kept being refused (a missing RBAC verb) was retried at
/// the base wait, about every second, for ever.
#[tokio::test]
async fn a_bmm_success_does_not_forget_failed_kubernetes_writes() {
    let ctx = ctx();
    let key = "ns/machine-0";
    // Three reconciles whose status write was refused, counted as the controller counts them.
    for _ in 0..3 {
        ctx.backoff.failed(key);
    }
    // The next reconcile's BMM part succeeds before its write fails again.
    let next = settled(&ctx, key, Ok(Wait::Steady));
    assert!(matches!(next, Next::After(_)));
    // The fourth refused write waits 100 ms · 2³ (jittered into its upper half), not the base.
    let wait = ctx.backoff.failed(key);
    assert!(
        wait >= Duration::from_millis(400),
        "the wait after a 4th failure fell back to {wait:?}"
    );
}

/// A BMM answer that survived the client's retries (503).
fn unavailable(key: &str) -> ReconcileError {
    ReconcileError::Api {
        object: format!("machine {key}"),
        source: crate::client::ApiError::Transient {
            op: "GET instance".into(),
            status: 503,
            message: "unavailable".into(),
        },
    }
}

/// What `settle` asks for after `outcome`.
fn settled(ctx: &Ctx, key: &str, outcome: Result<Wait, ReconcileError>) -> Next {
    settle(
        ctx,
        key,
        &credentials(),
        outcome,
        Duration::from_secs(1),
        &mut Vec::new(),
        "2026-12-07T00:00:00Z",
    )
}

/// BMM failures back off on their own count, which a BMM success resets.
#[tokio::test]
async fn bmm_failures_back_off_and_a_bmm_success_resets_them() {
    let ctx = ctx();
    let key = "ns/machine-1";
    let waits: Vec<Next> = (0..4)
        .map(|_| settled(&ctx, key, Err(unavailable(key))))
        .collect();
    assert!(
        matches!(waits[3], Next::After(d) if d >= Duration::from_millis(400)),
        "{waits:?}"
    );
    settled(&ctx, key, Ok(Wait::Steady));
    let after = settled(&ctx, key, Err(unavailable(key)));
    assert!(
        matches!(after, Next::After(d) if d <= Duration::from_millis(100)),
        "{after:?}"
    );
}
