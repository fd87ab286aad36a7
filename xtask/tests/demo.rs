//! `cargo xtask demo` as a user runs it: the whole path ends with its summary, and Ctrl-C at
//! any step leaves no process, network namespace or temporary directory behind.
//!
//! The demo runs the daemons' binaries from `target/debug`, which the workspace's test build
//! puts there (every daemon crate has integration tests); the test passes `--no-build` so it
//! does not rebuild them with another feature set. Without them it is skipped, loudly (a
//! failure under `CI=true`).

use std::io::{BufRead as _, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

const BINARIES: &[&str] = &[
    "bmm-sim",
    "bmm-provider",
    "preparer",
    "ntc",
    "nimbess-agent",
    "nimbess-cni",
    "kuryr-l7",
];

fn bin_dir() -> PathBuf {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    std::env::var_os("CARGO_TARGET_DIR")
        .map_or_else(|| root.join("target"), PathBuf::from)
        .join("debug")
}

/// `false` (after saying why) when the daemons are not built.
fn binaries_built() -> bool {
    let missing: Vec<&&str> = BINARIES
        .iter()
        .filter(|b| !bin_dir().join(b).exists())
        .collect();
    if missing.is_empty() {
        return true;
    }
    let why = format!(
        "the demo's binaries {missing:?} are not in {}: build the workspace's tests first \
         (cargo xtask test does)",
        bin_dir().display()
    );
    if std::env::var("CI").is_ok_and(|ci| ci == "true") {
        panic!("{why}");
    }
    eprintln!("SKIPPED: {why}");
    false
}

/// A demo started with its own `TMPDIR`, its stdout lines arriving on a channel.
struct Demo {
    child: Child,
    lines: mpsc::Receiver<String>,
    seen: Vec<String>,
    tmp: tempfile::TempDir,
}

impl Demo {
    fn start() -> Demo {
        let tmp = tempfile::tempdir().unwrap();
        let mut child = Command::new(env!("CARGO_BIN_EXE_xtask"))
            .args(["demo", "--no-build"])
            .env("TMPDIR", tmp.path())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let (send, lines) = mpsc::channel();
        for pipe in [
            Box::new(child.stdout.take().unwrap()) as Box<dyn std::io::Read + Send>,
            Box::new(child.stderr.take().unwrap()),
        ] {
            let send = send.clone();
            std::thread::spawn(move || {
                for line in BufReader::new(pipe).lines().map_while(Result::ok) {
                    let _ = send.send(line);
                }
            });
        }
        Demo {
            child,
            lines,
            seen: Vec::new(),
            tmp,
        }
    }

    /// Reads lines until one contains `text` (panics after `timeout`).
    fn wait_for_line(&mut self, text: &str, timeout: Duration) {
        let until = Instant::now() + timeout;
        while Instant::now() < until {
            if let Ok(line) = self.lines.recv_timeout(Duration::from_millis(100)) {
                let found = line.contains(text);
                self.seen.push(line);
                if found {
                    return;
                }
            }
        }
        panic!(
            "no line with {text:?} in {timeout:?}:\n{}",
            self.seen.join("\n")
        );
    }

    /// Waits for the demo to exit; its exit status and every line it printed.
    fn finish(
        mut self,
        timeout: Duration,
    ) -> (std::process::ExitStatus, String, tempfile::TempDir) {
        let until = Instant::now() + timeout;
        let status = loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                break status;
            }
            if Instant::now() > until {
                let _ = self.child.kill();
                panic!(
                    "the demo did not exit in {timeout:?}:\n{}",
                    self.seen.join("\n")
                );
            }
            std::thread::sleep(Duration::from_millis(50));
        };
        // The pipes close with the demo; collect what is left.
        while let Ok(line) = self.lines.recv_timeout(Duration::from_millis(500)) {
            self.seen.push(line);
        }
        (status, self.seen.join("\n"), self.tmp)
    }
}

/// Every trace a demo run could leave: files in its TMPDIR, processes that inherited that
/// TMPDIR, network namespaces named after the demo's pid.
fn leftovers(tmp: &Path, demo_pid: u32) -> Vec<String> {
    let mut left = Vec::new();
    for entry in std::fs::read_dir(tmp).unwrap().flatten() {
        left.push(format!("file {}", entry.path().display()));
    }
    let marker = format!("TMPDIR={}", tmp.display());
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let environ = std::fs::read(entry.path().join("environ")).unwrap_or_default();
        let has_marker = environ
            .split(|b| *b == 0)
            .any(|var| var == marker.as_bytes());
        let zombie = std::fs::read_to_string(entry.path().join("stat")).is_ok_and(|stat| {
            stat.rsplit(')')
                .next()
                .is_some_and(|s| s.trim_start().starts_with('Z'))
        });
        if has_marker && !zombie {
            let cmdline = std::fs::read(entry.path().join("cmdline")).unwrap_or_default();
            left.push(format!(
                "process {pid}: {}",
                String::from_utf8_lossy(&cmdline).replace('\0', " ")
            ));
        }
    }
    if let Ok(netns) = std::fs::read_dir("/run/netns") {
        let prefix = format!("nephrite-demo-{demo_pid}-");
        for entry in netns.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            if name.starts_with(&prefix) {
                left.push(format!("network namespace {name}"));
            }
        }
    }
    left
}

#[test]
fn the_demo_walks_the_whole_path_and_ctrl_c_at_any_step_leaves_nothing() {
    if !binaries_built() {
        return;
    }
    // One demo at a time: the demo's networks have fixed names, so two runs would share
    // bridges.
    let demo = Demo::start();
    let pid = demo.child.id();
    let (status, output, tmp) = demo.finish(Duration::from_secs(180));
    println!("{output}");
    assert!(status.success(), "the demo failed:\n{output}");
    for line in [
        "clusters Ready            3/3 (3 bare-metal instances Ready)",
        "child deployments         4 (upf@edge01, upf@edge02, amf@regional, smf@regional)",
        "SMF approved after UPFs   yes",
        "NFDeployedTopology        4 instances, 8 connectivities",
        "HTTP through the router   8/8 200",
    ] {
        assert!(output.contains(line), "no {line:?} in:\n{output}");
    }
    if nephrite_test_services::running_as_root() {
        assert!(
            output.contains("3 packets transmitted, 3 received, 0% packet loss"),
            "{output}"
        );
    } else {
        eprintln!("not root: the demo ran on the sim data plane, so no ping was checked");
        assert!(
            output.contains("ping                      skipped: not root"),
            "{output}"
        );
    }
    let left = leftovers(tmp.path(), pid);
    assert!(left.is_empty(), "the demo left {left:#?}");

    for step in [
        "BMM: provision 3 clusters",
        "ntc: deploy the free5GC topology",
        "nimbess: a pod per NF instance",
        "kuryr-l7: controller and router",
    ] {
        let mut demo = Demo::start();
        let pid = demo.child.id();
        demo.wait_for_line(step, Duration::from_secs(120));
        nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(i32::try_from(pid).unwrap()),
            nix::sys::signal::Signal::SIGINT,
        )
        .unwrap();
        let (status, output, tmp) = demo.finish(Duration::from_secs(60));
        assert!(
            !status.success(),
            "Ctrl-C during {step:?} exited 0:\n{output}"
        );
        assert!(
            output.contains("demo: interrupted; everything it started is stopped and removed"),
            "Ctrl-C during {step:?}:\n{output}"
        );
        let left = leftovers(tmp.path(), pid);
        assert!(
            left.is_empty(),
            "Ctrl-C during {step:?} left {left:#?}\n{output}"
        );
    }
}
