//! Test support: the agent as a child process, the plugin executed the way
//! a runtime executes it, named network namespaces, and a real ICMP ping.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::io::{Read as _, Write as _};
use std::net::{Ipv4Addr, SocketAddrV4};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use serde_json::Value;

pub const AGENT: &str = env!("CARGO_BIN_EXE_nimbess-agent");

/// The `nimbess-cni` binary. The plugin is its own package (`nephrite-nimbess-cni`), so cargo
/// does not hand this package its path: it is where cargo puts the workspace's binaries, the
/// profile directory above this test's `deps/`. A workspace build or test builds it; a test of
/// this package alone does not, and fails here naming the command that does.
pub fn plugin() -> &'static Path {
    static PATH: OnceLock<PathBuf> = OnceLock::new();
    PATH.get_or_init(|| {
        let exe = std::env::current_exe().expect("the test's own path");
        // target/<profile>/deps/<test>-<hash>
        let profile_dir = exe
            .parent()
            .and_then(Path::parent)
            .unwrap_or_else(|| panic!("{} is not in a cargo target directory", exe.display()));
        let path = profile_dir.join("nimbess-cni");
        if !path.is_file() {
            let profile = match profile_dir.file_name().and_then(|n| n.to_str()) {
                Some("debug") | None => String::new(),
                Some(name) => format!(" --profile {name}"),
            };
            panic!(
                "the CNI plugin is not built at {}: run `cargo build{profile} -p \
                 nephrite-nimbess-cni` first (a workspace build or test builds it)",
                path.display()
            );
        }
        path
    })
}

static COUNTER: AtomicU32 = AtomicU32::new(0);

/// True when the test may create namespaces and links (root); otherwise
/// the skip is reported loudly (`why`: what the test needs root for).
pub fn root(test: &str, why: &str) -> bool {
    match nephrite_test_services::require_root(why) {
        Ok(()) => true,
        Err(e) => {
            e.skip(test);
            false
        }
    }
}

/// A name unique to this process and call (≤ 12 bytes).
pub fn unique(prefix: &str) -> String {
    let n = COUNTER.fetch_add(1, Ordering::SeqCst);
    format!("{prefix}{}x{n}", std::process::id() % 100_000)
}

/// A running agent; killed (SIGKILL) on drop, its networks' bridges removed when kernel.
pub struct AgentProcess {
    pub child: Option<Child>,
    pub dir: PathBuf,
    pub socket: PathBuf,
    pub config: PathBuf,
    pub driver: String,
    pub networks: Vec<String>,
    /// Command words run before the agent (e.g. `ip netns exec HOST`).
    pub prefix: Vec<String>,
    /// Extra `serve` flags (e.g. `--store`).
    pub extra: Vec<String>,
    _tmp: Option<tempfile::TempDir>,
}

/// Write `text` to `dir/name` (tokens, policies, certificates a test hands out).
pub fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, text).expect("write");
    path
}

impl AgentProcess {
    /// Start with `config_yaml` in a fresh directory and wait for the socket.
    pub fn start(config_yaml: &str, driver: &str, networks: &[&str]) -> AgentProcess {
        Self::start_with(config_yaml, driver, networks, &[], &[])
    }

    /// The sim-driver agent of `config_yaml` requiring bearer tokens: `tokens` (the
    /// `TOKEN,IDENTITY` lines of `--auth-tokens`) and `policy` (`--auth-policy`), written
    /// into `secrets`.
    pub fn start_with_auth(
        config_yaml: &str,
        secrets: &Path,
        tokens: &str,
        policy: &str,
    ) -> AgentProcess {
        let tokens = write(secrets, "tokens.csv", tokens);
        let policy = write(secrets, "policy.yaml", policy);
        Self::start_with(
            config_yaml,
            "sim",
            &[],
            &[],
            &[
                "--auth-tokens",
                &tokens.display().to_string(),
                "--auth-policy",
                &policy.display().to_string(),
            ],
        )
    }

    /// [`AgentProcess::start`] with command words before the agent and extra `serve` flags.
    pub fn start_with(
        config_yaml: &str,
        driver: &str,
        networks: &[&str],
        prefix: &[&str],
        extra: &[&str],
    ) -> AgentProcess {
        let tmp = tempfile::tempdir().expect("tempdir");
        let dir = tmp.path().to_path_buf();
        let config = dir.join("agent.yaml");
        std::fs::write(&config, config_yaml).expect("config");
        let mut agent = AgentProcess {
            child: None,
            socket: dir.join("agent.sock"),
            config,
            dir,
            driver: driver.to_string(),
            networks: networks.iter().map(|s| s.to_string()).collect(),
            prefix: prefix.iter().map(|s| s.to_string()).collect(),
            extra: extra.iter().map(|s| s.to_string()).collect(),
            _tmp: Some(tmp),
        };
        agent.spawn();
        agent
    }

    /// (Re)start the process on the same state directory.
    pub fn spawn(&mut self) {
        let _ = std::fs::remove_file(&self.socket);
        let log = std::fs::File::create(self.dir.join("agent.log")).expect("log");
        let mut command = match self.prefix.split_first() {
            Some((first, rest)) => {
                let mut c = Command::new(first);
                c.args(rest).arg(AGENT);
                c
            }
            None => Command::new(AGENT),
        };
        let child = command
            .args(["serve", "--config"])
            .arg(&self.config)
            .arg("--socket")
            .arg(&self.socket)
            .arg("--state-dir")
            .arg(self.dir.join("state"))
            .args(["--driver", &self.driver])
            .args(&self.extra)
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("spawn agent");
        self.child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(20);
        while !self.socket.exists() {
            assert!(
                Instant::now() < deadline,
                "agent socket never appeared; log:\n{}",
                self.log()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("agent.log")).unwrap_or_default()
    }

    /// SIGKILL, no cleanup by the agent.
    pub fn kill9(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// Send SIGHUP.
    pub fn hup(&self) {
        if let Some(c) = &self.child {
            let _ = Command::new("kill")
                .args(["-HUP", &c.id().to_string()])
                .status();
        }
    }

    pub fn netconf(&self, network: &str) -> String {
        serde_json::json!({
            "cniVersion": "1.1.0",
            "name": network,
            "type": "nimbess-cni",
            "agentSocket": self.socket,
        })
        .to_string()
    }

    /// Run the plugin for `command` on `network`.
    pub fn cni(&self, command: &str, network: &str, container: &str, netns: &str) -> (i32, Value) {
        let mut env = BTreeMap::new();
        env.insert("CNI_COMMAND", command.to_string());
        env.insert("CNI_CONTAINERID", container.to_string());
        env.insert("CNI_NETNS", netns.to_string());
        env.insert("CNI_IFNAME", "eth0".to_string());
        run_plugin(&env, &self.netconf(network))
    }

    /// [`AgentProcess::cni`] as a Kubernetes runtime runs it for the pod
    /// `namespace`/`name` (`CNI_ARGS` naming it).
    pub fn cni_for_pod(
        &self,
        command: &str,
        network: &str,
        container: &str,
        netns: &str,
        (namespace, name): (&str, &str),
    ) -> (i32, Value) {
        let mut env = BTreeMap::new();
        env.insert("CNI_COMMAND", command.to_string());
        env.insert("CNI_CONTAINERID", container.to_string());
        env.insert("CNI_NETNS", netns.to_string());
        env.insert("CNI_IFNAME", "eth0".to_string());
        env.insert(
            "CNI_ARGS",
            format!("IgnoreUnknown=1;K8S_POD_NAMESPACE={namespace};K8S_POD_NAME={name}"),
        );
        run_plugin(&env, &self.netconf(network))
    }

    /// Run `nimbess-agent <args> --socket S`.
    pub fn cli(&self, args: &[&str]) -> (i32, String) {
        let out = Command::new(AGENT)
            .args(args)
            .arg("--socket")
            .arg(&self.socket)
            .output()
            .expect("cli");
        (
            out.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&out.stdout).into_owned(),
        )
    }
}

impl Drop for AgentProcess {
    fn drop(&mut self) {
        // ACL tables of ports never deleted outlive their veths: remove them
        // (an agent in a host namespace takes them along with the namespace)
        let ports: Vec<String> = if self.driver == "kernel" && self.prefix.is_empty() {
            let (_, out) = self.cli(&["ports", "-o", "json"]);
            serde_json::from_str::<Vec<Value>>(&out)
                .unwrap_or_default()
                .iter()
                .filter_map(|p| p["id"].as_str().map(str::to_string))
                .collect()
        } else {
            Vec::new()
        };
        self.kill9();
        for port in ports {
            let _ = Command::new("nft")
                .args([
                    "delete",
                    "table",
                    "netdev",
                    &nimbess_agent::naming::host_veth_name(&port),
                ])
                .stderr(Stdio::null())
                .status();
        }
        if self.driver == "kernel" && self.prefix.is_empty() {
            // the pods' egress table an agent in the test's own namespace made
            let _ = Command::new("nft")
                .args(["delete", "table", "ip", "nimbess"])
                .stderr(Stdio::null())
                .status();
            // a routed network's table and rules (its way out, its ports')
            for net in &self.networks {
                let table = nimbess_agent::driver::kernel::routed::route_table(net).to_string();
                let _ = Command::new("ip")
                    .args(["route", "flush", "table", &table])
                    .stderr(Stdio::null())
                    .status();
                while Command::new("ip")
                    .args(["rule", "del", "table", &table])
                    .stderr(Stdio::null())
                    .status()
                    .is_ok_and(|s| s.success())
                {}
            }
        }
        if self.driver == "kernel" {
            for net in &self.networks {
                let _ = Command::new("ip")
                    .args(["link", "del", &nimbess_agent::naming::bridge_name(net)])
                    .stderr(Stdio::null())
                    .status();
                let _ = Command::new("ip")
                    .args(["link", "del", &nimbess_agent::naming::miss_sink_name(net)])
                    .stderr(Stdio::null())
                    .status();
            }
        }
    }
}

/// Execute the plugin with exactly `env` and `stdin`; returns (exit code, stdout JSON).
pub fn run_plugin(env: &BTreeMap<&str, String>, stdin: &str) -> (i32, Value) {
    let mut child = Command::new(plugin())
        .env_clear()
        .envs(env.iter().map(|(k, v)| (*k, v.as_str())))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn plugin");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(stdin.as_bytes())
        .expect("write stdin");
    let mut out = String::new();
    child
        .stdout
        .take()
        .expect("stdout")
        .read_to_string(&mut out)
        .expect("read");
    let status = child.wait().expect("wait");
    let value = if out.trim().is_empty() {
        Value::Null
    } else {
        serde_json::from_str(&out).unwrap_or_else(|e| panic!("stdout is not JSON ({e}): {out:?}"))
    };
    (status.code().unwrap_or(-1), value)
}

/// Where Debian's containernetworking-plugins install `bridge` and `host-local`.
pub const BRIDGE_PLUGIN_DIR: &str = "/usr/lib/cni";

/// Execute the `bridge` plugin (from [`BRIDGE_PLUGIN_DIR`]) with exactly
/// `env` and `conf`; returns (exit code, stdout JSON).
pub fn run_bridge_plugin(env: &BTreeMap<&str, String>, conf: &str) -> (i32, Value) {
    let mut child = Command::new(Path::new(BRIDGE_PLUGIN_DIR).join("bridge"))
        .env_clear()
        .envs(env.iter().map(|(k, v)| (*k, v.as_str())))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("bridge plugin");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(conf.as_bytes())
        .expect("write");
    let out = child.wait_with_output().expect("wait");
    let value = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
    (out.status.code().unwrap_or(-1), value)
}

/// A named network namespace (`ip netns add`), deleted on drop.
pub struct Netns {
    pub name: String,
}

impl Netns {
    pub fn new(prefix: &str) -> Netns {
        let name = unique(prefix);
        let ok = Command::new("ip")
            .args(["netns", "add", &name])
            .status()
            .expect("ip netns");
        assert!(ok.success(), "ip netns add {name}");
        Netns { name }
    }

    pub fn path(&self) -> String {
        format!("/run/netns/{}", self.name)
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = Command::new("ip")
            .args(["netns", "del", &self.name])
            .status();
    }
}

fn checksum(data: &[u8]) -> u16 {
    let mut sum: u32 = 0;
    for chunk in data.chunks(2) {
        let word = u16::from_be_bytes([chunk[0], *chunk.get(1).unwrap_or(&0)]);
        sum += u32::from(word);
    }
    while sum >> 16 != 0 {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

/// Send `count` ICMP echo requests from inside `netns` to `dst`; returns the replies received.
pub fn ping(netns: &str, dst: Ipv4Addr, count: u16) -> u16 {
    ping_paced(netns, dst, count, 0)
}

/// [`ping`] with a pause of `interval_ms` between echoes.
pub fn ping_paced(netns: &str, dst: Ipv4Addr, count: u16, interval_ms: u64) -> u16 {
    let path = netns.to_string();
    std::thread::spawn(move || {
        let file = std::fs::File::open(&path).expect("open netns");
        nix::sched::setns(&file, nix::sched::CloneFlags::CLONE_NEWNET).expect("setns");
        let sock = socket2::Socket::new(
            socket2::Domain::IPV4,
            socket2::Type::RAW,
            Some(socket2::Protocol::ICMPV4),
        )
        .expect("raw socket");
        sock.set_read_timeout(Some(Duration::from_millis(200)))
            .expect("timeout");
        if sock.connect(&SocketAddrV4::new(dst, 0).into()).is_err() {
            return 0; // no route from this pod: nothing can come back
        }
        let id = (std::process::id() as u16) ^ (COUNTER.fetch_add(1, Ordering::SeqCst) as u16);
        let mut replies = 0;
        for seq in 0..count {
            std::thread::sleep(Duration::from_millis(interval_ms));
            let mut pkt = vec![8u8, 0, 0, 0];
            pkt.extend_from_slice(&id.to_be_bytes());
            pkt.extend_from_slice(&seq.to_be_bytes());
            pkt.extend_from_slice(b"nimbess-test-payload");
            let c = checksum(&pkt);
            pkt[2..4].copy_from_slice(&c.to_be_bytes());
            if sock.send(&pkt).is_err() {
                continue;
            }
            let deadline = Instant::now() + Duration::from_millis(400);
            while Instant::now() < deadline {
                let mut buf = [0u8; 1500];
                let Ok(n) = (&sock).read(&mut buf) else { break };
                let ihl = usize::from(buf[0] & 0x0f) * 4;
                if n >= ihl + 8
                    && buf[ihl] == 0
                    && buf[ihl + 4..ihl + 6] == id.to_be_bytes()
                    && buf[ihl + 6..ihl + 8] == seq.to_be_bytes()
                {
                    replies += 1;
                    break;
                }
            }
        }
        replies
    })
    .join()
    .expect("ping thread")
}

/// The address part of a CNI result's first IP.
pub fn first_ip(result: &Value) -> Ipv4Addr {
    let cidr = result["ips"][0]["address"].as_str().expect("address");
    cidr.split('/').next().expect("ip").parse().expect("ipv4")
}

/// True when a link named `name` exists in the agent's namespace.
pub fn link_exists(name: &str) -> bool {
    Path::new("/sys/class/net").join(name).exists()
}

/// The chains of the agent's policy table in network namespace `netns` but `forward`, sorted
/// (none: no table), as `nft` lists them.
pub fn policy_chains(netns: &str) -> Vec<String> {
    policy_chains_in(netns, "ip")
}

/// [`policy_chains`] of the `family` (`ip`, `ip6`) table.
pub fn policy_chains_in(netns: &str, family: &str) -> Vec<String> {
    let out = Command::new("ip")
        .args(["netns", "exec", netns, "nft", "-j", "list", "table", family])
        .arg("nimbess-policy")
        .output()
        .expect("nft");
    let v: Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
    let mut chains: Vec<String> = v["nftables"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|i| i["chain"]["name"].as_str().map(str::to_string))
        .filter(|c| c != "forward")
        .collect();
    chains.sort();
    chains
}
