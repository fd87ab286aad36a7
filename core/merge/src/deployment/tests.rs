use nephrite_krm::{Package, keys};

use super::*;

fn with_approve(value: Option<&str>) -> Package {
    let mut package = Package::new();
    let object = DeploymentResource::ensure(&mut package, None, None).unwrap();
    if let Some(value) = value {
        object.set_annotation(keys::APPROVE, value);
    }
    package
}

#[test]
fn ensure_adds_once_and_sets_ids() {
    let mut package =
        Package::from_yaml("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\n").unwrap();
    DeploymentResource::ensure(&mut package, Some("nf/gw:v1"), Some("dc/hq")).unwrap();
    DeploymentResource::ensure(&mut package, None, None).unwrap();
    assert_eq!(package.len(), 2);
    let deployment = DeploymentResource::get(&package).unwrap();
    assert_eq!(deployment.api_version, "deployment.nephio.org/v1alpha1");
    assert_eq!(deployment.name(), Some("deployment"));
    assert_eq!(deployment.spec().unwrap()["templateId"], "nf/gw:v1");
    assert_eq!(deployment.spec().unwrap()["siteId"], "dc/hq");
    assert_eq!(
        package.objects()[0].kind,
        "ConfigMap",
        "appended, order kept"
    );
}

#[test]
fn approve_rules() {
    for (value, auto, approved) in [
        (None, true, true),
        (None, false, false),
        (Some("Default"), true, true),
        (Some("Default"), false, false),
        (Some("Auto"), false, true),
        (Some("Manual"), true, false),
        (Some("Sometimes"), true, false),
    ] {
        let mut package = with_approve(value);
        let approval =
            DeploymentResource::mark_prepared(&mut package, auto, "2026-01-01T00:00:00Z").unwrap();
        assert!(DeploymentResource::is_prepared(&package));
        assert_eq!(
            DeploymentResource::is_approved(&package),
            approved,
            "{value:?} auto={auto}"
        );
        assert_eq!(approval == Approval::Approved, approved);
    }
}

#[test]
fn manual_approval_and_errors() {
    let mut package = with_approve(Some("Manual"));
    let now = "2026-01-01T00:00:00Z";
    DeploymentResource::record_error(
        &mut package,
        "PreparerFailed",
        "Placement core: site not found: x",
        now,
    )
    .unwrap();
    assert_eq!(
        DeploymentResource::last_error(&package).as_deref(),
        Some("Placement core: site not found: x")
    );
    assert!(!DeploymentResource::is_prepared(&package));
    assert_eq!(
        DeploymentResource::mark_prepared(&mut package, true, now).unwrap(),
        Approval::Pending
    );
    assert_eq!(DeploymentResource::last_error(&package), None);
    DeploymentResource::mark_approved(&mut package).unwrap();
    assert!(DeploymentResource::is_approved(&package));
}

#[test]
fn removing_prepared_annotation_unprepares() {
    let mut package = with_approve(None);
    DeploymentResource::mark_prepared(&mut package, true, "t").unwrap();
    package.objects_mut()[0].set_annotation(keys::PREPARED, keys::FALSE);
    assert!(!DeploymentResource::is_prepared(&package));
}
