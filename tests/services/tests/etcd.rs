//! A throwaway etcd, used the way a domain test uses it: through its v3 JSON gateway.

use std::io::{Read, Write};
use std::net::{IpAddr, Ipv4Addr, SocketAddr, TcpStream};
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use anyhow::{Context, bail, ensure};
use base64::Engine;
use base64::engine::general_purpose::STANDARD as BASE64;
use nephrite_test_services::{Etcd, Tool, require_root, tool};
use serde_json::{Value, json};

/// Start etcd (with `start`) or skip `test` (a failure under CI=true).
fn start_or_skip(
    test: &str,
    start: impl FnOnce() -> Result<Etcd, nephrite_test_services::Unavailable>,
) -> Option<Etcd> {
    match start() {
        Ok(etcd) => Some(etcd),
        Err(e) => {
            e.skip(test);
            None
        }
    }
}

/// POST `body` as JSON to `path` on `addr`; the JSON answer.
fn post_json(addr: SocketAddr, path: &str, body: &Value) -> anyhow::Result<Value> {
    let body = body.to_string();
    let mut stream = TcpStream::connect_timeout(&addr, Duration::from_secs(5))?;
    stream.set_read_timeout(Some(Duration::from_secs(10)))?;
    write!(
        stream,
        "POST {path} HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )?;
    let mut response = String::new();
    stream.read_to_string(&mut response)?;
    let (head, payload) = response
        .split_once("\r\n\r\n")
        .context("no end of headers")?;
    ensure!(
        head.starts_with("HTTP/1.1 200"),
        "POST {path}: {head}\n{payload}"
    );
    let payload = if head
        .to_ascii_lowercase()
        .contains("transfer-encoding: chunked")
    {
        dechunk(payload)?
    } else {
        payload.to_owned()
    };
    Ok(serde_json::from_str(&payload)?)
}

/// The body of a chunked HTTP/1.1 response.
fn dechunk(mut chunked: &str) -> anyhow::Result<String> {
    let mut body = String::new();
    loop {
        let (size, rest) = chunked.split_once("\r\n").context("chunk size line")?;
        let size = usize::from_str_radix(size.trim(), 16)?;
        if size == 0 {
            return Ok(body);
        }
        body.push_str(rest.get(..size).context("short chunk")?);
        chunked = rest.get(size + 2..).context("chunk end")?;
    }
}

fn put(etcd: &Etcd, key: &str, value: &str) -> anyhow::Result<()> {
    post_json(
        etcd.client_addr(),
        "/v3/kv/put",
        &json!({ "key": BASE64.encode(key), "value": BASE64.encode(value) }),
    )?;
    Ok(())
}

fn get(etcd: &Etcd, key: &str) -> anyhow::Result<Option<String>> {
    let answer = post_json(
        etcd.client_addr(),
        "/v3/kv/range",
        &json!({ "key": BASE64.encode(key) }),
    )?;
    let Some(kv) = answer.get("kvs").and_then(|kvs| kvs.get(0)) else {
        return Ok(None);
    };
    let value = kv.get("value").and_then(Value::as_str).unwrap_or_default();
    Ok(Some(String::from_utf8(BASE64.decode(value)?)?))
}

fn assert_gone(etcd: Etcd) {
    let (addr, dir, pid) = (etcd.client_addr(), etcd.dir().to_path_buf(), etcd.pid());
    drop(etcd);
    assert!(TcpStream::connect(addr).is_err(), "{addr} still accepts");
    assert!(!dir.exists(), "{} was not removed", dir.display());
    assert!(
        !Path::new(&format!("/proc/{pid}")).exists(),
        "etcd (pid {pid}) still runs"
    );
}

#[test]
fn a_key_put_is_read_back_and_the_server_is_gone_after_drop() -> anyhow::Result<()> {
    let test = "a_key_put_is_read_back_and_the_server_is_gone_after_drop";
    let Some(etcd) = start_or_skip(test, Etcd::start) else {
        return Ok(());
    };
    assert_eq!(
        etcd.endpoint(),
        format!("http://127.0.0.1:{}", etcd.client_addr().port())
    );
    put(&etcd, "/nephrite/topology/leaf-1", "{\"asn\":65001}")?;
    assert_eq!(
        get(&etcd, "/nephrite/topology/leaf-1")?.as_deref(),
        Some("{\"asn\":65001}")
    );
    assert_eq!(get(&etcd, "/nephrite/topology/absent")?, None);
    assert_gone(etcd);
    Ok(())
}

#[test]
fn etcd_listens_on_the_address_asked_for() -> anyhow::Result<()> {
    let ip = IpAddr::V4(Ipv4Addr::new(127, 0, 0, 2));
    let Some(etcd) = start_or_skip("etcd_listens_on_the_address_asked_for", || {
        Etcd::start_on(ip)
    }) else {
        return Ok(());
    };
    assert_eq!(etcd.client_addr().ip(), ip);
    assert_eq!(etcd.peer_addr().ip(), ip);
    assert!(
        etcd.endpoint().starts_with("http://127.0.0.2:"),
        "{}",
        etcd.endpoint()
    );
    put(&etcd, "k", "v")?;
    assert_eq!(get(&etcd, "k")?.as_deref(), Some("v"));
    let on_other_address = SocketAddr::new(Ipv4Addr::LOCALHOST.into(), etcd.client_addr().port());
    assert!(
        TcpStream::connect(on_other_address).is_err(),
        "etcd also answers on 127.0.0.1"
    );
    assert_gone(etcd);
    Ok(())
}

#[test]
fn an_address_that_is_not_ours_is_a_failure_not_a_skip() {
    let Ok(_) = tool(Tool::EtcdServer) else {
        return;
    };
    // TEST-NET-1 (RFC 5737) is never assigned to this host.
    let err = Etcd::start_on(IpAddr::V4(Ipv4Addr::new(192, 0, 2, 1)))
        .expect_err("etcd cannot listen on an address the host does not have");
    assert!(!err.is_missing(), "{err}");
    assert!(err.to_string().contains("192.0.2.1"), "{err}");
}

/// A network namespace for one test, deleted on drop.
struct Netns(String);

impl Netns {
    fn add(name: String) -> anyhow::Result<Netns> {
        let ip = tool(Tool::Ip)?;
        let run = |args: &[&str]| -> anyhow::Result<()> {
            let out = Command::new(&ip).args(args).output()?;
            if !out.status.success() {
                bail!("ip {args:?}: {}", String::from_utf8_lossy(&out.stderr));
            }
            Ok(())
        };
        run(&["netns", "add", &name])?;
        let netns = Netns(name);
        run(&["-n", &netns.0, "link", "set", "lo", "up"])?;
        Ok(netns)
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        if let Ok(ip) = tool(Tool::Ip) {
            let _ = Command::new(ip).args(["netns", "del", &self.0]).status();
        }
    }
}

#[test]
fn etcd_runs_inside_a_network_namespace() -> anyhow::Result<()> {
    let test = "etcd_runs_inside_a_network_namespace";
    if let Err(e) = require_root("creates a network namespace") {
        e.skip(test);
        return Ok(());
    }
    let netns = Netns::add(format!("nephrite-svc-{}", std::process::id()))?;
    let loopback = IpAddr::V4(Ipv4Addr::LOCALHOST);
    let Some(etcd) = start_or_skip(test, || Etcd::start_in_netns(&netns.0, loopback)) else {
        return Ok(());
    };
    assert_eq!(etcd.netns(), Some(netns.0.as_str()));
    let pinned = std::fs::metadata(format!("/run/netns/{}", netns.0))?;
    let etcds = std::fs::metadata(format!("/proc/{}/ns/net", etcd.pid()))?;
    assert_eq!(
        (etcds.dev(), etcds.ino()),
        (pinned.dev(), pinned.ino()),
        "etcd is not in the netns"
    );
    let (dir, pid) = (etcd.dir().to_path_buf(), etcd.pid());
    drop(etcd);
    assert!(!dir.exists(), "{} was not removed", dir.display());
    assert!(
        !Path::new(&format!("/proc/{pid}")).exists(),
        "etcd (pid {pid}) still runs"
    );
    Ok(())
}

#[test]
fn an_ipv6_endpoint_puts_the_address_in_brackets() -> anyhow::Result<()> {
    let test = "an_ipv6_endpoint_puts_the_address_in_brackets";
    let ip = IpAddr::V6(std::net::Ipv6Addr::LOCALHOST);
    if let Err(e) = std::net::TcpListener::bind((ip, 0)) {
        eprintln!("SKIPPED {test}: this host has no IPv6 loopback ({e})");
        return Ok(());
    }
    let Some(etcd) = start_or_skip(test, || Etcd::start_on(ip)) else {
        return Ok(());
    };
    assert_eq!(
        etcd.endpoint(),
        format!("http://[::1]:{}", etcd.client_addr().port())
    );
    put(&etcd, "v6", "yes")?;
    assert_eq!(get(&etcd, "v6")?.as_deref(), Some("yes"));
    Ok(())
}
