//! `nimbess-cni`: the CNI 1.1.0 plugin of the Nimbess agent. Executed by the
//! container runtime with the CNI environment and the network configuration
//! on stdin; forwards to the agent's Unix socket; prints the result or the
//! error on stdout.

use std::collections::BTreeMap;
use std::io::{Read as _, Write as _};

fn main() {
    let env: BTreeMap<String, String> = std::env::vars().collect();
    let mut stdin = Vec::new();
    let needs_stdin = env.get("CNI_COMMAND").map(String::as_str) != Some("VERSION");
    let read_stdin = needs_stdin || !std::io::IsTerminal::is_terminal(&std::io::stdin());
    if read_stdin && let Err(e) = std::io::stdin().read_to_end(&mut stdin) {
        eprintln!("nimbess-cni: cannot read stdin: {e}");
    }
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            let err = nimbess_agent::cni::CniError::new(
                nimbess_agent::cni::ErrorCode::Io,
                format!("cannot start: {e}"),
            );
            println!("{}", err.to_json("1.1.0"));
            std::process::exit(1);
        }
    };
    let outcome = runtime.block_on(nimbess_agent::plugin::run(&env, &stdin));
    if let Some(doc) = outcome.stdout {
        let mut out = std::io::stdout().lock();
        let _ = writeln!(out, "{doc}");
        let _ = out.flush();
    }
    std::process::exit(outcome.exit_code);
}
