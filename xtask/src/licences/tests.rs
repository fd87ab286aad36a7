use super::*;

#[test]
fn expressions_are_evaluated_as_spdx_says() {
    for ok in [
        "MIT",
        "MIT OR Apache-2.0",
        "MIT/Apache-2.0",
        "Apache-2.0 / MIT",
        "Apache-2.0 WITH LLVM-exception",
        "(MIT OR Apache-2.0) AND Unicode-3.0",
        "MIT OR Apache-2.0 OR LGPL-2.1-or-later",
        "ISC AND (Apache-2.0 OR ISC) AND Apache-2.0 AND MIT AND BSD-3-Clause",
    ] {
        assert_eq!(allowed(ok), Ok(true), "{ok}");
    }
    for refused in [
        "GPL-2.0-only",
        "MIT AND GPL-3.0-or-later",
        "LGPL-2.1-or-later",
        "(GPL-2.0 OR LGPL-2.1) AND MIT",
        "AGPL-3.0",
    ] {
        assert_eq!(allowed(refused), Ok(false), "{refused}");
    }
    for broken in ["", "MIT OR", "(MIT", "MIT )", "AND MIT", "MIT WITH"] {
        assert!(allowed(broken).is_err(), "{broken:?}");
    }
}

#[test]
fn a_gpl_netlink_crate_is_refused_by_name() {
    let path = format!("{}/fixtures/licences-gpl.json", env!("CARGO_MANIFEST_DIR"));
    let metadata: Metadata =
        serde_json::from_str(&std::fs::read_to_string(path).expect("fixture")).expect("json");
    let refused = check(&metadata);
    let names: Vec<&str> = refused.iter().map(|r| r.package.as_str()).collect();
    assert_eq!(names, ["nftables-gpl@0.3.0", "mystery@1.0.0"]);
    assert!(
        refused[0].to_string().contains("GPL-3.0-only"),
        "{}",
        refused[0]
    );
    assert!(refused[1].to_string().contains("no SPDX"), "{}", refused[1]);
}

#[test]
fn only_built_packages_are_checked() {
    let path = format!("{}/fixtures/licences-gpl.json", env!("CARGO_MANIFEST_DIR"));
    let mut metadata: Metadata =
        serde_json::from_str(&std::fs::read_to_string(path).expect("fixture")).expect("json");
    metadata.retain_built(&["mystery v1.0.0".to_owned()].into());
    let names: Vec<String> = check(&metadata).into_iter().map(|r| r.package).collect();
    assert_eq!(names, ["mystery@1.0.0"]);
}

#[test]
fn this_workspace_passes() {
    let out = crate::cargo_metadata(&[]).expect("cargo metadata runs");
    let mut metadata: Metadata = serde_json::from_slice(&out).unwrap();
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let built = built_packages(env!("CARGO"), root).unwrap();
    assert!(built.iter().any(|p| p.starts_with("tokio v")), "{built:?}");
    metadata.retain_built(&built);
    let refused = check(&metadata);
    assert!(refused.is_empty(), "{refused:#?}");
}
