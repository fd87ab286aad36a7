//! The real `test-apiserver` binary driven by the real kubectl: apply a CRD and an object,
//! get -o yaml, watch, delete; and plain `kubectl apply` with kubectl's default (strict,
//! server-side) validation. Skipped (loudly) when kubectl is not installed.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use anyhow::{Context as _, bail, ensure};

const CRD: &str = r#"apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: gadgets.demo.nephrite.dev
spec:
  group: demo.nephrite.dev
  scope: Namespaced
  names: {plural: gadgets, singular: gadget, kind: Gadget, shortNames: [gd]}
  versions:
  - name: v1
    served: true
    storage: true
    subresources: {status: {}}
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            required: [color]
            properties: {color: {type: string}}
"#;

const GADGET: &str = r#"apiVersion: demo.nephrite.dev/v1
kind: Gadget
metadata:
  name: g1
  labels: {app: demo}
spec:
  color: red
"#;

/// Kills the child (by its handle) when the test ends, pass or fail.
struct Reaper(Child);

impl Drop for Reaper {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn kubectl_available() -> bool {
    Command::new("kubectl")
        .args(["version", "--client"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// The installed kubectl's minor version (`32` for 1.32), if kubectl runs.
fn kubectl_minor() -> Option<u32> {
    let out = Command::new("kubectl")
        .args(["version", "--client", "-o", "json"])
        .stderr(Stdio::null())
        .output()
        .ok()?;
    let version: serde_json::Value = serde_json::from_slice(&out.stdout).ok()?;
    let minor = version["clientVersion"]["minor"].as_str()?;
    minor.trim_end_matches('+').parse().ok()
}

fn kubectl_cmd(home: &Path, server: &str) -> Command {
    let mut cmd = Command::new("kubectl");
    cmd.env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", home)
        .env("KUBECONFIG", home.join("kubeconfig"))
        .args(["--server", server, "--request-timeout=20s"]);
    cmd
}

fn kubectl(home: &Path, server: &str, args: &[&str]) -> anyhow::Result<Output> {
    let out = kubectl_cmd(home, server)
        .args(args)
        .output()
        .with_context(|| format!("running kubectl {args:?}"))?;
    Ok(out)
}

fn kubectl_ok(home: &Path, server: &str, args: &[&str]) -> anyhow::Result<String> {
    let out = kubectl(home, server, args)?;
    ensure!(
        out.status.success(),
        "kubectl {args:?} failed: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Spawns a thread that forwards a child's stdout lines.
fn lines_of(stdout: impl std::io::Read + Send + 'static) -> mpsc::Receiver<String> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    rx
}

fn wait_for_line(
    rx: &mpsc::Receiver<String>,
    what: &str,
    pred: impl Fn(&str) -> bool,
) -> anyhow::Result<String> {
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        match rx.recv_timeout(left) {
            Ok(line) if pred(&line) => return Ok(line),
            Ok(_) => {}
            Err(_) => bail!("timed out waiting for {what}"),
        }
    }
}

/// Starts the binary on a free port; returns it (killed on drop) and its URL.
fn start_server() -> anyhow::Result<(Reaper, String)> {
    let mut child = Command::new(env!("CARGO_BIN_EXE_test-apiserver"))
        .args(["--listen", "127.0.0.1:0", "--bookmark-interval-ms", "500"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .context("starting test-apiserver")?;
    let stdout = child.stdout.take().context("server stdout")?;
    let server = Reaper(child);
    let server_lines = lines_of(stdout);
    let url = wait_for_line(&server_lines, "the server URL", |l| {
        l.starts_with("http://")
    })?;
    Ok((server, url.trim().to_string()))
}

#[test]
fn kubectl_applies_gets_watches_and_deletes() -> anyhow::Result<()> {
    if !kubectl_available() {
        eprintln!(
            "\n*** SKIPPED kubectl_applies_gets_watches_and_deletes: kubectl is not installed ***\n"
        );
        return Ok(());
    }
    let home = tempfile::tempdir()?;
    std::fs::write(home.path().join("crd.yaml"), CRD)?;
    std::fs::write(home.path().join("gadget.yaml"), GADGET)?;
    let crd_file = home.path().join("crd.yaml");
    let gadget_file = home.path().join("gadget.yaml");
    let crd_path = crd_file.to_str().context("utf-8 path")?;
    let gadget_path = gadget_file.to_str().context("utf-8 path")?;

    let (_server, url) = start_server()?;
    let url = url.as_str();

    let home = home.path();
    let out = kubectl_ok(home, url, &["apply", "--validate=false", "-f", crd_path])?;
    assert!(out.contains("gadgets.demo.nephrite.dev created"), "{out}");
    let out = kubectl_ok(home, url, &["apply", "--validate=false", "-f", gadget_path])?;
    assert!(out.contains("gadget.demo.nephrite.dev/g1 created"), "{out}");

    let yaml = kubectl_ok(home, url, &["get", "gadget", "g1", "-o", "yaml"])?;
    assert!(yaml.contains("color: red"), "{yaml}");
    assert!(yaml.contains("resourceVersion:"), "{yaml}");
    assert!(yaml.contains("namespace: default"), "{yaml}");
    let short = kubectl_ok(home, url, &["get", "gd", "-l", "app=demo", "-o", "name"])?;
    assert_eq!(short.trim(), "gadget.demo.nephrite.dev/g1");

    // A schema `required` field is enforced.
    let bad_file = home.join("bad.yaml");
    std::fs::write(
        &bad_file,
        GADGET
            .replace("name: g1", "name: bad")
            .replace("  color: red\n", "  {}\n"),
    )?;
    let bad = kubectl(
        home,
        url,
        &[
            "apply",
            "--validate=false",
            "-f",
            bad_file.to_str().context("utf-8 path")?,
        ],
    )?;
    assert!(!bad.status.success());
    let stderr = String::from_utf8_lossy(&bad.stderr);
    assert!(stderr.contains("spec.color: Required value"), "{stderr}");

    let mut watch = kubectl_cmd(home, url)
        .args(["get", "gadgets", "-w", "--output-watch-events"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .context("starting kubectl get -w")?;
    let watch_out = watch.stdout.take().context("watch stdout")?;
    let _watch = Reaper(watch);
    let events = lines_of(watch_out);
    wait_for_line(&events, "the initial ADDED g1", |l| {
        l.contains("ADDED") && l.contains("g1")
    })?;

    let changed = GADGET.replace("color: red", "color: blue");
    std::fs::write(&gadget_file, changed)?;
    kubectl_ok(home, url, &["apply", "--validate=false", "-f", gadget_path])?;
    wait_for_line(&events, "MODIFIED g1", |l| {
        l.contains("MODIFIED") && l.contains("g1")
    })?;
    let color = kubectl_ok(
        home,
        url,
        &["get", "gadget", "g1", "-o", "jsonpath={.spec.color}"],
    )?;
    assert_eq!(color, "blue");

    let out = kubectl_ok(home, url, &["delete", "gadget", "g1"])?;
    assert!(out.contains("deleted"), "{out}");
    wait_for_line(&events, "DELETED g1", |l| {
        l.contains("DELETED") && l.contains("g1")
    })?;
    let gone = kubectl(home, url, &["get", "gadget", "g1"])?;
    assert!(!gone.status.success());
    assert!(String::from_utf8_lossy(&gone.stderr).contains("NotFound"));

    // The admin endpoint counted the writes.
    let counts = kubectl_ok(home, url, &["get", "--raw", "/_test/requests"])?;
    assert!(counts.contains("\"gadgets\""), "{counts}");
    Ok(())
}

/// `kubectl apply -f` without flags: kubectl finds `fieldValidation` in `/openapi/v3`, leaves
/// validation to the server and sends `fieldValidation=Strict`, so an unknown field is refused
/// as a real cluster refuses it; `--validate=warn` turns it into a warning and drops the field.
#[test]
fn kubectl_apply_validates_without_flags() -> anyhow::Result<()> {
    // kubectl 1.27 is the first to find `fieldValidation` in /openapi/v3 and validate on the
    // server; older ones validate against /openapi/v2, which is not served.
    match kubectl_minor() {
        None => {
            eprintln!(
                "\n*** SKIPPED kubectl_apply_validates_without_flags: kubectl is not installed ***\n"
            );
            return Ok(());
        }
        Some(minor) if minor < 27 => {
            eprintln!(
                "\n*** SKIPPED kubectl_apply_validates_without_flags: kubectl 1.{minor} is older than 1.27 ***\n"
            );
            return Ok(());
        }
        Some(_) => {}
    }
    let home = tempfile::tempdir()?;
    let home = home.path();
    let write = |name: &str, text: &str| -> anyhow::Result<String> {
        let path = home.join(name);
        std::fs::write(&path, text)?;
        Ok(path.to_str().context("utf-8 path")?.to_string())
    };
    let crd = write("crd.yaml", CRD)?;
    let gadget = write("gadget.yaml", GADGET)?;
    let unknown = write(
        "unknown.yaml",
        &GADGET
            .replace("name: g1", "name: g2")
            .replace("  color: red\n", "  color: red\n  foo: 1\n"),
    )?;
    let bad_name = write(
        "bad-name.yaml",
        &GADGET.replace("name: g1", "name: Bad_Name"),
    )?;
    let (_server, url) = start_server()?;
    let url = url.as_str();

    let out = kubectl_ok(home, url, &["apply", "-f", &crd])?;
    assert!(out.contains("gadgets.demo.nephrite.dev created"), "{out}");
    let out = kubectl_ok(home, url, &["apply", "-f", &gadget])?;
    assert!(out.contains("gadget.demo.nephrite.dev/g1 created"), "{out}");
    let out = kubectl_ok(home, url, &["apply", "-f", &gadget])?;
    assert!(
        out.contains("gadget.demo.nephrite.dev/g1 unchanged"),
        "{out}"
    );

    let refused = kubectl(home, url, &["apply", "-f", &unknown])?;
    assert!(!refused.status.success());
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(
        stderr.contains("strict decoding error: unknown field \"spec.foo\""),
        "{stderr}"
    );
    let gone = kubectl(home, url, &["get", "gadget", "g2"])?;
    assert!(!gone.status.success(), "nothing was created");

    let warned = kubectl(home, url, &["apply", "--validate=warn", "-f", &unknown])?;
    assert!(warned.status.success());
    let stderr = String::from_utf8_lossy(&warned.stderr);
    assert!(stderr.contains("unknown field \"spec.foo\""), "{stderr}");
    let spec = kubectl_ok(
        home,
        url,
        &["get", "gadget", "g2", "-o", "jsonpath={.spec}"],
    )?;
    assert_eq!(spec, r#"{"color":"red"}"#);

    let invalid = kubectl(home, url, &["apply", "-f", &bad_name])?;
    assert!(!invalid.status.success());
    let stderr = String::from_utf8_lossy(&invalid.stderr);
    assert!(
        stderr.contains("metadata.name: Invalid value: \"Bad_Name\""),
        "{stderr}"
    );
    Ok(())
}
