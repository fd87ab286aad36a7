use proptest::prelude::*;

use super::*;

fn pool(id: &str, members: &[u32]) -> pb::Pool {
    pb::Pool {
        id: id.into(),
        members: members
            .iter()
            .enumerate()
            .map(|(i, weight)| pb::Member {
                address: format!("10.0.0.{}:80", i + 1),
                weight: *weight,
            })
            .collect(),
        https: false,
        ca_pem: None,
        unavailable_weight: 0,
    }
}

/// Snapshots always carry both listeners (`to_wire` writes them).
fn listener() -> impl Strategy<Value = Option<pb::Listener>> {
    (prop::sample::select(vec![404u32, 503]), any::<bool>()).prop_map(|(status, default)| {
        Some(pb::Listener {
            policies: Vec::new(),
            default_pool: if default { "a".into() } else { String::new() },
            no_match_status: status,
        })
    })
}

prop_compose! {
    fn snapshot()(
        pools in prop::collection::btree_map(
            prop::sample::select(vec!["a", "b", "c", "d"]),
            prop::collection::vec(0u32..3, 0..3),
            0..4,
        ),
        http in listener(),
        https in listener(),
        hosts in prop::collection::vec(prop::sample::select(vec!["x.example", "y.example"]), 0..3),
        passthrough in any::<bool>(),
        report in any::<bool>(),
    ) -> pb::Snapshot {
        let mut snapshot = pb::Snapshot {
            version: String::new(),
            http,
            https,
            pools: pools.iter().map(|(id, members)| pool(id, members)).collect(),
            certificates: hosts
                .iter()
                .map(|host| pb::Certificate {
                    hosts: vec![host.to_string()],
                    cert_pem: format!("cert {host}"),
                    key_pem: format!("key {host}"),
                    origin: "Secret a/b".into(),
                })
                .collect(),
            passthrough: if passthrough {
                vec![pb::Passthrough { host: "p.example".into(), pool: "a".into() }]
            } else {
                Vec::new()
            },
            reports: if report {
                vec![pb::Report { report_kind: pb::ReportKind::Warning.into(), message: "m".into(), ..Default::default() }]
            } else {
                Vec::new()
            },
        };
        snapshot.version = version_of(&snapshot);
        snapshot
    }
}

proptest! {
    /// Applying the delta from one snapshot to another gives exactly the other.
    #[test]
    fn applying_a_delta_gives_the_new_snapshot(base in snapshot(), next in snapshot()) {
        let delta = delta(&base, &next);
        prop_assert_eq!(apply(&base, &delta).unwrap(), next);
    }
}

#[test]
fn a_delta_carries_only_what_changed() {
    let mut base = pb::Snapshot {
        pools: vec![pool("a", &[1]), pool("b", &[1]), pool("c", &[1])],
        ..Default::default()
    };
    base.version = version_of(&base);
    let mut next = pb::Snapshot {
        pools: vec![pool("a", &[1]), pool("b", &[1, 2]), pool("d", &[1])],
        ..Default::default()
    };
    next.version = version_of(&next);
    let delta = delta(&base, &next);
    let ids: Vec<&str> = delta.pools.iter().map(|p| p.id.as_str()).collect();
    assert_eq!(ids, ["b", "d"]);
    assert_eq!(delta.removed_pools, ["c"]);
    assert!(delta.http.is_none() && delta.certificates.is_none() && delta.reports.is_none());
}

#[test]
fn a_delta_for_another_base_or_a_wrong_version_is_refused() {
    let mut base = pb::Snapshot {
        pools: vec![pool("a", &[1])],
        ..Default::default()
    };
    base.version = version_of(&base);
    let mut next = pb::Snapshot::default();
    next.version = version_of(&next);
    let mut delta = delta(&base, &next);
    let other = pb::Snapshot {
        version: "other".into(),
        ..Default::default()
    };
    assert!(apply(&other, &delta).is_err());
    delta.version = "0".repeat(64);
    assert!(matches!(
        apply(&base, &delta),
        Err(WireError::VersionMismatch { .. })
    ));
}
