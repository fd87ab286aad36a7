use super::*;

/// A package of the fixture workspace rooted at `/ws`: `(name, dir, [(dep, kind, is_path)])`.
fn package(name: &str, dir: &str, deps: &[(&str, Option<&str>, bool)]) -> serde_json::Value {
    let deps: Vec<_> = deps
        .iter()
        .map(|(dep, kind, is_path)| {
            serde_json::json!({
                "name": dep,
                "kind": kind,
                "path": is_path.then(|| format!("/ws/{dep}")),
            })
        })
        .collect();
    serde_json::json!({
        "id": format!("path+file:///ws/{dir}#{name}@0.1.0"),
        "name": name,
        "manifest_path": format!("/ws/{dir}/Cargo.toml"),
        "dependencies": deps,
    })
}

fn metadata(packages: Vec<serde_json::Value>) -> Metadata {
    let members: Vec<_> = packages.iter().map(|p| p["id"].clone()).collect();
    serde_json::from_value(serde_json::json!({
        "packages": packages,
        "workspace_members": members,
        "workspace_root": "/ws",
    }))
    .expect("fixture metadata deserialises")
}

/// The workspace's shape: client crates used across daemons, a daemon as a dev-dependency.
fn clean() -> Vec<serde_json::Value> {
    vec![
        package("nephrite-krm", "core/krm", &[("serde", None, false)]),
        package(
            "nephrite-preparer-client",
            "preparer/client",
            &[("nephrite-krm", None, true), ("tonic", None, false)],
        ),
        package(
            "nephrite-preparer",
            "preparer",
            &[("nephrite-preparer-client", None, true)],
        ),
        package(
            "nephrite-ntc",
            "topology",
            &[
                ("nephrite-preparer-client", None, true),
                ("nephrite-preparer", Some("dev"), true),
            ],
        ),
        package("nephrite-nimbess-agent", "nimbess-agent", &[]),
        package(
            "nephrite-nimbess-client",
            "nimbess-agent/client",
            &[("tonic", None, false)],
        ),
        package(
            "nephrite-nimbess-cni",
            "nimbess-agent/cni",
            &[("nephrite-nimbess-client", None, true)],
        ),
        package(
            "nephrite-kuryr-l7",
            "kuryr-l7",
            &[
                ("nephrite-nimbess-client", None, true),
                ("nephrite-nimbess-agent", Some("dev"), true),
            ],
        ),
        package(
            "nephrite-e2e",
            "tests/e2e",
            &[("nephrite-preparer", None, true)],
        ),
    ]
}

#[test]
fn members_are_classified_by_folder() {
    let roles: Vec<_> = metadata(clean())
        .members()
        .into_iter()
        .map(|m| (m.name, m.dir, m.role))
        .collect();
    assert!(roles.contains(&("nephrite-krm".into(), "core/krm".into(), Role::Other)));
    assert!(roles.contains(&(
        "nephrite-preparer-client".into(),
        "preparer/client".into(),
        Role::Client
    )));
    assert!(roles.contains(&(
        "nephrite-nimbess-cni".into(),
        "nimbess-agent/cni".into(),
        Role::Daemon
    )));
    assert!(roles.contains(&("nephrite-e2e".into(), "tests/e2e".into(), Role::Other)));
}

#[test]
fn clients_and_dev_dependencies_across_daemons_pass() {
    assert_eq!(daemon_dependencies(&metadata(clean())), vec![]);
}

/// `packages` with the package named like `replacement` swapped for it.
fn replaced(
    mut packages: Vec<serde_json::Value>,
    replacement: serde_json::Value,
) -> Vec<serde_json::Value> {
    packages.retain(|p| p["name"] != replacement["name"]);
    packages.push(replacement);
    packages
}

#[test]
fn a_daemon_depending_on_a_daemon_fails() {
    let packages = replaced(
        clean(),
        package(
            "nephrite-kuryr-l7",
            "kuryr-l7",
            &[("nephrite-nimbess-agent", None, true)],
        ),
    );
    let violations = daemon_dependencies(&metadata(packages));
    assert_eq!(
        violations,
        vec![Violation::DaemonDependency {
            from: "nephrite-kuryr-l7".into(),
            to: "nephrite-nimbess-agent".into(),
            kind: "normal",
        }]
    );
    assert!(
        violations[0]
            .to_string()
            .contains("use nephrite-nimbess-agent's client crate"),
        "{}",
        violations[0]
    );
}

#[test]
fn a_sub_crate_or_a_client_depending_on_a_daemon_fails() {
    let packages = replaced(
        replaced(
            clean(),
            package(
                "nephrite-nimbess-cni",
                "nimbess-agent/cni",
                &[("nephrite-nimbess-agent", None, true)],
            ),
        ),
        package(
            "nephrite-preparer-client",
            "preparer/client",
            &[("nephrite-preparer", Some("build"), true)],
        ),
    );
    let mut violations = daemon_dependencies(&metadata(packages));
    violations.sort_by_key(ToString::to_string);
    assert_eq!(
        violations,
        vec![
            Violation::DaemonDependency {
                from: "nephrite-nimbess-cni".into(),
                to: "nephrite-nimbess-agent".into(),
                kind: "normal",
            },
            Violation::DaemonDependency {
                from: "nephrite-preparer-client".into(),
                to: "nephrite-preparer".into(),
                kind: "build",
            },
        ]
    );
}

#[test]
fn a_member_naming_a_crate_by_path_fails_wherever_the_table_is() {
    let manifest = r#"
[package]
name = "nephrite-kuryr-l7"

[dependencies]
nephrite-l7.workspace = true
nephrite-nimbess-client = { path = "../nimbess-agent/client" }
serde = "1"

[dev-dependencies.nephrite-nimbess-agent]
path = "../nimbess-agent"

[target.'cfg(unix)'.build-dependencies]
helper = { path = "helper", version = "1" }
"#;
    let violations = path_dependencies("kuryr-l7/Cargo.toml", manifest).unwrap();
    let named: Vec<_> = violations
        .iter()
        .map(|v| match v {
            Violation::PathDependency {
                table, dependency, ..
            } => (table.as_str(), dependency.as_str()),
            Violation::DaemonDependency { .. } => unreachable!("only path checks here"),
        })
        .collect();
    assert_eq!(
        named,
        vec![
            ("dependencies", "nephrite-nimbess-client"),
            ("dev-dependencies", "nephrite-nimbess-agent"),
            ("target.cfg(unix).build-dependencies", "helper"),
        ]
    );
    assert_eq!(
        violations[0].to_string(),
        "kuryr-l7/Cargo.toml: [dependencies] nephrite-nimbess-client has its own `path`: declare \
         it once in the root's [workspace.dependencies] and write \
         `nephrite-nimbess-client.workspace = true`"
    );
}

#[test]
fn inherited_dependencies_pass() {
    let manifest = "[dependencies]\nnephrite-l7.workspace = true\n\
                    nephrite-krm = { workspace = true, features = [\"x\"] }\n";
    assert_eq!(path_dependencies("a/Cargo.toml", manifest).unwrap(), vec![]);
}

#[test]
fn a_manifest_that_does_not_parse_is_named() {
    let err = path_dependencies("broken/Cargo.toml", "[dependencies\n").unwrap_err();
    assert!(format!("{err:#}").contains("broken/Cargo.toml"), "{err:#}");
}

#[test]
fn this_workspace_passes() {
    let out = crate::cargo_metadata(&["--no-deps"]).expect("cargo metadata runs");
    let metadata: Metadata = serde_json::from_slice(&out).unwrap();
    let mut violations = daemon_dependencies(&metadata);
    violations.extend(workspace_path_dependencies(&metadata).unwrap());
    let shown: Vec<_> = violations.iter().map(ToString::to_string).collect();
    assert!(shown.is_empty(), "{shown:#?}");
}
