//! `nephrite-echo`: answers every HTTP request with its pod's name and the request path.
//!
//! One thread per connection, one request per connection: the server exists to show which
//! pod a request reached, in tests and the demo, not to be fast. SIGTERM and SIGINT end it at
//! once with status 0 (as a container's PID 1 it would otherwise ignore them).

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::time::Duration;

use nephrite_echo::{MAX_HEAD, body, listen_addresses, pod_name, request_path, response};
use nix::sys::signal::{SigSet, Signal};

fn main() {
    // Blocked before any thread starts, so every thread inherits the mask and only the
    // waiting thread below receives them.
    let mut signals = SigSet::empty();
    signals.add(Signal::SIGTERM);
    signals.add(Signal::SIGINT);
    if let Err(e) = signals.thread_block() {
        eprintln!("nephrite-echo: cannot block SIGTERM/SIGINT: {e}");
        std::process::exit(1);
    }
    std::thread::spawn(move || {
        let signal = signals.wait();
        eprintln!("nephrite-echo: {signal:?}, exiting");
        std::process::exit(0);
    });

    let args: Vec<String> = std::env::args().skip(1).collect();
    let addresses = match listen_addresses(&args, std::env::var("ECHO_LISTEN").ok()) {
        Ok(addresses) => addresses,
        Err(e) => {
            eprintln!("nephrite-echo: {e}");
            std::process::exit(2);
        }
    };
    let pod = pod_name(std::env::var("POD_NAME").ok(), || {
        std::fs::read_to_string("/proc/sys/kernel/hostname")
            .ok()
            .map(|h| h.trim().to_owned())
    });
    // Every address is bound before any is served: a pod either serves all its ports or
    // exits, never some of them.
    let mut listeners = Vec::new();
    for listen in &addresses {
        match TcpListener::bind(listen) {
            Ok(listener) => listeners.push(listener),
            Err(e) => {
                eprintln!("nephrite-echo: cannot listen on {listen}: {e}");
                std::process::exit(1);
            }
        }
    }
    eprintln!(
        "nephrite-echo: pod {pod} listening on {}",
        addresses.join(", ")
    );
    let mut accepting = Vec::new();
    for listener in listeners {
        let pod = pod.clone();
        accepting.push(std::thread::spawn(move || accept(&listener, &pod)));
    }
    for thread in accepting {
        let _ = thread.join();
    }
}

/// Serve every connection `listener` accepts, one thread each.
fn accept(listener: &TcpListener, pod: &str) {
    for stream in listener.incoming() {
        match stream {
            Ok(stream) => {
                let pod = pod.to_owned();
                std::thread::spawn(move || serve(stream, &pod));
            }
            Err(e) => eprintln!("nephrite-echo: accept: {e}"),
        }
    }
}

/// Read the request head up to its first line and answer it.
fn serve(mut stream: TcpStream, pod: &str) {
    let _ = stream.set_read_timeout(Some(Duration::from_secs(10)));
    let mut head = Vec::new();
    let mut chunk = [0u8; 1024];
    let answer = loop {
        match request_path(&head) {
            Ok(Some(path)) => break response("200 OK", &body(pod, &path)),
            Ok(None) if head.len() >= MAX_HEAD => {
                break response(
                    "431 Request Header Fields Too Large",
                    "request line too long\n",
                );
            }
            Ok(None) => {}
            Err(e) => break response("400 Bad Request", &format!("{e}\n")),
        }
        match stream.read(&mut chunk) {
            Ok(0) | Err(_) => return,
            Ok(n) => head.extend_from_slice(&chunk[..n]),
        }
    };
    let _ = stream.write_all(answer.as_bytes());
}
