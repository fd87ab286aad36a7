use super::*;

const ACCOUNT: &str = "ops/reader";

const ROLE: &str = "
kind: ClusterRole
metadata: {name: reader}
rules:
- apiGroups: ['']
  resources: [pods]
  verbs: [list, watch]
";

const CLUSTER_BINDING: &str = "
kind: ClusterRoleBinding
metadata: {name: reader}
roleRef: {kind: ClusterRole, name: reader}
subjects: [{kind: ServiceAccount, namespace: ops, name: reader}]
";

fn pods() -> Vec<Grant> {
    vec![
        Grant::cluster("", "pods", "list"),
        Grant::cluster("", "pods", "watch"),
    ]
}

#[test]
fn a_cluster_role_bound_cluster_wide_grants_its_rules_everywhere() {
    let rights = granted(
        &[("role.yaml", ROLE), ("binding.yaml", CLUSTER_BINDING)],
        ACCOUNT,
    )
    .expect("readable");
    assert_eq!(assert_exact(&rights, pods()), Ok(()));
}

#[test]
fn a_wildcard_is_refused_naming_the_file_role_and_rule() {
    let wild = ROLE.replace("[list, watch]", "['*']");
    let err = granted(
        &[("rbac.yaml", &wild), ("b.yaml", CLUSTER_BINDING)],
        ACCOUNT,
    )
    .expect_err("a * is refused");
    assert!(
        matches!(err, RbacError::Wildcard { field: "verbs", .. }),
        "{err:?}"
    );
    assert_eq!(
        err.to_string(),
        "rbac.yaml: ClusterRole reader, rule 0: a wildcard \"*\" in verbs"
    );
    let wild_group = ROLE.replace("['']", "['*']");
    let err = granted(&[("rbac.yaml", &wild_group)], ACCOUNT).expect_err("a * is refused");
    assert!(
        matches!(
            err,
            RbacError::Wildcard {
                field: "apiGroups",
                ..
            }
        ),
        "{err:?}"
    );
}

#[test]
fn non_resource_urls_and_a_wildcard_name_are_refused() {
    let urls = format!("{ROLE}- nonResourceURLs: [/healthz]\n  verbs: [get]\n");
    let err = granted(&[("rbac.yaml", &urls)], ACCOUNT).expect_err("URLs are refused");
    assert!(
        matches!(err, RbacError::NonResourceUrls { rule: 1, .. }),
        "{err}"
    );
    let names = ROLE.replace("verbs:", "resourceNames: ['a*']\n  verbs:");
    let err = granted(&[("rbac.yaml", &names)], ACCOUNT).expect_err("a * is refused");
    assert!(
        matches!(
            err,
            RbacError::Wildcard {
                field: "resourceNames",
                ..
            }
        ),
        "{err}"
    );
}

#[test]
fn an_extra_verb_and_a_missing_verb_are_named() {
    let rights = granted(
        &[("rbac.yaml", &format!("{ROLE}---{CLUSTER_BINDING}"))],
        ACCOUNT,
    )
    .expect("readable");
    let expected = [
        Grant::cluster("", "pods", "list"),
        Grant::cluster("", "pods", "get"),
    ];
    let mismatch = assert_exact(&rights, expected).expect_err("not exact");
    assert_eq!(
        mismatch.granted_not_used,
        [Grant::cluster("", "pods", "watch")]
    );
    assert_eq!(
        mismatch.used_not_granted,
        [Grant::cluster("", "pods", "get")]
    );
    assert_eq!(
        mismatch.to_string(),
        "granted but not used (drop it, or add a row saying what uses it):\n    \
         cluster core/pods:watch\nused but not granted:\n    cluster core/pods:get"
    );
}

#[test]
fn a_role_binding_to_a_cluster_role_grants_in_its_namespace_only() {
    let binding = "
kind: RoleBinding
metadata: {name: reader, namespace: apps}
roleRef: {kind: ClusterRole, name: reader}
subjects: [{kind: ServiceAccount, name: reader, namespace: ops}]
";
    let rights = granted(&[("rbac.yaml", ROLE), ("b.yaml", binding)], ACCOUNT).expect("readable");
    assert_eq!(
        rights.into_iter().collect::<Vec<_>>(),
        [
            Grant::in_namespace("apps", "", "pods", "list"),
            Grant::in_namespace("apps", "", "pods", "watch"),
        ]
    );
}

#[test]
fn a_role_binding_to_a_role_and_a_subject_in_the_binding_namespace() {
    let role = "
kind: Role
metadata: {name: leases, namespace: ops}
rules: [{apiGroups: [coordination.k8s.io], resources: [leases], resourceNames: [lock], verbs: [get]}]
---
kind: RoleBinding
metadata: {name: leases, namespace: ops}
roleRef: {kind: Role, name: leases}
subjects: [{kind: ServiceAccount, name: reader}]
";
    let rights = granted(&[("rbac.yaml", role)], ACCOUNT).expect("readable");
    let lock = Grant::in_namespace("ops", "coordination.k8s.io", "leases", "get").named("lock");
    assert_eq!(lock.to_string(), "ops coordination.k8s.io/leases[lock]:get");
    assert_eq!(rights.into_iter().collect::<Vec<_>>(), [lock]);
}

#[test]
fn a_subject_for_another_account_is_ignored() {
    let other = CLUSTER_BINDING.replace("name: reader}]", "name: writer}]");
    let rights = granted(&[("rbac.yaml", ROLE), ("b.yaml", &other)], ACCOUNT).expect("readable");
    assert!(rights.is_empty(), "{rights:?}");
    let elsewhere = CLUSTER_BINDING.replace("namespace: ops", "namespace: dev");
    let rights =
        granted(&[("rbac.yaml", ROLE), ("b.yaml", &elsewhere)], ACCOUNT).expect("readable");
    assert!(rights.is_empty(), "{rights:?}");
    assert_eq!(
        bound_accounts(&[("b.yaml", &other)]).expect("readable"),
        BTreeSet::from(["ops/writer".to_owned()])
    );
}

#[test]
fn a_binding_to_an_undefined_role_and_bad_yaml_are_refused() {
    let err = granted(&[("b.yaml", CLUSTER_BINDING)], ACCOUNT).expect_err("no role");
    assert_eq!(
        err.to_string(),
        "b.yaml: ClusterRoleBinding reader binds ClusterRole reader, which no manifest defines"
    );
    let err = granted(&[("bad.yaml", "kind: [")], ACCOUNT).expect_err("not YAML");
    assert!(matches!(err, RbacError::Yaml { document: 0, .. }), "{err}");
    assert!(matches!(granted(&[], "reader"), Err(RbacError::Account(_))));
}

#[test]
fn a_user_subject_is_refused_by_bound_accounts() {
    let user = CLUSTER_BINDING.replace("kind: ServiceAccount", "kind: User");
    let err = bound_accounts(&[("b.yaml", &user)]).expect_err("a User");
    assert!(matches!(err, RbacError::NotAServiceAccount { .. }), "{err}");
}
