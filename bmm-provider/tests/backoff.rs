//! Controller-level backoff: a cluster whose BMM API keeps failing is retried with jittered,
//! exponentially growing waits (read from the failing simulator's request log), capped, while
//! a healthy cluster beside it is provisioned at full speed.

mod support;

use std::time::Duration;

use nephrite_bmm::crd::SecretRef;
use nephrite_bmm_provider::client::RetryPolicy;
use nephrite_bmm_provider::controller::ControllerConfig;
use serde_json::json;
use support::capi::Env;
use support::{Harness, eventually, fast_config};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_cluster_backs_off_exponentially_and_never_slows_a_healthy_one() {
    let mut env = Env::start(fast_config()).await;
    let failing = Harness::start(fast_config()).await;
    failing.sim.fail_next(u64::MAX, 503);
    env.put_secret(
        "failing-credentials",
        &failing.sim_url,
        support::token().expose(),
    )
    .await;
    let base = Duration::from_millis(100);
    let cap = Duration::from_millis(1600);
    env.config = ControllerConfig {
        retry: RetryPolicy {
            max_attempts: 1,
            ..RetryPolicy::default()
        },
        error_backoff: base,
        error_backoff_max: cap,
        ..env.config.clone()
    };
    let controllers = env.controllers();
    env.cluster_with("sick", json!({}), |c| {
        c.spec.authentication = Some(nephrite_bmm::crd::Authentication {
            secret_ref: SecretRef {
                name: "failing-credentials".into(),
                namespace: None,
            },
        })
    })
    .await;
    let started = std::time::Instant::now();
    env.cluster("well", json!({})).await;
    env.cluster_ready("well").await;
    // The healthy cluster is not held back by its failing neighbour.
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );

    let log = eventually(Duration::from_secs(15), || async {
        let log = failing.sim.request_log();
        (log.len() >= 7).then_some(log)
    })
    .await;
    let gaps: Vec<Duration> = log.windows(2).map(|w| w[1].0 - w[0].0).collect();
    let slack = Duration::from_millis(60);
    // Each wait lies in the upper half of base · 2^n (capped), so each is at least the one
    // before it, until the cap; none exceeds the cap.
    for (n, gap) in gaps.iter().take(6).enumerate() {
        let ceiling = (base * 2u32.pow(n as u32)).min(cap);
        assert!(
            *gap + slack >= ceiling / 2 && *gap <= ceiling + slack * 3,
            "wait {n} is {gap:?}, expected within {:?}..{ceiling:?}: {gaps:?}",
            ceiling / 2
        );
    }
    assert!(gaps[4] >= gaps[0] * 6, "{gaps:?}");

    // The API recovers: the failing cluster is provisioned too.
    failing.sim.fail_next(0, 503);
    env.cluster_ready("sick").await;
    for c in controllers {
        c.abort();
    }
}
