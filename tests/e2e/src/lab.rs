//! The demo's lab: one temporary directory holding every daemon's state and log, the daemons it
//! started, the network namespaces it made, and the cleanup that undoes all of it.
//!
//! Daemons run in their own process group, so the terminal's Ctrl-C reaches the demo alone and
//! the demo stops them in order (SIGTERM, then SIGKILL after a grace period). Cleanup runs on
//! success, failure and Ctrl-C alike; only the temporary directory is kept after a failure, for
//! its logs.

use std::collections::BTreeSet;
use std::io::Write as _;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};

use crate::interrupt;
use crate::pki::Pki;

/// How long a daemon gets to exit after SIGTERM before SIGKILL.
const STOP_GRACE: Duration = Duration::from_secs(5);

/// A daemon the lab started.
struct Daemon {
    name: String,
    program: String,
    args: Vec<String>,
    env: Vec<(String, String)>,
    child: Child,
    log: PathBuf,
}

/// A pod interface plugged through `nimbess-cni`, unplugged at cleanup.
pub struct Plugged {
    /// The CNI network configuration (JSON) it was added with.
    pub config: String,
    /// `CNI_CONTAINERID`.
    pub container: String,
    /// `CNI_NETNS`.
    pub netns: PathBuf,
    /// `CNI_IFNAME`.
    pub ifname: String,
}

/// Everything the demo started, and where.
pub struct Lab {
    temp: Option<tempfile::TempDir>,
    dir: PathBuf,
    bin: PathBuf,
    daemons: Vec<Daemon>,
    netns: Vec<String>,
    plugged: Vec<Plugged>,
    /// The host's links before the data plane started: cleanup deletes the data plane's devices
    /// that were not there (`nb…` bridges, `nd…`/`ne…` miss sinks, `nx…` VXLAN) and reports
    /// them, since the agent's own teardown should have removed them.
    links_before: Option<BTreeSet<String>>,
    /// The host's nftables tables before the data plane started: cleanup deletes and reports
    /// the agent's (`nimbess*`) that were not there.
    tables_before: Option<BTreeSet<String>>,
    /// `RUST_LOG` of every process the lab starts.
    log_level: String,
    /// Mutual TLS between the daemons, when on.
    pki: Option<Pki>,
}

impl Lab {
    /// A lab in a fresh temporary directory, running the binaries in `bin`.
    pub fn new(bin: PathBuf) -> anyhow::Result<Self> {
        let temp = tempfile::Builder::new()
            .prefix("nephrite-demo-")
            .tempdir()
            .context("creating the demo's temporary directory")?;
        let dir = temp.path().to_path_buf();
        std::fs::create_dir_all(dir.join("logs"))?;
        Ok(Lab {
            temp: Some(temp),
            dir,
            bin,
            daemons: Vec::new(),
            netns: Vec::new(),
            plugged: Vec::new(),
            links_before: None,
            tables_before: None,
            log_level: "info".to_owned(),
            pki: None,
        })
    }

    /// `RUST_LOG` for the processes started from now on (`info` by default).
    pub fn set_log_level(&mut self, level: &str) {
        level.clone_into(&mut self.log_level);
    }

    /// `RUST_LOG` of the processes the lab starts.
    pub fn log_level(&self) -> &str {
        &self.log_level
    }

    /// Turns on mutual TLS for the processes started from now on: every daemon serves TLS,
    /// requires a client certificate from the lab's CA and checks its policy; every caller
    /// presents its own certificate (see [`Pki`]); URLs are `https://`.
    ///
    /// # Errors
    /// The PKI could not be created.
    pub fn enable_mtls(&mut self) -> anyhow::Result<()> {
        self.pki = Some(Pki::create(&self.dir.join("pki"))?);
        Ok(())
    }

    /// The lab's PKI, when mutual TLS is on.
    pub fn pki(&self) -> Option<&Pki> {
        self.pki.as_ref()
    }

    /// The URL a client dials a daemon's gRPC listener `addr` with.
    pub fn url(&self, addr: SocketAddr) -> String {
        let scheme = if self.pki.is_some() { "https" } else { "http" };
        format!("{scheme}://{addr}")
    }

    /// The credentials environment of the process `name` (empty without mutual TLS).
    fn credentials(&self, name: &str) -> Vec<(String, String)> {
        self.pki
            .as_ref()
            .map(|pki| pki.env(name))
            .unwrap_or_default()
    }

    /// The temporary directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// A binary of the workspace.
    pub fn binary(&self, name: &str) -> PathBuf {
        self.bin.join(name)
    }

    /// The log file of a daemon or command called `name`.
    pub fn log(&self, name: &str) -> PathBuf {
        self.dir.join("logs").join(format!("{name}.log"))
    }

    /// Writes `contents` to `name` in the lab's directory and returns its path.
    pub fn write(&self, name: &str, contents: &str) -> anyhow::Result<PathBuf> {
        let path = self.dir.join(name);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)?;
        }
        std::fs::write(&path, contents).with_context(|| format!("writing {}", path.display()))?;
        Ok(path)
    }

    /// Starts the workspace binary `program` as the daemon `name`, its output in its log.
    pub fn spawn(&mut self, name: &str, program: &str, args: &[&str]) -> anyhow::Result<()> {
        self.spawn_with_env(name, program, args, &[])
    }

    /// [`Lab::spawn`] with `env` added to the daemon's environment (e.g. `KUBECONFIG` for a
    /// daemon that reads a cluster).
    pub fn spawn_with_env(
        &mut self,
        name: &str,
        program: &str,
        args: &[&str],
        env: &[(&str, &str)],
    ) -> anyhow::Result<()> {
        let args: Vec<String> = args.iter().map(|a| (*a).to_owned()).collect();
        let env: Vec<(String, String)> = env
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        let (child, log) = self.start(name, program, &args, &env, false)?;
        self.daemons.push(Daemon {
            name: name.to_owned(),
            program: program.to_owned(),
            args,
            env,
            child,
            log,
        });
        Ok(())
    }

    /// Kills the daemon `name` with SIGKILL (a crash: no drain, no cleanup of its own) and
    /// starts it again with the same arguments, its log continued.
    pub fn crash_and_restart(&mut self, name: &str) -> anyhow::Result<()> {
        let index = self
            .daemons
            .iter()
            .position(|d| d.name == name)
            .with_context(|| format!("no daemon {name} to restart"))?;
        let mut daemon = self.daemons.remove(index);
        daemon.child.kill()?;
        daemon.child.wait()?;
        let (child, _) = self.start(name, &daemon.program, &daemon.args, &daemon.env, true)?;
        daemon.child = child;
        self.daemons.push(daemon);
        Ok(())
    }

    fn start(
        &self,
        name: &str,
        program: &str,
        args: &[String],
        env: &[(String, String)],
        append: bool,
    ) -> anyhow::Result<(Child, PathBuf)> {
        let log = self.log(name);
        let out = std::fs::OpenOptions::new()
            .create(true)
            .write(true)
            .append(append)
            .truncate(!append)
            .open(&log)
            .with_context(|| format!("opening {}", log.display()))?;
        let child = Command::new(self.binary(program))
            .args(args)
            .stdin(Stdio::null())
            .stdout(out.try_clone()?)
            .stderr(out)
            .env("RUST_LOG", &self.log_level)
            .envs(self.credentials(name))
            .envs(env.iter().map(|(k, v)| (k, v)))
            .env_remove("RUST_BACKTRACE")
            .process_group(0)
            .spawn()
            .with_context(|| format!("starting {program} (is it built?)"))?;
        Ok((child, log))
    }

    /// Fails naming the daemon and its log when one of the daemons has exited.
    pub fn check_daemons(&mut self) -> anyhow::Result<()> {
        for daemon in &mut self.daemons {
            if let Some(status) = daemon.child.try_wait()? {
                bail!(
                    "{} exited ({status}); its log: {}",
                    daemon.name,
                    daemon.log.display()
                );
            }
        }
        Ok(())
    }

    /// Waits until `addr` accepts TCP connections (or the daemon `name` has died).
    pub fn wait_listening(&mut self, name: &str, addr: SocketAddr) -> anyhow::Result<()> {
        interrupt::wait_for(
            &format!("{name} to listen on {addr}"),
            Duration::from_secs(60),
            || {
                self.check_daemons()?;
                Ok(
                    TcpStream::connect_timeout(&addr, Duration::from_millis(200))
                        .ok()
                        .map(|_| ()),
                )
            },
        )
    }

    /// Runs the workspace binary `program` to completion and returns its standard output; a
    /// failure names the command and carries its standard error. The command's output is
    /// appended to the log `log`.
    pub fn run(
        &self,
        log: &str,
        program: &str,
        args: &[&str],
        stdin: Option<&str>,
        env: &[(&str, &str)],
    ) -> anyhow::Result<String> {
        self.run_path(log, &self.binary(program), args, stdin, env)
    }

    /// [`Lab::run`] for any program.
    pub fn run_path(
        &self,
        log: &str,
        program: &Path,
        args: &[&str],
        stdin: Option<&str>,
        env: &[(&str, &str)],
    ) -> anyhow::Result<String> {
        interrupt::check()?;
        let mut command = Command::new(program);
        command
            .args(args)
            .env("RUST_LOG", &self.log_level)
            .envs(self.credentials(log))
            .envs(env.iter().copied())
            .env_remove("RUST_BACKTRACE")
            .stdin(if stdin.is_some() {
                Stdio::piped()
            } else {
                Stdio::null()
            })
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0);
        let mut child = command
            .spawn()
            .with_context(|| format!("running {}", program.display()))?;
        if let (Some(input), Some(mut pipe)) = (stdin, child.stdin.take()) {
            pipe.write_all(input.as_bytes())?;
        }
        let out = child.wait_with_output()?;
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        let shown = format!(
            "$ {} {}\n{stdout}{stderr}\n",
            program.display(),
            args.join(" ")
        );
        if let Ok(mut file) = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.log(log))
        {
            let _ = file.write_all(shown.as_bytes());
        }
        if !out.status.success() {
            bail!(
                "`{} {}` exited with {}: {}",
                program.display(),
                args.join(" "),
                out.status,
                stderr.trim()
            );
        }
        Ok(stdout)
    }

    /// Records a network namespace to delete at cleanup, and creates it.
    pub fn add_netns(&mut self, name: &str) -> anyhow::Result<PathBuf> {
        self.run_path("netns", Path::new("ip"), &["netns", "add", name], None, &[])?;
        self.netns.push(name.to_owned());
        Ok(PathBuf::from("/run/netns").join(name))
    }

    /// Records an interface plugged by `nimbess-cni`, to unplug at cleanup.
    pub fn plugged(&mut self, plugged: Plugged) {
        self.plugged.push(plugged);
    }

    /// Notes the host's links and nftables tables, before a data plane starts creating its own.
    pub fn snapshot_links(&mut self) {
        self.links_before.get_or_insert_with(links);
        self.tables_before.get_or_insert_with(nft_tables);
    }

    /// Unplugs pods, stops daemons (last started first), deletes namespaces and links. Returns
    /// what it could not undo.
    pub fn cleanup(&mut self) -> Vec<String> {
        let mut left = Vec::new();
        let cni = self.binary("nimbess-cni");
        for pod in std::mem::take(&mut self.plugged) {
            let container = pod.container.clone();
            let netns = pod.netns.display().to_string();
            let env = [
                ("CNI_COMMAND", "DEL"),
                ("CNI_CONTAINERID", container.as_str()),
                ("CNI_NETNS", netns.as_str()),
                ("CNI_IFNAME", pod.ifname.as_str()),
                ("CNI_PATH", "/nonexistent"),
            ];
            if let Err(err) = self.run_path_quiet(&cni, Some(&pod.config), &env) {
                left.push(format!(
                    "CNI DEL of {}/{}: {err:#}",
                    pod.container, pod.ifname
                ));
            }
        }
        while let Some(mut daemon) = self.daemons.pop() {
            if let Err(err) = stop(&mut daemon.child) {
                left.push(format!("{}: {err:#}", daemon.name));
            }
        }
        for name in std::mem::take(&mut self.netns) {
            let _ = Command::new("ip").args(["netns", "del", &name]).status();
            if Path::new("/run/netns").join(&name).exists() {
                left.push(format!("network namespace {name}"));
            }
        }
        // The agent runs with `--teardown-on-exit`: stopped, it removed its links and tables.
        // Whatever of Nimbess is new since the snapshot is its teardown's miss: removed here so
        // the host is left clean, and reported so the run fails.
        if let Some(before) = self.links_before.take() {
            let data_plane =
                |name: &&String| ["nb", "nd", "ne", "nx"].iter().any(|p| name.starts_with(p));
            for name in links().difference(&before).filter(data_plane) {
                // Deleting one end of a veth pair deletes its peer: look before deleting.
                if Path::new("/sys/class/net").join(name).exists() {
                    left.push(format!(
                        "network interface {name} (left by nimbess-agent's teardown)"
                    ));
                    let _ = Command::new("ip")
                        .args(["link", "del", name])
                        .stderr(Stdio::null())
                        .status();
                }
            }
        }
        if let Some(before) = self.tables_before.take() {
            for table in nft_tables().difference(&before) {
                let Some((family, name)) = table.split_once(' ') else {
                    continue;
                };
                if !name.starts_with("nimbess") {
                    continue;
                }
                left.push(format!(
                    "nftables table {table} (left by nimbess-agent's teardown)"
                ));
                let _ = Command::new("nft")
                    .args(["delete", "table", family, name])
                    .stderr(Stdio::null())
                    .status();
            }
        }
        left
    }

    /// Runs `program` with `env` during cleanup, where Ctrl-C was most likely pressed already.
    fn run_path_quiet(
        &self,
        program: &Path,
        stdin: Option<&str>,
        env: &[(&str, &str)],
    ) -> anyhow::Result<()> {
        let mut child = Command::new(program)
            .envs(env.iter().copied())
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .process_group(0)
            .spawn()?;
        if let (Some(input), Some(mut pipe)) = (stdin, child.stdin.take()) {
            pipe.write_all(input.as_bytes())?;
        }
        let status = child.wait()?;
        if !status.success() {
            bail!("exited with {status}");
        }
        Ok(())
    }

    /// Removes the temporary directory (`keep == false`) or leaves it and returns its path.
    pub fn finish(mut self, keep: bool) -> Option<PathBuf> {
        let temp = self.temp.take()?;
        if keep {
            Some(temp.keep())
        } else {
            drop(temp);
            None
        }
    }
}

impl Drop for Lab {
    fn drop(&mut self) {
        // `cleanup` normally ran already and emptied every list; this catches an early return.
        let left = self.cleanup();
        for what in left {
            eprintln!("demo: left behind: {what}");
        }
    }
}

/// SIGTERM, then SIGKILL once [`STOP_GRACE`] has passed.
fn stop(child: &mut Child) -> anyhow::Result<()> {
    if child.try_wait()?.is_some() {
        return Ok(());
    }
    let pid = nix::unistd::Pid::from_raw(i32::try_from(child.id())?);
    let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM);
    let started = Instant::now();
    while started.elapsed() < STOP_GRACE {
        if child.try_wait()?.is_some() {
            return Ok(());
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    child.kill()?;
    child.wait()?;
    Ok(())
}

/// The host's network interfaces by name.
fn links() -> BTreeSet<String> {
    std::fs::read_dir("/sys/class/net")
        .map(|entries| {
            entries
                .flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default()
}

/// The host's nftables tables as `<family> <name>` (none when `nft` is missing).
fn nft_tables() -> BTreeSet<String> {
    Command::new("nft")
        .args(["list", "tables"])
        .stderr(Stdio::null())
        .output()
        .map(|out| {
            String::from_utf8_lossy(&out.stdout)
                .lines()
                .filter_map(|line| line.strip_prefix("table "))
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default()
}

/// A free loopback TCP address.
pub fn free_addr() -> anyhow::Result<SocketAddr> {
    Ok(TcpListener::bind("127.0.0.1:0")?.local_addr()?)
}
