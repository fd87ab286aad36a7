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
