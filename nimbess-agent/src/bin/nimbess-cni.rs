//! `nimbess-cni`: the CNI 1.1.0 plugin of the Nimbess agent. Executed by the
//! container runtime with the CNI environment and the network configuration
//! on stdin (at most [`MAX_STDIN`] bytes); forwards to the agent's Unix
//! socket; prints the result or the error on stdout.

use std::collections::BTreeMap;
use std::io::Write as _;

use nimbess_agent::cni::{CniError, ErrorCode};
use nimbess_agent::plugin::{MAX_STDIN, Outcome, read_config};

fn main() {
    let env: BTreeMap<String, String> = std::env::vars().collect();
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
        Ok(runtime) => runtime.block_on(nimbess_agent::plugin::run(env, &stdin)),
        Err(e) => failure(CniError::new(ErrorCode::Io, format!("cannot start: {e}"))),
    }
}
