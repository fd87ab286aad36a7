//! `cargo bench -p nephrite-kuryr-l7 --bench l7`: the kuryr-l7 router against HAProxy on the same
//! routing table (1,000 hosts × 10 paths), the same nginx backend, one thread each, load from wrk
//! on loopback; and the compiled table's lookup cost at 10 and 10,000 rules.
//!
//! HAProxy runs in two configurations: the table as one `map_beg` lookup (the strongest HAProxy
//! set-up) and as an Octavia-equivalent ordered ACL chain (what Kuryr users get from Octavia).
//! Figures are the median of `L7_BENCH_RUNS` (default 5) interleaved runs of `L7_BENCH_SECONDS`
//! (default 10) seconds, for a request hitting the first rule and one hitting the last.

use std::fmt::Write as _;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use nephrite_krm::Package;
use nephrite_l7::{Options, Outcome, Request, RouteTable, SourceObject, translate};
use nephrite_test_services::{Tool, free_loopback_port, tool};

const HOSTS: usize = 1000;
const PATHS: usize = 10;

fn env_number(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn ingress_yaml(hosts: usize, paths: usize) -> String {
    let mut out = String::from(
        "apiVersion: networking.k8s.io/v1\nkind: Ingress\nmetadata: {name: bench, namespace: bench}\nspec:\n  rules:\n",
    );
    for h in 0..hosts {
        let _ = write!(out, "  - host: h{h}.example.com\n    http:\n      paths:\n");
        for p in 0..paths {
            let _ = writeln!(
                out,
                "      - {{path: /p{p}, pathType: Prefix, backend: {{service: {{name: nginx, port: {{number: 80}}}}}}}}"
            );
        }
    }
    out
}

fn services_yaml(nginx: u16) -> String {
    format!(
        "apiVersion: v1\nkind: Service\nmetadata: {{name: nginx, namespace: bench}}\nspec:\n  ports: [{{name: http, port: 80}}]\n---\napiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\nmetadata:\n  name: nginx\n  namespace: bench\n  labels: {{kubernetes.io/service-name: nginx}}\naddressType: IPv4\nports: [{{name: http, port: {nginx}}}]\nendpoints:\n- addresses: [\"127.0.0.1\"]\n"
    )
}

/// Per-lookup time for the first and the last rule of a table with `hosts × paths` rules.
fn lookup_ns(hosts: usize, paths: usize) -> (f64, f64) {
    let package = Package::from_yaml(&ingress_yaml(hosts, paths)).expect("generated YAML parses");
    let objects: Vec<SourceObject> = package
        .into_objects()
        .into_iter()
        .map(|object| SourceObject {
            object,
            origin: "bench".into(),
        })
        .collect();
    let table = RouteTable::compile(&translate(&objects, &Options::default()).config);
    let headers: Vec<(String, String)> = Vec::new();
    let last_host = format!("h{}.example.com", hosts - 1);
    let last_path = format!("/p{}/x", paths - 1);
    let time = |host: &str, path: &str| {
        let request = Request {
            host,
            path,
            target: path,
            headers: &headers,
            client_cert: None,
        };
        assert!(matches!(table.http.lookup(&request), Outcome::Pool(_)));
        // The fastest of several rounds: other work on the machine only ever adds time.
        let rounds = 200_000u32;
        (0..7)
            .map(|_| {
                let start = Instant::now();
                for _ in 0..rounds {
                    std::hint::black_box(table.http.lookup(std::hint::black_box(&request)));
                }
                start.elapsed().as_nanos() as f64 / f64::from(rounds)
            })
            .fold(f64::INFINITY, f64::min)
    };
    (
        time("h0.example.com", "/p0/x"),
        time(&last_host, &last_path),
    )
}

struct Proc(Child);

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn spawn(name: &'static str, program: &Path, args: &[&str]) -> Proc {
    let child = Command::new(program)
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap_or_else(|e| panic!("starting {name} ({}): {e}", program.display()));
    Proc(child)
}

fn wait_ready(address: SocketAddr, host: &str, path: &str, name: &str) {
    // HAProxy parses the 30,000-line ACL chain for 20-40 s on a busy 2-core machine.
    let deadline = Instant::now() + Duration::from_secs(180);
    while Instant::now() < deadline {
        if let Ok(status) = status_of(address, host, path)
            && status == 200
        {
            return;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    panic!("{name} on {address} never answered 200 for {host}{path}");
}

fn status_of(address: SocketAddr, host: &str, path: &str) -> std::io::Result<u16> {
    use std::io::{Read, Write};
    let mut stream = std::net::TcpStream::connect_timeout(&address, Duration::from_secs(1))?;
    stream.set_read_timeout(Some(Duration::from_secs(2)))?;
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n"
    )?;
    let mut out = String::new();
    let _ = stream.read_to_string(&mut out);
    Ok(out.get(9..12).and_then(|s| s.parse().ok()).unwrap_or(0))
}

#[derive(Debug, Clone, Copy, Default)]
struct Figures {
    rps: f64,
    p99_ms: f64,
    non_2xx: u64,
    socket_errors: u64,
    /// The proxy's CPU time (user + system) per request, in microseconds.
    cpu_us: f64,
}

/// CPU time (user + system) of process `pid` so far, in seconds (Linux `USER_HZ` is 100).
fn cpu_seconds(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // Fields after the command name (which is in parentheses and may hold spaces).
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .map(|(_, rest)| rest.split_whitespace().collect())
        .unwrap_or_default();
    let ticks = |i: usize| {
        fields
            .get(i)
            .and_then(|f| f.parse::<u64>().ok())
            .unwrap_or(0)
    };
    // utime and stime are fields 14 and 15 of the line, 12 and 13 after the name.
    (ticks(11) + ticks(12)) as f64 / 100.0
}

fn parse_latency(text: &str) -> f64 {
    let text = text.trim();
    let (number, factor) = if let Some(n) = text.strip_suffix("us") {
        (n, 0.001)
    } else if let Some(n) = text.strip_suffix("ms") {
        (n, 1.0)
    } else if let Some(n) = text.strip_suffix('s') {
        (n, 1000.0)
    } else {
        (text, 1.0)
    };
    number.parse::<f64>().unwrap_or(f64::NAN) * factor
}

fn wrk(wrk: &Path, address: SocketAddr, host: &str, path: &str, seconds: u64) -> Figures {
    let output = Command::new(wrk)
        .args([
            "-t1",
            "-c32",
            &format!("-d{seconds}s"),
            "--latency",
            "-H",
            &format!("Host: {host}"),
        ])
        .arg(format!("http://{address}{path}"))
        .output()
        .expect("wrk runs");
    let text = String::from_utf8_lossy(&output.stdout);
    let mut figures = Figures::default();
    for line in text.lines() {
        let line = line.trim();
        if let Some(rest) = line.strip_prefix("Requests/sec:") {
            figures.rps = rest.trim().parse().unwrap_or(0.0);
        } else if let Some(rest) = line.strip_prefix("99%") {
            figures.p99_ms = parse_latency(rest);
        } else if let Some(rest) = line.strip_prefix("Non-2xx or 3xx responses:") {
            figures.non_2xx = rest.trim().parse().unwrap_or(0);
        } else if let Some(rest) = line.strip_prefix("Socket errors:") {
            figures.socket_errors = rest
                .split(',')
                .filter_map(|part| part.split_whitespace().last()?.parse::<u64>().ok())
                .sum();
        }
    }
    figures
}

/// The machine's load average (other work sharing the cores skews every figure).
fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|text| {
            text.split_whitespace()
                .take(3)
                .collect::<Vec<_>>()
                .join(" ")
        })
        .unwrap_or_else(|_| "unknown".into())
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values.get(values.len() / 2).copied().unwrap_or(f64::NAN)
}

fn haproxy_config(port: u16, nginx: u16, frontend_rules: &str) -> String {
    format!(
        "global\n  nbthread 1\n  maxconn 4000\ndefaults\n  mode http\n  timeout connect 5s\n  timeout client 30s\n  timeout server 30s\n  option http-keep-alive\nfrontend fe\n  bind 127.0.0.1:{port}\n{frontend_rules}  default_backend be_none\nbackend be\n  server nginx 127.0.0.1:{nginx}\nbackend be_none\n  http-request return status 404\n"
    )
}

fn main() {
    let seconds = env_number("L7_BENCH_SECONDS", 10);
    let runs = env_number("L7_BENCH_RUNS", 5) as usize;

    println!("== lookup cost (compiled table, in process)");
    let (small_first, small_last) = lookup_ns(1, 10);
    let (big_first, big_last) = lookup_ns(HOSTS, PATHS);
    println!("   10 rules:     first {small_first:7.1} ns   last {small_last:7.1} ns");
    println!("   10,000 rules: first {big_first:7.1} ns   last {big_last:7.1} ns");
    println!(
        "   ratio 10,000 / 10 rules: first {:.2}, last {:.2} (floor: <= 1.5)",
        big_first / small_first,
        big_last / small_last
    );

    let tools = (tool(Tool::Haproxy), tool(Tool::Nginx), tool(Tool::Wrk));
    let (haproxy, nginx, wrk_bin) = match tools {
        (Ok(h), Ok(n), Ok(w)) => (h, n, w),
        (h, n, w) => {
            for e in [h.err(), n.err(), w.err()].into_iter().flatten() {
                e.skip("l7 bench (router vs HAProxy)");
            }
            return;
        }
    };
    let work = tempfile::tempdir().expect("temp dir");
    let port = || free_loopback_port().expect("a free port");
    let (nginx_port, router_port, map_port, acl_port) = (port(), port(), port(), port());

    // nginx: `return 200`, one worker.
    let prefix = work.path().join("nginx");
    std::fs::create_dir_all(&prefix).expect("nginx dir");
    let nginx_conf = prefix.join("nginx.conf");
    std::fs::write(
        &nginx_conf,
        format!(
            "worker_processes 1;\nmaster_process off;\npid {p}/nginx.pid;\nerror_log {p}/error.log;\nevents {{ worker_connections 4096; }}\nhttp {{\n  access_log off;\n  server {{ listen 127.0.0.1:{nginx_port}; keepalive_requests 1000000; location / {{ return 200 \"ok\\n\"; }} }}\n}}\n",
            p = prefix.display()
        ),
    )
    .expect("nginx.conf");
    let _nginx = spawn(
        "nginx",
        &nginx,
        &[
            "-p",
            &prefix.display().to_string(),
            "-c",
            &nginx_conf.display().to_string(),
            "-g",
            "daemon off;",
        ],
    );

    // The router's directory.
    let source = work.path().join("l7");
    std::fs::create_dir_all(&source).expect("l7 dir");
    std::fs::write(source.join("services.yaml"), services_yaml(nginx_port)).expect("services");
    std::fs::write(source.join("ingress.yaml"), ingress_yaml(HOSTS, PATHS)).expect("ingress");
    let router_bin = PathBuf::from(env!("CARGO_BIN_EXE_kuryr-l7"));
    let router_proc = spawn(
        "kuryr-l7",
        &router_bin,
        &[
            "router",
            "--threads",
            "1",
            "--listen",
            &format!("127.0.0.1:{router_port}"),
            "--source",
            &format!("dir:{}", source.display()),
        ],
    );

    // HAProxy, map-based and ACL-chain.
    let mut map = String::new();
    let mut acl = String::new();
    for h in 0..HOSTS {
        for p in 0..PATHS {
            let n = h * PATHS + p + 1;
            let _ = writeln!(map, "h{h}.example.com/p{p} be");
            let _ = writeln!(
                acl,
                "  acl pol{n}_host req.hdr(host),field(1,:),lower -m str h{h}.example.com"
            );
            let _ = writeln!(acl, "  acl pol{n}_path path -m beg /p{p}");
            let _ = writeln!(acl, "  use_backend be if pol{n}_host pol{n}_path");
        }
    }
    let map_file = work.path().join("routes.map");
    std::fs::write(&map_file, map).expect("map");
    let map_cfg = work.path().join("map.cfg");
    std::fs::write(
        &map_cfg,
        haproxy_config(
            map_port,
            nginx_port,
            &format!("  use_backend %[base,map_beg({})]\n", map_file.display()),
        ),
    )
    .expect("map.cfg");
    let acl_cfg = work.path().join("acl.cfg");
    std::fs::write(&acl_cfg, haproxy_config(acl_port, nginx_port, &acl)).expect("acl.cfg");
    let map_proc = spawn(
        "haproxy (map)",
        &haproxy,
        &["-f", &map_cfg.display().to_string()],
    );
    let acl_proc = spawn(
        "haproxy (acl)",
        &haproxy,
        &["-f", &acl_cfg.display().to_string()],
    );

    let address = |port: u16| SocketAddr::from(([127, 0, 0, 1], port));
    let first = ("h0.example.com", "/p0/x");
    let last = ("h999.example.com", "/p9/x");
    let targets = [
        ("router", router_port),
        ("haproxy-map", map_port),
        ("haproxy-acl", acl_port),
    ];
    for (name, port) in targets {
        wait_ready(address(port), first.0, first.1, name);
        wait_ready(address(port), last.0, last.1, name);
    }

    println!("   load average before: {}", load_average());
    println!(
        "== throughput: {HOSTS} hosts x {PATHS} paths, 1 thread each, wrk -t1 -c32, median of {runs} x {seconds}s"
    );
    let pids = [router_proc.0.id(), map_proc.0.id(), acl_proc.0.id()];
    let mut results: Vec<Vec<Figures>> = vec![Vec::new(); targets.len() * 2];
    for _ in 0..runs {
        for (t, (_, port)) in targets.iter().enumerate() {
            for (r, (host, path)) in [first, last].iter().enumerate() {
                let before = cpu_seconds(pids[t]);
                let mut figures = wrk(&wrk_bin, address(*port), host, path, seconds);
                let requests = figures.rps * seconds as f64;
                figures.cpu_us = (cpu_seconds(pids[t]) - before) * 1e6 / requests.max(1.0);
                results[t * 2 + r].push(figures);
            }
        }
    }
    let spread: Vec<(f64, f64)> = results
        .iter()
        .map(|runs| {
            let rps = runs.iter().map(|f| f.rps);
            (
                rps.clone().fold(f64::INFINITY, f64::min),
                rps.fold(0.0, f64::max),
            )
        })
        .collect();
    let summary: Vec<(f64, f64)> = results
        .iter()
        .map(|runs| {
            (
                median(runs.iter().map(|f| f.rps).collect()),
                median(runs.iter().map(|f| f.p99_ms).collect()),
            )
        })
        .collect();
    for (t, (name, _)) in targets.iter().enumerate() {
        for (r, rule) in ["first", "last"].iter().enumerate() {
            let (rps, p99) = summary[t * 2 + r];
            let (low, high) = spread[t * 2 + r];
            let cpu = median(results[t * 2 + r].iter().map(|f| f.cpu_us).collect());
            println!(
                "   {name:<12} {rule:<5} rule: {rps:>10.0} req/s  p99 {p99:6.2} ms  CPU {cpu:5.1} us/req   (runs {low:.0}..{high:.0} req/s)"
            );
        }
    }
    for (r, rule) in ["first", "last"].iter().enumerate() {
        let (router_rps, router_p99) = summary[r];
        let (map_rps, map_p99) = summary[2 + r];
        let (acl_rps, acl_p99) = summary[4 + r];
        println!(
            "   {rule:<5} rule: router / haproxy-map: RPS {:.2} (floor >= 0.95, goal 1.2), p99 {:.2} (floor <= 1.0, goal 0.8); router / haproxy-acl: RPS {:.2}, p99 {:.2}",
            router_rps / map_rps,
            router_p99 / map_p99,
            router_rps / acl_rps,
            router_p99 / acl_p99
        );
    }

    println!("   load average after: {}", load_average());
    println!("== 100 rule updates during a {seconds}s wrk run on an unchanged route");
    let changes = source.join("changing.yaml");
    let writer = std::thread::spawn(move || {
        let pause = Duration::from_millis(seconds * 1000 / 120);
        for k in 0..100 {
            let yaml = format!(
                "apiVersion: networking.k8s.io/v1\nkind: Ingress\nmetadata: {{name: changing, namespace: bench}}\nspec:\n  rules:\n  - host: changing.example.com\n    http:\n      paths:\n      - {{path: /v{k}, pathType: Prefix, backend: {{service: {{name: nginx, port: {{number: 80}}}}}}}}\n"
            );
            let _ = std::fs::write(&changes, yaml);
            std::thread::sleep(pause);
        }
    });
    let during = wrk(&wrk_bin, address(router_port), first.0, first.1, seconds);
    let _ = writer.join();
    println!(
        "   {:.0} req/s, non-2xx answers: {}, socket errors: {} (floor: 0 non-2xx)",
        during.rps, during.non_2xx, during.socket_errors
    );
}
