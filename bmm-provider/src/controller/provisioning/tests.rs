use std::time::Duration;

use futures::StreamExt;

use super::*;

fn secs(s: u64) -> Duration {
    Duration::from_secs(s)
}

#[test]
fn expectations_are_kept_per_kind_and_news_is_signalled() {
    let (times, mut learnt) = ProvisioningTimes::new();
    let k = key("site", Some("type"));
    assert_eq!(times.expected(&k), None);
    times.record(&k, secs(62));
    assert_eq!(times.expected(&k), Some(secs(62)));
    assert_eq!(learnt.try_recv().ok(), Some(()), "first: news");
    times.record(&k, secs(60));
    assert_eq!(times.expected(&k), Some(secs(60)));
    assert!(learnt.try_recv().is_err(), "a small drop is no news");
    times.record(&k, secs(40));
    assert_eq!(learnt.try_recv().ok(), Some(()), "a big drop is");
    // Other types learn apart.
    assert_eq!(times.expected(&key("site", None)), None);
}

#[tokio::test]
async fn the_signal_is_a_stream() {
    let (times, learnt) = ProvisioningTimes::new();
    times.record("a/b", secs(1));
    drop(times);
    assert_eq!(learnt.collect::<Vec<()>>().await.len(), 1);
}
