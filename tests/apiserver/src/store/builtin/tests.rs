//! Unit tests of the built-in kinds' spec rules, each case as kube-apiserver v1.37 answered it.

use super::*;
use serde_json::json;

fn problems_of(plural: &str, spec: Value) -> Vec<(String, String)> {
    let rt = crate::resources::builtins()
        .into_iter()
        .find(|t| t.plural == plural && t.group == "networking.k8s.io")
        .unwrap_or_else(|| panic!("{plural} is built in"));
    spec_problems(&rt, &json!({"spec": spec}))
        .into_iter()
        .map(|p| (p.field, p.problem))
        .collect()
}

fn pair(field: &str, problem: &str) -> (String, String) {
    (field.to_string(), problem.to_string())
}

#[test]
fn cidrs_must_parse_and_be_canonical() {
    let peer = |cidr: &str| json!({"podSelector": {}, "ingress": [{"from": [{"ipBlock": {"cidr": cidr}}]}]});
    let at = "spec.ingress[0].from[0].ipBlock.cidr";
    for ok in [
        "10.0.0.0/8",
        "0.0.0.0/0",
        "fd00::/8",
        "2001:db8::/64",
        "10.1.2.3/32",
    ] {
        assert_eq!(problems_of("networkpolicies", peer(ok)), vec![], "{ok}");
    }
    let invalid = |v: &str| {
        format!(
            "Invalid value: {v:?}: must be a valid CIDR value, (e.g. 10.9.8.0/24 or 2001:db8::/64)"
        )
    };
    for bad in [
        "10.0.0.0/33",
        "fd00::/129",
        "10.0.0.0",
        "10.0.0/8",
        "256.0.0.0/8",
        "10.0.0.0/-1",
        "x/8",
    ] {
        assert_eq!(
            problems_of("networkpolicies", peer(bad)),
            vec![pair(at, &invalid(bad))],
            "{bad}"
        );
    }
    let cases = [
        (
            "10.0.0.1/8",
            "must not have bits set beyond the prefix length",
        ),
        (
            "010.0.0.0/8",
            "must not have leading 0s in IP or prefix length",
        ),
        (
            "10.0.0.0/08",
            "must not have leading 0s in IP or prefix length",
        ),
        (
            "::ffff:10.0.0.0/104",
            "must not have an IPv4-mapped IPv6 address",
        ),
    ];
    for (bad, why) in cases {
        let want = format!("Invalid value: {bad:?}: {why}");
        assert_eq!(
            problems_of("networkpolicies", peer(bad)),
            vec![pair(at, &want)],
            "{bad}"
        );
    }
    assert_eq!(
        problems_of("networkpolicies", peer("")),
        vec![pair(at, "Required value")]
    );
}

#[test]
fn excepts_are_strict_subsets() {
    let spec = json!({"podSelector": {}, "egress": [{"to": [{"ipBlock": {
        "cidr": "10.0.0.0/8",
        "except": ["10.1.0.0/16", "11.0.0.0/16", "10.0.0.0/8", "10.1.0.0/33"],
    }}]}]});
    let at = |i: usize| format!("spec.egress[0].to[0].ipBlock.except[{i}]");
    assert_eq!(
        problems_of("networkpolicies", spec),
        vec![
            pair(
                &at(1),
                "Invalid value: \"11.0.0.0/16\": must be a strict subset of `cidr`"
            ),
            pair(
                &at(2),
                "Invalid value: \"10.0.0.0/8\": must be a strict subset of `cidr`"
            ),
            pair(
                &at(3),
                "Invalid value: \"10.1.0.0/33\": must be a valid CIDR value, (e.g. 10.9.8.0/24 or 2001:db8::/64)"
            ),
        ]
    );
}

#[test]
fn selectors_need_known_operators_and_fitting_values() {
    let spec = json!({
        "podSelector": {"matchExpressions": [
            {"key": "app", "operator": "Equals", "values": ["a"]},
            {"key": "app", "operator": "In", "values": []},
            {"key": "app", "operator": "Exists", "values": ["a"]},
            {"key": "app", "operator": "NotIn", "values": ["a"]},
            {"key": "a/b/c", "operator": "DoesNotExist"},
        ]},
    });
    let got = problems_of("networkpolicies", spec);
    let at = "spec.podSelector.matchExpressions";
    assert_eq!(
        got[0],
        pair(
            &format!("{at}[0].operator"),
            "Invalid value: \"Equals\": not a valid selector operator"
        )
    );
    assert_eq!(
        got[1],
        pair(
            &format!("{at}[1].values"),
            "Required value: must be specified when `operator` is 'In' or 'NotIn'"
        )
    );
    assert_eq!(
        got[2],
        pair(
            &format!("{at}[2].values"),
            "Forbidden: may not be specified when `operator` is 'Exists' or 'DoesNotExist'"
        )
    );
    assert_eq!(got[3].0, format!("{at}[4].key"));
    assert!(
        got[3]
            .1
            .starts_with("Invalid value: \"a/b/c\": a valid label key must consist"),
        "{}",
        got[3].1
    );
    assert_eq!(got.len(), 4);
}

#[test]
fn peers_and_policy_types() {
    let spec = json!({
        "podSelector": {},
        "ingress": [{"from": [{}, {"ipBlock": {"cidr": "10.0.0.0/8"}, "namespaceSelector": {}}, {"podSelector": {}, "namespaceSelector": {}}]}],
        "policyTypes": ["Ingress", "Sideways"],
    });
    assert_eq!(
        problems_of("networkpolicies", spec),
        vec![
            pair(
                "spec.ingress[0].from[0]",
                "Required value: must specify a peer"
            ),
            pair(
                "spec.ingress[0].from[1]",
                "Forbidden: may not specify both ipBlock and another peer"
            ),
            pair(
                "spec.policyTypes[1]",
                "Unsupported value: \"Sideways\": supported values: \"Ingress\", \"Egress\""
            ),
        ]
    );
    let three = json!({"podSelector": {}, "policyTypes": ["Ingress", "Sideways", "Egress"]});
    assert_eq!(
        problems_of("networkpolicies", three),
        vec![pair(
            "spec.policyTypes",
            "Invalid value: [\"Ingress\",\"Sideways\",\"Egress\"]: may not specify more than two policyTypes"
        )]
    );
}

#[test]
fn ingress_paths_by_path_type() {
    let path = |p: Value, t: Value| json!({"path": p, "pathType": t, "backend": {"service": {"name": "s", "port": {"number": 80}}}});
    let spec = json!({"rules": [{"http": {"paths": [
        path(json!("foo"), json!("Prefix")),
        path(json!("bar"), json!("Exact")),
        path(json!("baz"), json!("ImplementationSpecific")),
        path(Value::Null, json!("ImplementationSpecific")),
        path(json!("/a//b/./c/."), json!("Prefix")),
        path(json!("/x//y"), json!("ImplementationSpecific")),
        path(json!("/z"), Value::Null),
        path(json!("/w"), json!("Regex")),
        path(Value::Null, json!("Exact")),
        path(json!("/ok"), json!("Prefix")),
    ]}}]});
    let at = |i: usize, f: &str| format!("spec.rules[0].http.paths[{i}].{f}");
    assert_eq!(
        problems_of("ingresses", spec),
        vec![
            pair(
                &at(0, "path"),
                "Invalid value: \"foo\": must be an absolute path"
            ),
            pair(
                &at(1, "path"),
                "Invalid value: \"bar\": must be an absolute path"
            ),
            pair(
                &at(2, "path"),
                "Invalid value: \"baz\": must be an absolute path"
            ),
            pair(
                &at(4, "path"),
                "Invalid value: \"/a//b/./c/.\": must not contain '//'"
            ),
            pair(
                &at(4, "path"),
                "Invalid value: \"/a//b/./c/.\": must not contain '/./'"
            ),
            pair(
                &at(4, "path"),
                "Invalid value: \"/a//b/./c/.\": cannot end with '/.'"
            ),
            pair(
                &at(6, "pathType"),
                "Required value: pathType must be specified"
            ),
            pair(
                &at(7, "pathType"),
                "Unsupported value: \"Regex\": supported values: \"Exact\", \"ImplementationSpecific\", \"Prefix\""
            ),
            pair(
                &at(8, "path"),
                "Invalid value: \"\": must be an absolute path"
            ),
        ]
    );
}
