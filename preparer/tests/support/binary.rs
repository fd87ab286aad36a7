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

/// `preparer serve` with TLS (`--tls-cert`, `--tls-key`) on a free loopback port; the
/// returned server address is `https://localhost:PORT`.
pub async fn serve_tls(
    store: &str,
    cert: &std::path::Path,
    key: &std::path::Path,
    extra: &[&str],
) -> Serve {
    let cert = cert.display().to_string();
    let key = key.display().to_string();
    let mut args = vec!["--tls-cert", cert.as_str(), "--tls-key", key.as_str()];
    args.extend_from_slice(extra);
    let port = nephrite_test_services::free_loopback_port().expect("port");
    let mut serve = serve_on(store, port, &args).await;
    serve.server = format!("https://localhost:{port}");
    serve
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

/// A daemon over a store with [`dashboard_sites`](super::dashboard_sites) sites in region
/// `metro`, the template `nf/gw` and the topology `topo` placing it on every one of them.
pub struct PlacementScene {
    /// The running daemon.
    pub daemon: Serve,
    /// Its store (`sqlite:PATH`).
    pub store: String,
    /// How many sites the placement covers.
    pub sites: usize,
    /// Where the store lives (removed on drop).
    pub dir: tempfile::TempDir,
}

/// Starts a [`PlacementScene`] with `extra` flags for `preparer serve`.
pub async fn placement_scene(extra: &[&str]) -> PlacementScene {
    use super::{GATEWAY, register_template, store_sites, topology};
    let sites = super::dashboard_sites();
    let dir = tempfile::tempdir().expect("tempdir");
    let store = format!("sqlite:{}", dir.path().join("p.db").display());
    store_sites(&store, sites).await;
    let daemon = serve(&store, extra).await;
    let endpoint: nephrite_runtime::Endpoint = daemon.server.parse().expect("endpoint");
    let mut client = nephrite_proto::nephrite::preparer::data::v1::data_client::DataClient::new(
        nephrite_runtime::dial(&endpoint).await.expect("dial"),
    );
    register_template(&mut client, "nf/gw", GATEWAY).await;
    register_template(&mut client, "topo", &topology("nf/gw", "metro")).await;
    PlacementScene {
        daemon,
        store,
        sites,
        dir,
    }
}

/// `preparer deployment create --template topo`: the new placement's id.
pub fn create_placement(server: &str) -> String {
    ok(cli(server, &["deployment", "create", "--template", "topo"]))
        .trim()
        .to_owned()
}
