use std::ffi::OsStr;

use super::*;

#[test]
fn the_key_changes_with_the_constraints_or_the_requirements_and_only_then() {
    let spec = OCTAVIA;
    assert_eq!(key(spec), key(spec));
    assert_eq!(key(spec).len(), 16);
    let newer = Spec {
        constraints: "octavia==20.0.0\n",
        ..spec
    };
    let more = Spec {
        requirements: &["octavia==19.0.0", "PyMySQL", "gunicorn"],
        ..spec
    };
    assert_ne!(key(spec), key(newer));
    assert_ne!(key(spec), key(more));
    assert_ne!(key(OCTAVIA), key(NEUTRON));
    // A requirement moved into the constraints text is a different input.
    let a = Spec {
        constraints: "x",
        requirements: &["y"],
        ..spec
    };
    let b = Spec {
        constraints: "xy",
        requirements: &[],
        ..spec
    };
    assert_ne!(key(a), key(b));
}

#[test]
fn the_constraints_pin_the_releases_the_services_are_known_to_work_with() {
    assert!(OCTAVIA.constraints.lines().any(|l| l == "octavia==19.0.0"));
    assert!(NEUTRON.constraints.lines().any(|l| l == "neutron==29.0.0"));
    assert!(
        KEYSTONE
            .constraints
            .lines()
            .any(|l| l == "keystone==30.0.0")
    );
    assert!(
        BARBICAN
            .constraints
            .lines()
            .any(|l| l == "barbican==23.0.0")
    );
    assert!(
        BARBICAN
            .constraints
            .lines()
            .any(|l| l.starts_with("gunicorn=="))
    );
    for spec in [OCTAVIA, NEUTRON, KEYSTONE] {
        assert!(
            spec.constraints.lines().any(|l| l.starts_with("PyMySQL==")),
            "{}",
            spec.name
        );
    }
}

#[test]
fn the_cache_lives_in_the_cargo_target_directory() {
    let ws = Path::new("/src/nephrite");
    assert_eq!(target_dir(ws, None), Path::new("/src/nephrite/target"));
    assert_eq!(
        target_dir(ws, Some(OsStr::new(""))),
        Path::new("/src/nephrite/target")
    );
    assert_eq!(
        target_dir(ws, Some(OsStr::new("/var/cache/t"))),
        Path::new("/var/cache/t")
    );
    assert_eq!(
        target_dir(ws, Some(OsStr::new("build"))),
        Path::new("/src/nephrite/build")
    );
    assert!(cache_root().ends_with("openstack-venvs"));
}

#[test]
fn names_read_as_titles() {
    assert_eq!(title(OCTAVIA), "Octavia");
    assert_eq!(title(NEUTRON), "Neutron");
}
