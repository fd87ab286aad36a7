//! `cargo bench -p nephrite-kuryr-l7 --bench l7`: the kuryr-l7 router against HAProxy and nginx
//! on the same routing table (1,000 hosts × 10 paths), the same nginx backend, one thread (one
//! worker) each, load from wrk on loopback; and the compiled table's lookup cost at 10 and
//! 10,000 rules.
//!
//! nginx (Debian's, one worker, keep-alive to the backend) is a reverse proxy with a server
//! block per host and, per Prefix path `/pN`, `location = /pN` and `location /pN/` (the
//! element-wise Prefix match of an Ingress); anything else answers 404, as the router does.
//!
//! HAProxy runs in two configurations: the table as one `map_beg` lookup (the strongest HAProxy
//! set-up) and as an Octavia-equivalent ordered ACL chain (what Kuryr users get from Octavia).
//! The router is compared with map-based HAProxy and nginx set by set: for each of two requests
//! (one hitting the first rule, one the last), the three are measured back to back for
//! `L7_BENCH_SECONDS` (default 10) seconds each, in an order that rotates and flips every set,
//! until each request has `L7_BENCH_RUNS` (default 5) sets; the figures are the medians over
//! them, and the ratios router / HAProxy and router / nginx (RPS and p99) are printed. Each
//! wrk run also reports steal (time the hypervisor gave other guests); a set in which any
//! run saw more than `L7_BENCH_MAX_STEAL` percent (1: p99 is the slowest 1 % of the requests)
//! is printed and taken again, at most `L7_BENCH_RETAKES` (3 × runs) times in all. The ACL
//! chain runs once per round beside them (its figures are printed, never held to a floor).
//! The proxy under test runs alone on CPU 1, wrk and nginx on CPU 0, the same for every proxy
//! (`L7_BENCH_PIN=0` lets them share all CPUs). Before each round the bench waits up to
//! `L7_BENCH_SETTLE_SECONDS` (20) for other work to leave the CPUs at most 25 % busy, and prints
//! how busy they were, the load average and every run's figures (p50 beside p99, to tell a
//! slower body from a longer tail; how busy the proxy's CPU and the load's were, to tell which
//! side bounded the run). Before each pair it also probes the host: both CPUs spin
//! for a second (steal only shows while the guest has work), and it waits, up to
//! `L7_BENCH_QUIET_SECONDS` (30), for a probe with steal under the limit. `L7_BENCH_ONLY=lookup` measures the lookup cost alone.

use std::fmt::Write as _;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use nephrite_krm::Package;
use nephrite_l7::{Options, Outcome, Request, RouteTable, SourceObject, translate};
use nephrite_test_services::{Tool, free_loopback_port, tool};

#[path = "l7/load.rs"]
mod load;
#[path = "l7/rounds.rs"]
mod rounds;

use load::{Placement, range, wrk};
use nephrite_test_services::machine::load_average;
use nephrite_test_services::stats::median;
use rounds::{Plan, Rule, Target, measure_pairs, report};

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

/// The compiled table of `hosts × paths` rules.
fn compiled_table(hosts: usize, paths: usize) -> RouteTable {
    let package = Package::from_yaml(&ingress_yaml(hosts, paths)).expect("generated YAML parses");
    let objects: Vec<SourceObject> = package
        .into_objects()
        .into_iter()
        .map(|object| SourceObject {
            object,
            origin: "bench".into(),
        })
        .collect();
    RouteTable::compile(&translate(&objects, &Options::default()).config)
}

/// Nanoseconds per lookup of (`host`, `path`) in `table`, over `lookups` lookups (after checking
/// that it finds the pool).
fn lookup_ns(table: &RouteTable, (host, path): (&str, &str), lookups: u32) -> f64 {
    let headers: Vec<(String, String)> = Vec::new();
    let request = Request {
        host,
        path,
        target: path,
        headers: &headers,
        client_cert: None,
    };
    assert!(
        matches!(table.http.lookup(&request), Outcome::Pool(_)),
        "{host}{path} routes to the pool"
    );
    let start = Instant::now();
    for _ in 0..lookups {
        std::hint::black_box(table.http.lookup(std::hint::black_box(&request)));
    }
    start.elapsed().as_nanos() as f64 / f64::from(lookups)
}

/// The lookup cost at 10 and 10,000 rules, first and last rule. Both tables are built before
/// any timing; the four cases take turns in every round (the order reversed every other round,
/// so a drift in the machine's speed hits all of them alike), and the figures are medians over
/// the rounds: of each case's time and of the per-round ratio 10,000 / 10 rules.
fn lookup_cost() {
    const ROUNDS: usize = 101;
    const LOOKUPS: u32 = 20_000;
    let small = compiled_table(1, PATHS);
    let big = compiled_table(HOSTS, PATHS);
    let small_last_path = format!("/p{}/x", PATHS - 1);
    let big_last_host = format!("h{}.example.com", HOSTS - 1);
    let cases: [(&RouteTable, (&str, &str)); 4] = [
        (&small, ("h0.example.com", "/p0/x")),
        (&big, ("h0.example.com", "/p0/x")),
        (&small, ("h0.example.com", &small_last_path)),
        (&big, (&big_last_host, &small_last_path)),
    ];
    // A warm-up round.
    for (table, request) in cases {
        lookup_ns(table, request, LOOKUPS);
    }
    let mut times: Vec<Vec<f64>> = vec![Vec::with_capacity(ROUNDS); cases.len()];
    for round in 0..ROUNDS {
        let order: Vec<usize> = if round % 2 == 0 {
            (0..cases.len()).collect()
        } else {
            (0..cases.len()).rev().collect()
        };
        for c in order {
            let (table, request) = cases[c];
            times[c].push(lookup_ns(table, request, LOOKUPS));
        }
    }
    let ratios = |small: usize, big: usize| -> Vec<f64> {
        times[big]
            .iter()
            .zip(&times[small])
            .map(|(b, s)| b / s)
            .collect()
    };
    let (first, last) = (ratios(0, 1), ratios(2, 3));
    println!(
        "== lookup cost (compiled table, in process; medians of {ROUNDS} interleaved rounds of {LOOKUPS} lookups)"
    );
    println!(
        "   10 rules:     first {:7.1} ns   last {:7.1} ns",
        median(&mut times[0].clone()),
        median(&mut times[2].clone())
    );
    println!(
        "   10,000 rules: first {:7.1} ns   last {:7.1} ns",
        median(&mut times[1].clone()),
        median(&mut times[3].clone())
    );
    let ((first_low, first_high), (last_low, last_high)) =
        (range(first.iter().copied()), range(last.iter().copied()));
    println!(
        "   ratio 10,000 / 10 rules (median of per-round ratios): first {:.2} (rounds {first_low:.2}..{first_high:.2}), last {:.2} (rounds {last_low:.2}..{last_high:.2}) (floor: <= 1.5)",
        median(&mut first.clone()),
        median(&mut last.clone())
    );
    println!("   load average: {}", load_average());
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

fn haproxy_config(port: u16, nginx: u16, frontend_rules: &str) -> String {
    format!(
        "global\n  nbthread 1\n  maxconn 4000\ndefaults\n  mode http\n  timeout connect 5s\n  timeout client 30s\n  timeout server 30s\n  option http-keep-alive\nfrontend fe\n  bind 127.0.0.1:{port}\n{frontend_rules}  default_backend be_none\nbackend be\n  server nginx 127.0.0.1:{nginx}\nbackend be_none\n  http-request return status 404\n"
    )
}

/// nginx as a reverse proxy on `port` to the backend on `backend` with the Ingress's rules:
/// a server block per host, `location = /pN` and `location /pN/` per Prefix path, 404
/// elsewhere; one worker, keep-alive on both sides.
fn nginx_proxy_config(prefix: &Path, port: u16, backend: u16) -> String {
    let mut servers = String::new();
    for h in 0..HOSTS {
        let _ = writeln!(
            servers,
            "  server {{ listen 127.0.0.1:{port}; server_name h{h}.example.com;"
        );
        for p in 0..PATHS {
            let _ = writeln!(
                servers,
                "    location = /p{p} {{ proxy_pass http://be; }}\n    location /p{p}/ {{ proxy_pass http://be; }}"
            );
        }
        let _ = writeln!(servers, "    location / {{ return 404; }}\n  }}");
    }
    format!(
        "worker_processes 1;\nmaster_process off;\npid {p}/nginx.pid;\nerror_log {p}/error.log;\n\
         events {{ worker_connections 4096; }}\nhttp {{\n  access_log off;\n  \
         keepalive_requests 1000000;\n  server_names_hash_max_size 4096;\n  \
         server_names_hash_bucket_size 64;\n  proxy_http_version 1.1;\n  \
         proxy_set_header Connection \"\";\n  proxy_set_header Host $host;\n  \
         upstream be {{ server 127.0.0.1:{backend}; keepalive 64; keepalive_requests 1000000; }}\n  \
         server {{ listen 127.0.0.1:{port} default_server; return 404; }}\n{servers}}}\n",
        p = prefix.display()
    )
}

fn main() {
    let seconds = env_number("L7_BENCH_SECONDS", 10);
    let runs = env_number("L7_BENCH_RUNS", 5) as usize;

    lookup_cost();
    if std::env::var("L7_BENCH_ONLY").is_ok_and(|only| only == "lookup") {
        return;
    }

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
    let placement = Placement::detect();
    placement.for_load();
    let work = tempfile::tempdir().expect("temp dir");
    let port = || free_loopback_port().expect("a free port");
    let (nginx_port, router_port, map_port, acl_port, proxy_port) =
        (port(), port(), port(), port(), port());

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
    placement.for_proxies();
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
    // nginx as a reverse proxy with the same rules.
    let proxy_prefix = work.path().join("nginx-proxy");
    std::fs::create_dir_all(&proxy_prefix).expect("nginx-proxy dir");
    let proxy_conf = proxy_prefix.join("nginx.conf");
    std::fs::write(
        &proxy_conf,
        nginx_proxy_config(&proxy_prefix, proxy_port, nginx_port),
    )
    .expect("nginx-proxy nginx.conf");
    let proxy_proc = spawn(
        "nginx (reverse proxy)",
        &nginx,
        &[
            "-p",
            &proxy_prefix.display().to_string(),
            "-c",
            &proxy_conf.display().to_string(),
            "-g",
            "daemon off;",
        ],
    );
    placement.for_load();

    let address = |port: u16| SocketAddr::from(([127, 0, 0, 1], port));
    let first = ("h0.example.com", "/p0/x");
    let last = ("h999.example.com", "/p9/x");
    let targets = [
        ("router", router_port),
        ("haproxy-map", map_port),
        ("haproxy-acl", acl_port),
        ("nginx", proxy_port),
    ];
    for (name, port) in targets {
        wait_ready(address(port), first.0, first.1, name);
        wait_ready(address(port), last.0, last.1, name);
    }

    println!(
        "== throughput: {HOSTS} hosts x {PATHS} paths, 1 thread each, wrk -t1 -c32, median of {runs} sets x {seconds}s"
    );
    println!("   placement: {}", placement.describe());
    let router = Target {
        name: "router",
        address: address(router_port),
        pid: router_proc.0.id(),
    };
    let map = Target {
        name: "haproxy-map",
        address: address(map_port),
        pid: map_proc.0.id(),
    };
    let nginx_target = Target {
        name: "nginx",
        address: address(proxy_port),
        pid: proxy_proc.0.id(),
    };
    let acl = Target {
        name: "haproxy-acl",
        address: address(acl_port),
        pid: acl_proc.0.id(),
    };
    let rules = [
        Rule {
            name: "first",
            host: first.0,
            path: first.1,
        },
        Rule {
            name: "last",
            host: last.0,
            path: last.1,
        },
    ];
    // A run during which the hypervisor took more than this share of the CPU time from the VM
    // measures the neighbours, not the proxies: p99 is the slowest 1 % of the requests, and
    // 1 % of a 10-second run is 100 ms, so stolen time of that order is what p99 shows.
    let plan = Plan {
        runs,
        seconds,
        max_steal: env_number("L7_BENCH_MAX_STEAL", 1) as f64,
        retakes: env_number("L7_BENCH_RETAKES", 3 * runs as u64) as usize,
        settle_limit: Duration::from_secs(env_number("L7_BENCH_SETTLE_SECONDS", 20)),
        quiet_limit: Duration::from_secs(env_number("L7_BENCH_QUIET_SECONDS", 30)),
        cpus: placement.cpus(),
    };
    let compared = [&router, &map, &nginx_target];
    let results = measure_pairs(&wrk_bin, &compared, &acl, &rules, &plan);
    report(&results, &compared, &acl, &rules);

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
