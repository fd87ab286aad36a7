//! No secret in any log: the demo's first half (bmm-sim with a signing secret, bmm-provider with
//! a bearer token provisioning three clusters and registering them as preparer Sites) runs with
//! RUST_LOG at debug, and every line every daemon and command wrote is searched for the secret
//! and the token.
//!
//! The binaries come from `target/debug` (the workspace's test build puts them there); without
//! them the test is skipped, loudly (a failure under `CI=true`).

use nephrite_e2e::progress::Progress;
use nephrite_e2e::{bmm, test_lab, tko};

const BINARIES: &[&str] = &["preparer", "bmm-sim", "bmm-provider"];

#[test]
fn no_log_line_of_a_run_holds_its_secret_or_token() {
    let Some(mut lab) = test_lab(BINARIES) else {
        return;
    };
    // Debug logs are where a careless client prints its headers.
    lab.set_log_level("debug");
    let progress = Progress::new();
    let preparer = tko::store(&mut lab, &progress).expect("the preparer");
    let provisioned = bmm::provision(&mut lab, &progress, preparer).expect("provisioning");
    assert_eq!(provisioned.clusters_ready, bmm::CLUSTERS.len());

    let token = std::fs::read_to_string(lab.dir().join("bmm/token")).expect("the token file");
    let token = token.trim();
    let secret = bmm::sim_secret();
    assert!(token.len() > 20, "a real token: {token:?}");
    let mut lines = 0;
    let mut leaks = Vec::new();
    for entry in std::fs::read_dir(lab.dir().join("logs")).expect("the logs") {
        let path = entry.unwrap().path();
        let text = std::fs::read_to_string(&path).unwrap_or_default();
        for line in text.lines() {
            lines += 1;
            if line.contains(token) || line.contains(&secret) {
                leaks.push(format!("{}: {line}", path.display()));
            }
        }
    }
    assert!(lines > 0, "the run logged nothing");
    assert!(
        leaks.is_empty(),
        "secrets in the logs:\n{}",
        leaks.join("\n")
    );
    assert!(lab.cleanup().is_empty());
}
