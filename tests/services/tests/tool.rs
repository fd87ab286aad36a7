//! Finding installed tools, and saying clearly what to install when one is missing.

use std::os::unix::fs::PermissionsExt;

use nephrite_test_services::{DEBIAN_PACKAGES, Tool, program, tool};

#[test]
fn every_tool_is_found_as_an_executable_or_named_with_its_package() {
    for &wanted in Tool::ALL {
        match tool(wanted) {
            Ok(path) => {
                assert_eq!(
                    path.file_name().and_then(|n| n.to_str()),
                    Some(wanted.binary())
                );
                let mode = std::fs::metadata(&path)
                    .expect("found path exists")
                    .permissions()
                    .mode();
                assert!(mode & 0o111 != 0, "{} is not executable", path.display());
            }
            Err(e) => {
                assert_eq!(e.package(), Some(wanted.package()));
                assert!(
                    e.to_string()
                        .contains(&format!("apt-get install -y {}", wanted.package()))
                );
                // Under CI=true every package is installed, so this fails there.
                e.skip(&format!("every_tool_is_found ({wanted})"));
            }
        }
    }
}

#[test]
fn cni_plugins_come_from_the_plugin_directories_not_path() {
    for plugin in [Tool::CniBridge, Tool::CniHostLocal] {
        match tool(plugin) {
            Ok(path) => {
                let dir = path.parent().expect("a plugin path has a directory");
                assert!(
                    dir.ends_with("cni")
                        || dir.ends_with("cni/bin")
                        || std::env::var_os("CNI_PATH").is_some(),
                    "{plugin} found at {}",
                    path.display()
                );
            }
            Err(e) => e.skip(&format!(
                "cni_plugins_come_from_the_plugin_directories ({plugin})"
            )),
        }
    }
}

#[test]
fn postgres_is_the_server_of_an_installed_major_version() {
    match tool(Tool::Postgres) {
        Ok(path) => {
            let version_dir = path
                .parent()
                .and_then(|bin| bin.parent())
                .expect("<root>/<major>/bin");
            assert_eq!(
                version_dir.parent(),
                Some(std::path::Path::new("/usr/lib/postgresql"))
            );
            assert!(path.with_file_name("initdb").is_file());
        }
        Err(e) => e.skip("postgres_is_the_server_of_an_installed_major_version"),
    }
}

#[test]
fn a_program_that_does_not_exist_is_named_with_its_package_and_where_it_was_looked_for() {
    let err = program("nephrite-no-such-program", "nephrite-fake-package")
        .expect_err("no such program is installed");
    let message = err.to_string();
    assert!(
        message.starts_with("nephrite-no-such-program is not installed (looked in "),
        "{message}"
    );
    assert!(message.contains("/usr/sbin"), "{message}");
    assert!(
        message.ends_with("(install: apt-get install -y nephrite-fake-package)"),
        "{message}"
    );
    assert_eq!(err.package(), Some("nephrite-fake-package"));
    assert_eq!(
        err.how_to_install(),
        "apt-get install -y nephrite-fake-package"
    );
    assert!(err.is_missing());
}

#[test]
fn an_installed_program_outside_the_tool_list_is_found() {
    let sh = program("sh", "dash").expect("every Debian system has sh");
    assert!(sh.is_absolute());
}

#[test]
fn the_package_list_names_every_package_once() {
    let mut sorted = DEBIAN_PACKAGES.to_vec();
    sorted.sort_unstable();
    sorted.dedup();
    assert_eq!(sorted.len(), DEBIAN_PACKAGES.len());
    for package in [
        "postgresql",
        "etcd-server",
        "containernetworking-plugins",
        "iproute2",
    ] {
        assert!(DEBIAN_PACKAGES.contains(&package), "{package} missing");
    }
}
