//! Ctrl-C for the demo: the signal only raises a flag; every wait of the demo polls it, so an
//! interrupted demo unwinds through the same cleanup as a failed one.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::bail;

static INTERRUPTED: AtomicBool = AtomicBool::new(false);

/// What an interrupted wait returns; the demo tells it apart from a failure.
#[derive(Debug)]
pub struct Interrupted;

impl std::fmt::Display for Interrupted {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("interrupted (Ctrl-C)")
    }
}

impl std::error::Error for Interrupted {}

/// Routes SIGINT and SIGTERM to the flag.
pub fn install() -> anyhow::Result<()> {
    ctrlc::set_handler(|| INTERRUPTED.store(true, Ordering::SeqCst))?;
    Ok(())
}

/// Whether Ctrl-C was pressed.
pub fn interrupted() -> bool {
    INTERRUPTED.load(Ordering::SeqCst)
}

/// `Err(Interrupted)` once Ctrl-C was pressed.
pub fn check() -> anyhow::Result<()> {
    if interrupted() {
        return Err(Interrupted.into());
    }
    Ok(())
}

/// Sleeps `pause`, waking early (with `Err(Interrupted)`) on Ctrl-C.
pub fn sleep(pause: Duration) -> anyhow::Result<()> {
    let until = Instant::now() + pause;
    loop {
        check()?;
        let left = until.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Ok(());
        }
        std::thread::sleep(left.min(Duration::from_millis(50)));
    }
}

/// Polls `check` every 100 ms until it gives a value, naming `what` when `timeout` passes.
pub fn wait_for<T>(
    what: &str,
    timeout: Duration,
    mut probe: impl FnMut() -> anyhow::Result<Option<T>>,
) -> anyhow::Result<T> {
    let started = Instant::now();
    let mut last_error = None;
    loop {
        check()?;
        match probe() {
            Ok(Some(value)) => return Ok(value),
            Ok(None) => {}
            Err(err) if err.is::<Interrupted>() => return Err(err),
            Err(err) => last_error = Some(err),
        }
        if started.elapsed() > timeout {
            match last_error {
                Some(err) => bail!("timed out after {timeout:?} waiting for {what}: {err:#}"),
                None => bail!("timed out after {timeout:?} waiting for {what}"),
            }
        }
        sleep(Duration::from_millis(100))?;
    }
}
