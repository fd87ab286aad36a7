use nephrite_krm::Package;
use nephrite_l7::{Options, SourceObject, translate};
use proptest::prelude::*;

use super::*;

const EXAMPLES: [(&str, &str); 3] = [
    (
        "ingress.yaml",
        include_str!("../../../examples/config/ingress.yaml"),
    ),
    (
        "route.yaml",
        include_str!("../../../examples/config/route.yaml"),
    ),
    (
        "services.yaml",
        include_str!("../../../examples/config/services.yaml"),
    ),
];

/// The objects of `text`'s YAML documents, read as coming from the file `origin`.
fn read(origin: &str, text: &str, objects: &mut Vec<SourceObject>) {
    let package = Package::from_yaml(text).unwrap_or_else(|e| panic!("{origin}: {e}"));
    objects.extend(
        package
            .into_objects()
            .into_iter()
            .map(|object| SourceObject {
                object,
                origin: origin.to_owned(),
            }),
    );
}

/// The examples, plus an object that is rejected and one that loses a conflict.
fn objects() -> Vec<SourceObject> {
    let mut objects = Vec::new();
    for (name, text) in EXAMPLES {
        read(name, text, &mut objects);
    }
    let extra = "\
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata: {name: bad, namespace: shop}
spec:
  rules:
  - http:
      paths:
      - {path: nope, pathType: Prefix, backend: {service: {name: web, port: {number: 80}}}}
---
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata: {name: zz-late, namespace: shop, creationTimestamp: '2030-01-01T00:00:00Z'}
spec:
  rules:
  - host: shop.example.com
    http:
      paths:
      - {path: /cart, pathType: Prefix, backend: {service: {name: web, port: {number: 80}}}}
";
    read("extra.yaml", extra, &mut objects);
    objects
}

#[test]
fn a_snapshot_round_trips_to_the_same_translation() {
    let translation = translate(&objects(), &Options::default());
    assert!(!translation.rejections.is_empty() && !translation.conflicts.is_empty());
    let snapshot = to_wire(&translation, &[]);
    assert_eq!(snapshot.version.len(), 64);
    let back = Snapshot::try_from(&snapshot).unwrap().translation;
    assert_eq!(back.config, translation.config);
    // Keys are not serialized by the model, so compare them on their own.
    let keys = |t: &Translation| -> Vec<String> {
        t.config
            .certificates
            .iter()
            .map(|c| c.key_pem.clone())
            .collect()
    };
    assert_eq!(keys(&back), keys(&translation));
    assert_eq!(back.conflicts, translation.conflicts);
    assert_eq!(back.rejections, translation.rejections);
    // Going round again names the same version.
    assert_eq!(to_wire(&back, &[]).version, snapshot.version);
}

#[test]
fn read_errors_travel_with_the_snapshot() {
    let errors = vec!["/srv/l7/bad.yaml: line 3: did not find expected key".to_owned()];
    let snapshot = to_wire(&translate(&objects(), &Options::default()), &errors);
    assert_eq!(Snapshot::try_from(&snapshot).unwrap().read_errors, errors);
}

#[test]
fn a_tampered_snapshot_is_refused() {
    let mut snapshot = to_wire(&translate(&objects(), &Options::default()), &[]);
    snapshot.pools[0].members.clear();
    let err = Snapshot::try_from(&snapshot).unwrap_err();
    assert!(matches!(err, WireError::VersionMismatch { .. }), "{err}");
}

/// A snapshot whose content hashes right but holds what the model cannot take: `mend` changes
/// it and the version is recomputed.
fn refused(mend: impl FnOnce(&mut pb::Snapshot)) -> Invalid {
    let mut snapshot = to_wire(&translate(&objects(), &Options::default()), &[]);
    mend(&mut snapshot);
    snapshot.version = version_of(&snapshot);
    match Snapshot::try_from(&snapshot) {
        Err(WireError::Invalid { invalid, .. }) => invalid,
        other => panic!("expected an invalid snapshot, got {other:?}"),
    }
}

#[test]
fn unset_or_unknown_enums_and_a_missing_action_are_refused_by_name() {
    let first_policy =
        |s: &mut pb::Snapshot| -> pb::Policy { s.http.as_ref().unwrap().policies[0].clone() };
    let invalid = refused(|s| {
        let policy = &mut s.http.as_mut().unwrap().policies[0];
        policy.rules[0].rule_type = 99;
    });
    assert!(
        matches!(invalid, Invalid::RuleType { value: 99, .. }),
        "{invalid}"
    );
    let invalid = refused(|s| {
        let policy = &mut s.http.as_mut().unwrap().policies[0];
        policy.rules[0].compare_type = pb::CompareType::Unspecified.into();
    });
    assert!(
        matches!(invalid, Invalid::CompareType { value: 0, .. }),
        "{invalid}"
    );
    let mut name = String::new();
    let invalid = refused(|s| {
        name = first_policy(s).name;
        s.http.as_mut().unwrap().policies[0].action = None;
    });
    assert_eq!(invalid.to_string(), format!("policy {name}: no action"));
    let invalid = refused(|s| s.reports[0].report_kind = 42);
    assert!(
        matches!(invalid, Invalid::ReportKind { value: 42, .. }),
        "{invalid}"
    );
    let invalid = refused(|s| s.pools[0].members[0].address = "nowhere".into());
    assert!(
        matches!(invalid, Invalid::MemberAddress { .. }),
        "{invalid}"
    );
}

#[test]
fn a_router_acknowledgement_round_trips() {
    let ack = RouterAck {
        router: "edge-1:8080".into(),
        version: "ab".repeat(32),
        address: "10.0.0.7:8080".into(),
        acknowledged_at: "2026-12-07T12:00:00Z".into(),
    };
    assert_eq!(RouterAck::from(pb::RouterStatus::from(&ack)), ack);
}

#[test]
fn a_bad_redirect_code_and_no_match_status_are_refused_naming_them() {
    let mut name = String::new();
    let invalid = refused(|s| {
        let policy = &mut s.http.as_mut().unwrap().policies[0];
        name = policy.name.clone();
        policy.action = Some(pb::policy::Action::RedirectToUrl(pb::RedirectToUrl {
            url: "https://elsewhere.example.com/".into(),
            code: 70_000,
        }));
    });
    assert_eq!(
        invalid.to_string(),
        format!("policy {name}: redirect code 70000 out of range")
    );
    let invalid = refused(|s| s.https.as_mut().unwrap().no_match_status = 1 << 20);
    assert_eq!(invalid.to_string(), "no-match status 1048576 out of range");
}

#[test]
fn a_different_source_gives_a_different_version() {
    let mut objects = objects();
    let a = to_wire(&translate(&objects, &Options::default()), &[]).version;
    objects.pop();
    let b = to_wire(&translate(&objects, &Options::default()), &[]).version;
    assert_ne!(a, b);
}

proptest! {
    /// The version depends on the content only: any order of the same objects (as two
    /// controllers, or one restarted, list them) gives the same version.
    #[test]
    fn the_version_does_not_depend_on_object_order(seed in any::<u64>()) {
        let mut objects = objects();
        let expected = to_wire(&translate(&objects, &Options::default()), &[]).version;
        let mut state = seed;
        for i in (1..objects.len()).rev() {
            state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            let j = (state >> 33) as usize % (i + 1);
            objects.swap(i, j);
        }
        prop_assert_eq!(to_wire(&translate(&objects, &Options::default()), &[]).version, expected);
    }
}

/// Every Gateway API conformance case of `core/l7`, translated.
fn gateway_cases() -> Vec<(String, Translation)> {
    let dir =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../core/l7/tests/gateway/cases");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|entry| entry.expect("entry").path())
        .collect();
    files.sort();
    files
        .into_iter()
        .map(|path| {
            let name = path.display().to_string();
            let text = std::fs::read_to_string(&path).expect("case");
            let mut objects = Vec::new();
            read(&name, &text, &mut objects);
            (name, translate(&objects, &Options::default()))
        })
        .collect()
}

#[test]
fn gateway_filters_methods_queries_redirects_and_500_shares_round_trip() {
    let cases = gateway_cases();
    let all: Vec<&Policy> = cases
        .iter()
        .flat_map(|(_, t)| {
            t.config
                .http
                .policies()
                .iter()
                .chain(t.config.https.policies())
        })
        .collect();
    // The cases use every extension of the model.
    assert!(all.iter().any(|p| !p.filters.request_headers.is_empty()));
    assert!(all.iter().any(|p| !p.filters.response_headers.is_empty()));
    assert!(all.iter().any(|p| p.filters.rewrite_host.is_some()));
    assert!(all.iter().any(|p| p.filters.rewrite_path.is_some()));
    assert!(all.iter().any(|p| !p.filters.mirrors.is_empty()));
    assert!(
        all.iter()
            .any(|p| matches!(p.action, Action::Redirect { .. }))
    );
    assert!(
        all.iter()
            .any(|p| p.rules.iter().any(|r| r.rule_type == RuleType::Method))
    );
    assert!(
        all.iter()
            .any(|p| p.rules.iter().any(|r| r.rule_type == RuleType::QueryParam))
    );
    assert!(
        cases
            .iter()
            .any(|(_, t)| t.config.pools.values().any(|p| p.unavailable_weight > 0))
    );
    for (name, translation) in &cases {
        let snapshot = to_wire(translation, &[]);
        let back = Snapshot::try_from(&snapshot)
            .unwrap_or_else(|e| panic!("{name}: {e}"))
            .translation;
        assert_eq!(back.config, translation.config, "{name}");
    }
}

#[test]
fn a_router_that_drops_the_new_fields_refuses_the_snapshot_instead_of_serving_without_them() {
    for (name, translation) in gateway_cases() {
        let snapshot = to_wire(&translation, &[]);
        // What a router built before the fields existed decodes: prost drops unknown fields.
        let mut old = snapshot.clone();
        for listener in [old.http.as_mut(), old.https.as_mut()]
            .into_iter()
            .flatten()
        {
            for policy in &mut listener.policies {
                policy.filters = None;
            }
        }
        for pool in &mut old.pools {
            pool.unavailable_weight = 0;
        }
        if old == snapshot {
            continue;
        }
        assert!(
            matches!(
                Snapshot::try_from(&old),
                Err(WireError::VersionMismatch { .. })
            ),
            "{name}"
        );
    }
}

#[test]
fn a_path_change_without_its_change_is_refused_naming_the_field() {
    let (_, translation) = gateway_cases()
        .into_iter()
        .find(|(name, _)| name.ends_with("extended-httproute-url-rewrite.yaml"))
        .expect("the rewrite case");
    let mut snapshot = to_wire(&translation, &[]);
    let policy = snapshot
        .http
        .as_mut()
        .and_then(|l| {
            l.policies
                .iter_mut()
                .find(|p| p.filters.as_ref().is_some_and(|f| f.rewrite_path.is_some()))
        })
        .expect("a rewriting policy");
    if let Some(filters) = policy.filters.as_mut() {
        filters.rewrite_path = Some(pb::PathChange { change: None });
    }
    snapshot.version = version_of(&snapshot);
    let err = Snapshot::try_from(&snapshot)
        .expect_err("refused")
        .to_string();
    assert!(err.contains("filters.rewrite_path: no change"), "{err}");
}
