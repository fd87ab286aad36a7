//! The daemons together when one of them crashes (SIGKILL: no drain, nothing saved on the way
//! out) and comes back, as an operator's systemd would restart it:
//!
//! - the preparer, right after the topology's deployment is created → the topology still
//!   converges to its four children, none twice;
//! - ntc, while the preparer is calling it to create the children → no duplicate child, and the
//!   restarted ntc still approves the SMF once its UPFs are;
//! - the router → it serves the same rules, from the controller, as before.
//!
//! The binaries come from `target/debug` (the workspace's test build puts them there); without
//! them the tests are skipped, loudly (a failure under `CI=true`).

use std::collections::BTreeSet;
use std::time::Duration;

use nephrite_e2e::lab::Lab;
use nephrite_e2e::tko::{self, EXPECTED_CHILDREN};
use nephrite_e2e::{interrupt, router, test_lab, workspace_root};

const BINARIES: &[&str] = &["preparer", "ntc", "kuryr-l7"];

/// A lab, or `None` (after saying why) when the daemons are not built.
fn lab() -> Option<Lab> {
    test_lab(BINARIES)
}

/// Every child once: distinct ids, and one per (NF type, site).
fn assert_no_duplicates(children: &[tko::Child]) {
    let ids: BTreeSet<&str> = children.iter().map(|c| c.id.as_str()).collect();
    let placements: BTreeSet<(&str, &str)> = children
        .iter()
        .map(|c| (c.nf_type.as_str(), c.site.as_str()))
        .collect();
    assert_eq!(ids.len(), children.len(), "{children:?}");
    assert_eq!(
        placements,
        [
            ("amf", "regional"),
            ("smf", "regional"),
            ("upf", "edge01"),
            ("upf", "edge02")
        ]
        .into(),
        "{children:?}"
    );
}

#[test]
fn the_topology_converges_through_a_preparer_crash() {
    let Some(mut lab) = lab() else { return };
    let preparer = tko::start_preparer(&mut lab).unwrap();
    tko::register_sites(&lab, preparer, |_| {}).unwrap();
    tko::start_ntc(&mut lab, preparer).unwrap();
    let parent = tko::create_topology(&lab, preparer, &workspace_root()).unwrap();

    lab.crash_and_restart("preparer").unwrap();
    lab.wait_listening("preparer", preparer).unwrap();
    let children = tko::wait_children(&mut lab, preparer, &parent, |_| {}).unwrap();
    assert_no_duplicates(&children);
    // Settled: a few more preparation rounds create nothing more.
    interrupt::sleep(Duration::from_secs(2)).unwrap();
    let again = tko::list_children(&lab, preparer, &parent).unwrap();
    assert_eq!(again.len(), EXPECTED_CHILDREN, "{again:?}");
    assert!(lab.cleanup().is_empty());
}

#[test]
fn an_ntc_crash_while_it_creates_children_creates_no_duplicate() {
    let Some(mut lab) = lab() else { return };
    let preparer = tko::start_preparer(&mut lab).unwrap();
    tko::register_sites(&lab, preparer, |_| {}).unwrap();
    let ntc = tko::start_ntc(&mut lab, preparer).unwrap();
    let parent = tko::create_topology(&lab, preparer, &workspace_root()).unwrap();

    // Crash ntc as soon as the first child exists: the preparer's call fails, it retries, and
    // the restarted ntc creates only what is missing.
    interrupt::wait_for("a first child", Duration::from_secs(30), || {
        Ok((!tko::list_children(&lab, preparer, &parent)?.is_empty()).then_some(()))
    })
    .unwrap();
    lab.crash_and_restart("ntc").unwrap();
    lab.wait_listening("ntc", ntc).unwrap();
    let children = tko::wait_children(&mut lab, preparer, &parent, |_| {}).unwrap();
    assert_no_duplicates(&children);

    // The restarted ntc tracks the children: approving the UPFs gets the SMF approved.
    for upf in children.iter().filter(|c| c.nf_type == "upf") {
        tko::preparer_cli(&lab, preparer, &["deployment", "approve", &upf.id]).unwrap();
    }
    interrupt::wait_for("ntc to approve the SMF", Duration::from_secs(30), || {
        let children = tko::list_children(&lab, preparer, &parent)?;
        Ok(children
            .iter()
            .any(|c| c.nf_type == "smf" && c.approved)
            .then_some(()))
    })
    .unwrap();
    let after = tko::list_children(&lab, preparer, &parent).unwrap();
    assert_no_duplicates(&after);
    assert!(lab.cleanup().is_empty());
}

#[test]
fn a_crashed_router_serves_the_same_rules_after_its_restart() {
    let Some(mut lab) = lab() else { return };
    let names = ["upf-west-edge01", "smf-regional", "amf-regional"];
    let endpoints = router::serve_endpoints(names).unwrap();
    let (_controller, router_addr) = router::start(&mut lab, &endpoints).unwrap();
    let mut before = Vec::new();
    let (ok, sent) =
        router::call_all(router_addr, &endpoints, |a| before.push(a.to_owned())).unwrap();
    assert_eq!((ok, sent), (6, 6), "{before:#?}");

    lab.crash_and_restart("kuryr-l7-router").unwrap();
    router::wait_serving(&mut lab, router_addr, &endpoints).unwrap();
    let mut after = Vec::new();
    let (ok, sent) =
        router::call_all(router_addr, &endpoints, |a| after.push(a.to_owned())).unwrap();
    assert_eq!((ok, sent), (6, 6), "{after:#?}");
    assert_eq!(before, after);
    assert!(lab.cleanup().is_empty());
}
