//! The real `preparer` binary as a child process: `serve` on a free loopback port, and the
//! client subcommands against it.

use std::process::{Child, Command, Output, Stdio};

use super::wait_for;

pub const BINARY: &str = env!("CARGO_BIN_EXE_preparer");

pub struct Serve {
    pub child: Child,
    pub server: String,
}

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `preparer serve` on a free loopback port.
pub async fn serve(store: &str, extra: &[&str]) -> Serve {
    let port = nephrite_test_services::free_loopback_port().expect("port");
    serve_on(store, port, extra).await
}

/// `preparer serve` on `port` (a restart where clients expect it).
pub async fn serve_on(store: &str, port: u16, extra: &[&str]) -> Serve {
    let child = Command::new(BINARY)
        .args([
            "serve",
            "--listen",
            &format!("127.0.0.1:{port}"),
            "--store",
            store,
            "--interval",
            "200ms",
            "--retry-backoff",
            "100ms",
        ])
        .args(extra)
        .env_remove("PREPARER_SERVER")
        .stdout(Stdio::null())
        .stderr(match std::env::var_os("PREPARER_TEST_LOG") {
            Some(path) => Stdio::from(
                std::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(path)
                    .expect("log file"),
            ),
            None => Stdio::null(),
        })
        .spawn()
        .expect("serve starts");
    wait_for("preparer listening", || async move {
        tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .ok()
            .map(|_| ())
    })
    .await;
    Serve {
        child,
        server: format!("http://127.0.0.1:{port}"),
    }
}

pub fn cli(server: &str, args: &[&str]) -> Output {
    Command::new(BINARY)
        .arg("--server")
        .arg(server)
        .args(args)
        .output()
        .expect("cli runs")
}

pub fn ok(output: Output) -> String {
    assert!(
        output.status.success(),
        "command failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout).expect("utf-8")
}
