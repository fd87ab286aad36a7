//! What an operator installs from each daemon's `deploy/`: systemd units sandboxed as a careful
//! operator expects, and manifests whose images are the ones `cargo xtask images` builds.

use std::path::{Path, PathBuf};

/// Each daemon's folder and the images its manifests may name.
const DAEMONS: &[(&str, &[&str])] = &[
    ("preparer", &["preparer"]),
    ("topology", &["ntc"]),
    ("nimbess-agent", &["nimbess-agent"]),
    ("kuryr-l7", &["kuryr-l7"]),
    ("bmm-provider", &["bmm-provider", "bmm-sim"]),
];

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

/// Every file under `dir` whose name ends with one of `suffixes`.
fn files(dir: &Path, suffixes: &[&str], found: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            files(&path, suffixes, found);
        } else if suffixes.iter().any(|s| path.to_string_lossy().ends_with(s)) {
            found.push(path);
        }
    }
}

/// `Key=value` settings of a unit file's `[Service]` section (comments and other sections
/// left out).
fn service_settings(text: &str) -> Vec<(String, String)> {
    let mut in_service = false;
    let mut settings = Vec::new();
    for line in text.lines().map(str::trim) {
        if line.starts_with('[') {
            in_service = line == "[Service]";
        } else if in_service
            && !line.starts_with('#')
            && !line.starts_with(';')
            && let Some((key, value)) = line.split_once('=')
        {
            settings.push((key.trim().to_owned(), value.trim().to_owned()));
        }
    }
    settings
}

#[test]
fn every_daemon_has_a_sandboxed_systemd_unit() {
    let mut problems = Vec::new();
    for (daemon, _) in DAEMONS {
        let mut units = Vec::new();
        files(
            &root().join(daemon).join("deploy"),
            &[".service"],
            &mut units,
        );
        if units.is_empty() {
            problems.push(format!("{daemon}/deploy has no systemd unit"));
        }
        for unit in units {
            let text = std::fs::read_to_string(&unit).unwrap();
            let settings = service_settings(&text);
            let has = |key: &str, value: &str| {
                settings
                    .iter()
                    .any(|(k, v)| k == key && (value.is_empty() || v == value))
            };
            let name = unit.strip_prefix(root()).unwrap().display().to_string();
            for (key, value) in [("ProtectSystem", "strict"), ("NoNewPrivileges", "yes")] {
                if !has(key, value) {
                    problems.push(format!("{name}: no {key}={value}"));
                }
            }
            // A user of its own, or root held to the capabilities it needs.
            let own_user = has("DynamicUser", "yes") || has("User", "");
            let bounded_root = has("CapabilityBoundingSet", "") && !has("User", "root");
            if !own_user && !bounded_root {
                problems.push(format!(
                    "{name}: neither DynamicUser=yes/User= nor a CapabilityBoundingSet"
                ));
            }
            if !has("ExecStart", "") {
                problems.push(format!("{name}: no ExecStart"));
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn manifests_name_the_images_xtask_builds() {
    let version = env!("CARGO_PKG_VERSION");
    let mut problems = Vec::new();
    let mut seen = 0;
    for (daemon, images) in DAEMONS {
        let mut manifests = Vec::new();
        files(
            &root().join(daemon).join("deploy"),
            &[".yaml", ".yml"],
            &mut manifests,
        );
        for manifest in manifests {
            let text = std::fs::read_to_string(&manifest).unwrap();
            let name = manifest.strip_prefix(root()).unwrap().display().to_string();
            for line in text.lines() {
                let line = line.trim();
                let Some(image) = line.strip_prefix("image:") else {
                    continue;
                };
                seen += 1;
                let image = image.trim().trim_matches('"');
                // clusterctl variables keep the built image as their default.
                let image = image
                    .rsplit_once(":=")
                    .map_or(image, |(_, default)| default.trim_end_matches('}'));
                let expected: Vec<String> = images
                    .iter()
                    .map(|i| format!("nephrite/{i}:{version}"))
                    .collect();
                if !expected.iter().any(|e| e == image) {
                    problems.push(format!(
                        "{name}: image {image}, expected one of {expected:?}"
                    ));
                }
            }
        }
    }
    assert!(seen > 0, "no image: line in any deploy/ manifest");
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn the_unit_reader_sees_only_the_service_section() {
    let settings = service_settings(
        "[Unit]\nDescription=x\n[Service]\nExecStart=/bin/x\n# User=root\nDynamicUser=yes\n\
         [Install]\nWantedBy=multi-user.target\n",
    );
    assert_eq!(
        settings,
        [
            ("ExecStart".to_owned(), "/bin/x".to_owned()),
            ("DynamicUser".to_owned(), "yes".to_owned())
        ]
    );
}

/// The gRPC (or health) listeners of the daemons: (binary, subcommand, default address).
const DEFAULT_PORTS: &[(&str, &str, &str)] = &[
    ("preparer", "serve", "tcp://127.0.0.1:50051"),
    ("ntc", "serve", "tcp://127.0.0.1:50061"),
    ("bmm-provider", "serve", "tcp://127.0.0.1:50071"),
    ("bmm-provider", "ccm", "tcp://127.0.0.1:50072"),
    ("bmm-provider", "machine-api", "tcp://127.0.0.1:50073"),
    ("kuryr-l7", "controller", "tcp://127.0.0.1:50081"),
];

#[test]
fn every_daemon_listens_on_its_own_default_port() {
    let bin = std::env::var_os("CARGO_TARGET_DIR")
        .map_or_else(|| root().join("target"), PathBuf::from)
        .join("debug");
    let missing: Vec<&str> = DEFAULT_PORTS
        .iter()
        .map(|(binary, _, _)| *binary)
        .filter(|binary| !bin.join(binary).is_file())
        .collect();
    if !missing.is_empty() {
        let why = format!(
            "{missing:?} not built in {} (cargo xtask test builds them)",
            bin.display()
        );
        if std::env::var("CI").is_ok_and(|ci| ci == "true") {
            panic!("{why}");
        }
        eprintln!("SKIPPED: {why}");
        return;
    }
    let mut seen = std::collections::BTreeSet::new();
    for (binary, command, expected) in DEFAULT_PORTS {
        let output = std::process::Command::new(bin.join(binary))
            .args([command, "--help"])
            .env_remove("NEPHRITE_LISTEN")
            .output()
            .unwrap();
        let help = String::from_utf8_lossy(&output.stdout);
        let listen = help
            .split("--listen <ENDPOINT>")
            .nth(1)
            .and_then(|rest| rest.split("[default: ").nth(1))
            .and_then(|rest| rest.split(']').next())
            .unwrap_or_else(|| {
                panic!("{binary} {command} --help has no --listen default:\n{help}")
            });
        assert_eq!(listen, *expected, "{binary} {command}");
        assert!(seen.insert(listen.to_owned()), "{listen} used twice");
    }
}
