use std::fs;
use std::os::unix::fs::PermissionsExt;

use super::*;

fn write_program(dir: &Path, name: &str, mode: u32) -> PathBuf {
    let path = dir.join(name);
    fs::write(&path, "#!/bin/sh\n").expect("write fake program");
    fs::set_permissions(&path, fs::Permissions::from_mode(mode)).expect("chmod fake program");
    path
}

#[test]
fn the_first_executable_in_search_order_wins_and_non_executables_are_passed_over() {
    let first = tempfile::tempdir().expect("tempdir");
    let second = tempfile::tempdir().expect("tempdir");
    write_program(first.path(), "haproxy", 0o644);
    let wanted = write_program(second.path(), "haproxy", 0o755);
    fs::create_dir(first.path().join("nft")).expect("a directory named like the program");
    let dirs = vec![first.path().to_path_buf(), second.path().to_path_buf()];
    assert_eq!(find_executable("haproxy", &dirs), Some(wanted));
    assert_eq!(find_executable("nft", &dirs), None);
}

#[test]
fn postgresql_major_versions_are_tried_highest_first() {
    let root = tempfile::tempdir().expect("tempdir");
    for version in ["9.6", "15", "13", "lib"] {
        fs::create_dir_all(root.path().join(version).join("bin")).expect("mkdir");
    }
    let dirs = postgresql_bin_dirs(root.path());
    assert_eq!(
        dirs,
        vec![
            root.path().join("15/bin"),
            root.path().join("13/bin"),
            root.path().join("9.6/bin"),
        ]
    );
}

#[test]
fn without_postgresql_the_pattern_is_named() {
    let root = tempfile::tempdir().expect("tempdir");
    assert_eq!(
        postgresql_bin_dirs(root.path()),
        vec![root.path().join("*/bin")]
    );
}

#[test]
fn system_dirs_follow_path_once_each() {
    let dirs = path_then_system_dirs(Some(OsStr::new("/opt/x/bin:/usr/bin:relative")));
    assert_eq!(dirs[0], PathBuf::from("/opt/x/bin"));
    assert_eq!(dirs[1], PathBuf::from("/usr/bin"));
    assert!(dirs.contains(&PathBuf::from("/usr/sbin")));
    assert_eq!(
        dirs.iter().filter(|d| *d == Path::new("/usr/bin")).count(),
        1
    );
    assert!(!dirs.contains(&PathBuf::from("relative")));
}

#[test]
fn cni_plugins_are_never_looked_up_on_path() {
    let dirs = cni_dirs(Some(OsStr::new("/custom/cni")));
    assert_eq!(
        dirs,
        vec![
            PathBuf::from("/custom/cni"),
            PathBuf::from("/usr/lib/cni"),
            PathBuf::from("/opt/cni/bin")
        ]
    );
    assert!(
        !Tool::CniBridge
            .search_dirs()
            .contains(&PathBuf::from("/usr/sbin"))
    );
}

#[test]
fn every_tool_package_is_in_the_package_list() {
    for tool in Tool::ALL {
        assert!(
            DEBIAN_PACKAGES.contains(&tool.package()),
            "{tool} needs {}",
            tool.package()
        );
    }
}
