//! Running a bit of the test process inside a named network namespace (`ip netns add NAME`).
//!
//! A network namespace belongs to a thread, not a process, on Linux: a fresh thread that
//! enters `/run/netns/NAME` can pick a free port there and poll a server listening on an
//! address only that namespace has, while the rest of the test stays where it was.

use std::fs::File;
use std::os::fd::AsFd;
use std::path::PathBuf;

use rustix::thread::{LinkNameSpaceType, move_into_link_name_space};

/// Where `ip netns add NAME` pins a namespace.
const NETNS_RUN_DIR: &str = "/run/netns";

/// The file that pins the named network namespace.
pub(crate) fn netns_path(name: &str) -> PathBuf {
    PathBuf::from(NETNS_RUN_DIR).join(name)
}

/// Run `work` on a new thread that has entered the network namespace `name`, or on this thread
/// when `name` is None. Errors say which namespace could not be entered.
pub(crate) fn run_in_netns<T: Send>(
    name: Option<&str>,
    work: impl FnOnce() -> T + Send,
) -> Result<T, String> {
    let Some(name) = name else {
        return Ok(work());
    };
    if name.is_empty() || name.contains('/') || name == "." || name == ".." {
        return Err(format!("{name:?} is not a network namespace name"));
    }
    let path = netns_path(name);
    let netns = File::open(&path)
        .map_err(|e| format!("cannot open network namespace {}: {e}", path.display()))?;
    std::thread::scope(|scope| {
        scope
            .spawn(move || {
                move_into_link_name_space(netns.as_fd(), Some(LinkNameSpaceType::Network))
                    .map_err(|e| format!("cannot enter network namespace {name}: {e}"))?;
                Ok(work())
            })
            .join()
            .map_err(|_| format!("the thread inside network namespace {name} panicked"))?
    })
}
