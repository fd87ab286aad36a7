//! Unit tests of the deadline the CRD wait runs under.

use super::*;

#[test]
fn the_alarm_ends_a_wait_that_never_finishes() {
    let waited = std::thread::spawn(|| {
        let start = Instant::now();
        let out = block_on(before(
            start + Duration::from_millis(50),
            std::future::pending::<()>(),
        ));
        (out, start.elapsed())
    })
    .join();
    let Ok((out, elapsed)) = waited else {
        panic!("the wait panicked");
    };
    assert_eq!(out, None);
    assert!(elapsed >= Duration::from_millis(50), "{elapsed:?}");
}

#[test]
fn work_done_in_time_is_returned() {
    let out = block_on(before(
        Instant::now() + Duration::from_secs(60),
        std::future::ready(7),
    ));
    assert_eq!(out, Some(7));
}

/// Runs a future on this thread, parking between wake-ups.
fn block_on<F: Future>(work: F) -> F::Output {
    struct Unpark(std::thread::Thread);
    impl std::task::Wake for Unpark {
        fn wake(self: std::sync::Arc<Self>) {
            self.0.unpark();
        }
    }
    let waker = std::task::Waker::from(std::sync::Arc::new(Unpark(std::thread::current())));
    let mut cx = Context::from_waker(&waker);
    let mut work = pin!(work);
    loop {
        if let Poll::Ready(out) = work.as_mut().poll(&mut cx) {
            return out;
        }
        std::thread::park();
    }
}
