//! How long a kube-runtime `Controller` pauses its watches after one of them fails.
//!
//! A `Controller` keeps one backoff for all its watches together (its own objects and every
//! `watches`/`owns` stream). Its default is client-go's per-watch backoff (0.8 s doubling to
//! 30 s, reset after 2 quiet minutes), and shared it compounds: when the API server restarts,
//! or its watch cache expires every watch at once (410 Gone), each watch's error doubles the
//! pause, so a controller with five watches waited 0.8 + 1.6 + 3.2 + 6.4 + 12.8 s ≈ 25 s before
//! seeing anything new. [`watch_backoff`] starts at 100 ms, stops doubling at 3 s (jittered)
//! and resets after 30 quiet seconds: that burst costs about 3 s, and an API server that keeps
//! failing is still asked at most about once every 3 s per controller.
//!
//! ```no_run
//! # async fn run(api: kube::Api<k8s_openapi::api::core::v1::ConfigMap>) {
//! use kube::runtime::{Controller, watcher};
//!
//! let controller = Controller::new(api, watcher::Config::default())
//!     .trigger_backoff(nephrite_runtime::watch_backoff());
//! # }
//! ```

use std::time::Duration;

use kube::runtime::utils::ResetTimerBackoff;
use kube::runtime::watcher::ExponentialBackoff;

/// The first pause after a failed watch.
pub const WATCH_BACKOFF_MIN: Duration = Duration::from_millis(100);
/// The longest pause.
pub const WATCH_BACKOFF_MAX: Duration = Duration::from_secs(3);
/// Quiet time after which the pause starts from [`WATCH_BACKOFF_MIN`] again.
pub const WATCH_BACKOFF_RESET: Duration = Duration::from_secs(30);

/// The backoff for `Controller::trigger_backoff` (see the module documentation).
pub fn watch_backoff() -> ResetTimerBackoff<ExponentialBackoff> {
    ResetTimerBackoff::new(
        ExponentialBackoff::from(
            backon::ExponentialBuilder::default()
                .with_min_delay(WATCH_BACKOFF_MIN)
                .with_max_delay(WATCH_BACKOFF_MAX)
                .with_factor(2.0)
                .with_jitter()
                .without_max_times(),
        ),
        WATCH_BACKOFF_RESET,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_burst_of_failures_pauses_seconds_not_half_a_minute() {
        let mut backoff = watch_backoff();
        // Five watches failing at once: five pauses in a row.
        let burst: Vec<Duration> = (0..5).map(|_| backoff.next().expect("endless")).collect();
        let total: Duration = burst.iter().sum();
        // 0.1 + 0.2 + 0.4 + 0.8 + 1.6 s, each with up to its own length of jitter.
        assert!(total >= Duration::from_millis(3100), "{burst:?}");
        assert!(total <= Duration::from_millis(6200), "{burst:?}");
        // However long it keeps failing, no pause passes the cap (plus its jitter).
        for _ in 0..20 {
            assert!(backoff.next().expect("endless") <= WATCH_BACKOFF_MAX * 2);
        }
    }
}
