//! `nephrite-pause`: the sandbox process of every pod of the test cluster.
//!
//! It holds the pod's namespaces and does nothing else: signals are taken synchronously
//! (blocked, then `sigwait`), so there is no handler; SIGTERM or SIGINT exits 0, SIGCHLD reaps
//! every exited child (as PID 1 of a pod sharing its PID namespace it inherits orphans).

use nix::sys::signal::{SigSet, Signal};
use nix::sys::wait::{WaitPidFlag, WaitStatus, waitpid};

fn main() {
    let mut signals = SigSet::empty();
    for signal in [Signal::SIGTERM, Signal::SIGINT, Signal::SIGCHLD] {
        signals.add(signal);
    }
    if let Err(e) = signals.thread_block() {
        eprintln!("nephrite-pause: cannot block signals: {e}");
        std::process::exit(1);
    }
    loop {
        match signals.wait() {
            Ok(Signal::SIGCHLD) => reap(),
            Ok(signal) => {
                eprintln!("nephrite-pause: {signal:?}, exiting");
                std::process::exit(0);
            }
            Err(e) => {
                eprintln!("nephrite-pause: sigwait: {e}");
                std::process::exit(1);
            }
        }
    }
}

/// Collect every child that has exited, without waiting for the others.
fn reap() {
    while let Ok(status) = waitpid(None, Some(WaitPidFlag::WNOHANG)) {
        if status == WaitStatus::StillAlive {
            break;
        }
    }
}
