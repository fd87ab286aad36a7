//! `nimbess-cni`: the CNI 1.1.0 plugin of the Nimbess agent. Executed by the
//! container runtime with the CNI environment and the network configuration
//! on stdin (at most [`MAX_STDIN`] bytes); forwards to the agent's Unix
//! socket; prints the result or the error on stdout. Run by a person (no
//! `CNI_COMMAND` in the environment) with `--version` or `--help`, it says
//! what it is instead.

use std::collections::BTreeMap;
use std::io::Write as _;

use nimbess_client::cni::{CniError, ErrorCode, SUPPORTED_VERSIONS};
use nimbess_cni::{MAX_STDIN, Outcome, read_config};

const HELP: &str = "\
The CNI plugin of the Nimbess agent: the container runtime executes it with the CNI
environment (CNI_COMMAND, CNI_CONTAINERID, CNI_NETNS, CNI_IFNAME, ...) and the network
configuration on stdin; it forwards each call to nimbess-agent over its Unix socket
(\"agentSocket\" in the configuration, default /run/nimbess/agent.sock).

When the agent requires credentials, the configuration names them as every Nephrite
client's flags do: \"tokenFile\" (a file whose first line is the bearer token), or
\"ca\", \"cert\" and \"key\" (PEM files, mutual TLS on the socket), and \"tlsDomain\";
a key the configuration does not set is read from the runtime's environment
(NEPHRITE_TOKEN_FILE, NEPHRITE_CA, NEPHRITE_CERT, NEPHRITE_KEY, NEPHRITE_TLS_DOMAIN).

Install it in the runtime's CNI bin directory (e.g. /opt/cni/bin) and reference it as
\"type\": \"nimbess-cni\" in a network configuration; see the nimbess-agent README.

Usage: nimbess-cni [--version | --help]";

fn main() {
    let env: BTreeMap<String, String> = std::env::vars().collect();
    if !env.contains_key("CNI_COMMAND") {
        match std::env::args().nth(1).as_deref() {
            Some("--version" | "-V") => {
                println!(
                    "nimbess-cni {} (CNI {})",
                    env!("CARGO_PKG_VERSION"),
                    SUPPORTED_VERSIONS.join(", ")
                );
                return;
            }
            Some("--help" | "-h") => {
                println!("nimbess-cni {}\n{HELP}", env!("CARGO_PKG_VERSION"));
                return;
            }
            _ => {}
        }
    }
    let outcome = run(&env);
    if let Some(doc) = outcome.stdout {
        let mut out = std::io::stdout().lock();
        let _ = writeln!(out, "{doc}");
        let _ = out.flush();
    }
    std::process::exit(outcome.exit_code);
}

fn run(env: &BTreeMap<String, String>) -> Outcome {
    let failure = |e: CniError| Outcome {
        stdout: Some(e.to_json("1.1.0")),
        exit_code: 1,
    };
    let needs_stdin = env.get("CNI_COMMAND").map(String::as_str) != Some("VERSION");
    let read_stdin = needs_stdin || !std::io::IsTerminal::is_terminal(&std::io::stdin());
    let stdin = if read_stdin {
        match read_config(std::io::stdin().lock(), MAX_STDIN) {
            Ok(bytes) => bytes,
            Err(e) => return failure(e),
        }
    } else {
        Vec::new()
    };
    match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime.block_on(nimbess_cni::run(env, &stdin)),
        Err(e) => failure(CniError::new(ErrorCode::Io, format!("cannot start: {e}"))),
    }
}
