use super::*;
use nephrite_pipeline::{Mac, NetworkSpec, PortRequest, RenderFacts, port_id};

fn owner(c: &str) -> Owner {
    Owner {
        container_id: c.into(),
        ifname: "eth0".into(),
    }
}

/// The MAC port `c<k>` asks for (a reserved VIF's): odd ports ask, even ones leave it to the
/// data plane.
fn requested_mac(k: u8) -> Option<Mac> {
    (k % 2 == 1).then_some(Mac([0x0e, 0, 0, 0, 1, k]))
}

/// A state with one network and `n` rendered ports, each change journaled.
fn grow(store: &mut StateStore, n: u8) -> PersistedState {
    let nets = [NetworkSpec::l2(
        "blue",
        "10.9.0.0/24".parse().expect("cidr"),
    )];
    let mut st = PersistedState::default();
    st.model.apply_networks(&nets).expect("nets");
    st.ipam.sync_networks(&nets).expect("pools");
    store.save(&st.model, &st.ipam, &st.vifs).expect("snapshot");
    for k in 0..n {
        let c = format!("c{k}");
        let address = st.ipam.allocate("blue", &owner(&c)).expect("address");
        st.model
            .add_port(PortRequest {
                container_id: c.clone(),
                ifname: "eth0".into(),
                netns: format!("/run/netns/{c}"),
                network: "blue".into(),
                address,
                address6: None,
                pod: None,
                mac: requested_mac(k),
            })
            .expect("add");
        let id = port_id(&c, "eth0");
        let facts = RenderFacts {
            mac: requested_mac(k).unwrap_or(Mac([2, 0, 0, 0, 0, k])),
            ifindex: u32::from(k) + 10,
            modules: Default::default(),
        };
        st.model.record_facts(&id, facts).expect("facts");
        let port = st.model.port(&id).expect("port").clone();
        let records = [
            Record::Held {
                network: "blue".into(),
                address: address.addr,
                owner: owner(&c),
            },
            Record::PortPut {
                port,
                address6: None,
            },
        ];
        store
            .append(&records, &st.model, &st.ipam, &st.vifs)
            .expect("append");
    }
    st
}

#[test]
fn journal_replays_onto_the_snapshot() {
    let dir = tempfile::tempdir().expect("tmp");
    let mut store = StateStore::open(dir.path()).expect("open");
    let mut st = grow(&mut store, 5);
    // a DEL
    let gone = port_id("c2", "eth0");
    st.model.remove_port(&gone).expect("remove");
    st.ipam.release_everywhere(&owner("c2"));
    let records = [
        Record::PortGone { port: gone },
        Record::Released { owner: owner("c2") },
    ];
    store
        .append(&records, &st.model, &st.ipam, &st.vifs)
        .expect("append");
    let journal = std::fs::read_to_string(store.journal_path()).expect("journal");
    assert_eq!(journal.lines().count(), 12, "one line per record");
    let loaded = store.load().expect("load");
    assert_eq!(loaded, st);
    let asked = |k: u8| {
        loaded
            .model
            .port(&port_id(&format!("c{k}"), "eth0"))
            .map(|p| p.requested_mac)
    };
    assert_eq!(
        asked(1),
        Some(requested_mac(1)),
        "a requested MAC is journaled"
    );
    assert_eq!(asked(0), Some(None));
    // replaying twice changes nothing (a crash between snapshot and truncation)
    let mut again = store.load().expect("load");
    for line in journal.lines() {
        let r: Record = serde_json::from_str(line).expect("record");
        r.replay(&mut again).expect("replay");
    }
    assert_eq!(again, st);
    assert_eq!(nephrite_pipeline::violations(&again.model), vec![]);
}

#[test]
fn a_torn_last_line_never_happened_but_a_torn_middle_is_corrupt() {
    let dir = tempfile::tempdir().expect("tmp");
    let mut store = StateStore::open(dir.path()).expect("open");
    let st = grow(&mut store, 2);
    let path = store.journal_path();
    let mut text = std::fs::read_to_string(&path).expect("journal");
    text.push_str("{\"op\":\"port_put\",\"po");
    std::fs::write(&path, &text).expect("tear");
    assert_eq!(store.load().expect("load"), st);
    text.push_str(
        "\n{\"op\":\"released\",\"owner\":{\"container_id\":\"c0\",\"ifname\":\"eth0\"}}\n",
    );
    std::fs::write(&path, &text).expect("corrupt");
    let err = store.load().expect_err("corrupt");
    assert!(err.to_string().contains("line 5"), "{err}");
}

#[test]
fn the_journal_is_folded_into_the_snapshot_when_it_outgrows_it() {
    let dir = tempfile::tempdir().expect("tmp");
    let mut store = StateStore::open(dir.path()).expect("open");
    let st = grow(&mut store, 40);
    let journal = std::fs::metadata(store.journal_path())
        .expect("journal")
        .len();
    let snapshot = std::fs::metadata(store.path()).expect("snapshot").len();
    assert!(snapshot > 4000, "folded at least once: {snapshot} bytes");
    assert!(
        journal <= JOURNAL_FLOOR.max(snapshot) + 2048,
        "journal {journal} bytes"
    );
    assert_eq!(store.load().expect("load"), st);
}

#[test]
fn state_files_are_readable_by_their_owner_only() {
    use std::os::unix::fs::PermissionsExt as _;
    let dir = tempfile::tempdir().expect("tmp");
    let mut store = StateStore::open(dir.path()).expect("open");
    let mode =
        |p: &std::path::Path| std::fs::metadata(p).expect("stat").permissions().mode() & 0o777;
    // a journal appended to before any snapshot exists
    store
        .append(
            &[Record::Released {
                owner: Owner {
                    container_id: "c".into(),
                    ifname: "eth0".into(),
                },
            }],
            &Model::new(),
            &Ipam::new(),
            &Default::default(),
        )
        .expect("append");
    assert_eq!(mode(&store.journal_path()), 0o600);
    // files an older agent left world-readable are narrowed by the next snapshot
    for p in [store.path(), store.journal_path()] {
        std::fs::write(&p, b"").expect("write");
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o644)).expect("chmod");
    }
    store
        .save(&Model::new(), &Ipam::new(), &Default::default())
        .expect("save");
    assert_eq!(mode(&store.path()), 0o600);
    assert_eq!(mode(&store.journal_path()), 0o600);
}

#[test]
fn ports_journaled_before_requested_macs_existed_load_asking_for_none() {
    let dir = tempfile::tempdir().expect("tmp");
    let mut store = StateStore::open(dir.path()).expect("open");
    let st = grow(&mut store, 2);
    let path = store.journal_path();
    let text = std::fs::read_to_string(&path).expect("journal");
    let mut old = String::new();
    for line in text.lines() {
        let mut record: serde_json::Value = serde_json::from_str(line).expect("record");
        if let Some(port) = record.get_mut("port").and_then(|p| p.as_object_mut()) {
            port.remove("requested_mac");
        }
        old.push_str(&record.to_string());
        old.push('\n');
    }
    assert_ne!(old, text, "c1's record named its MAC");
    std::fs::write(&path, old).expect("older journal");
    let loaded = store.load().expect("load");
    let c1 = loaded.model.port(&port_id("c1", "eth0")).expect("c1");
    assert_eq!(c1.requested_mac, None);
    assert_eq!(c1.mac(), requested_mac(1), "the facts are kept");
    let mut expected = st;
    let id = port_id("c1", "eth0");
    let port = expected.model.port(&id).expect("c1").clone();
    expected.model.remove_port(&id).expect("remove");
    expected
        .model
        .insert_port(nephrite_pipeline::Port {
            requested_mac: None,
            ..port
        })
        .expect("insert");
    assert_eq!(loaded, expected);
}
