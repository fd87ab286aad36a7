//! Running netlink requests inside a pod's network namespace.
//!
//! A netlink socket belongs to the namespace of the thread that opened it,
//! so each call runs on a fresh thread that enters the namespace
//! (`setns(2)`), opens its own rtnetlink connection on a current-thread
//! runtime, does its work and exits. The agent's own threads never change
//! namespace.

use std::fs::File;
use std::future::Future;
use std::path::{Path, PathBuf};
use std::pin::Pin;

use nix::sched::{CloneFlags, setns};

use crate::driver::DriverError;

/// The work to run in the namespace: given a handle, a future.
pub type NetnsJob<T> = Box<
    dyn FnOnce(rtnetlink::Handle) -> Pin<Box<dyn Future<Output = Result<T, DriverError>> + Send>>
        + Send,
>;

/// Run `job` with a netlink handle inside the namespace at `netns`.
///
/// # Errors
/// The namespace cannot be opened or entered, or the job failed.
pub async fn in_netns<T: Send + 'static>(netns: &Path, job: NetnsJob<T>) -> Result<T, DriverError> {
    let path: PathBuf = netns.to_path_buf();
    let (tx, rx) = tokio::sync::oneshot::channel();
    std::thread::Builder::new()
        .name("nimbess-netns".into())
        .spawn(move || {
            let result = run_in(&path, job);
            let _ = tx.send(result);
        })
        .map_err(|source| DriverError::Os {
            what: "spawn a namespace thread".into(),
            source,
        })?;
    rx.await
        .map_err(|_| DriverError::State(format!("namespace thread for {} died", netns.display())))?
}

fn run_in<T>(path: &Path, job: NetnsJob<T>) -> Result<T, DriverError> {
    let file = File::open(path).map_err(|source| DriverError::Os {
        what: format!("open netns {}", path.display()),
        source,
    })?;
    setns(&file, CloneFlags::CLONE_NEWNET).map_err(|e| DriverError::Os {
        what: format!("enter netns {}", path.display()),
        source: std::io::Error::from(e),
    })?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|source| DriverError::Os {
            what: "start a namespace runtime".into(),
            source,
        })?;
    runtime.block_on(async move {
        let (connection, handle, _) =
            rtnetlink::new_connection().map_err(|source| DriverError::Os {
                what: format!("open netlink in {}", path.display()),
                source,
            })?;
        tokio::spawn(connection);
        job(handle).await
    })
}

/// The namespaces a pod's interface must never land in: the agent's own
/// and the host's (PID 1's). A namespace is known by its nsfs inode.
const FORBIDDEN_NAMESPACES: [&str; 2] = ["/proc/self/ns/net", "/proc/1/ns/net"];

/// Which of the agent's or the host's network namespaces `netns` is, if
/// either (same device and inode); `None` for another namespace or a path
/// that cannot be read.
pub fn host_namespace_named(netns: &Path) -> Option<&'static str> {
    use std::os::unix::fs::MetadataExt as _;
    let identity = |p: &Path| std::fs::metadata(p).ok().map(|m| (m.dev(), m.ino()));
    let wanted = identity(netns)?;
    FORBIDDEN_NAMESPACES
        .into_iter()
        .find(|own| identity(Path::new(own)) == Some(wanted))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_agents_own_namespace_is_recognised_by_any_path() {
        assert_eq!(
            host_namespace_named(Path::new("/proc/self/ns/net")),
            Some("/proc/self/ns/net")
        );
        let own = format!("/proc/{}/ns/net", std::process::id());
        assert!(host_namespace_named(Path::new(&own)).is_some());
        let file = tempfile::NamedTempFile::new().expect("tmp");
        assert_eq!(host_namespace_named(file.path()), None);
        assert_eq!(host_namespace_named(Path::new("/no/such/netns")), None);
    }
}
