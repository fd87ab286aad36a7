use super::*;

fn missing_haproxy() -> Unavailable {
    Unavailable::not_installed(
        "HAProxy (haproxy)",
        "haproxy",
        vec![PathBuf::from("/usr/sbin"), PathBuf::from("/usr/bin")],
    )
}

#[test]
fn a_missing_program_names_itself_where_it_was_looked_for_and_the_package() {
    let e = missing_haproxy();
    assert_eq!(
        e.to_string(),
        "HAProxy (haproxy) is not installed (looked in /usr/sbin, /usr/bin) \
         (install: apt-get install -y haproxy)"
    );
    assert_eq!(e.what(), "HAProxy (haproxy)");
    assert_eq!(e.package(), Some("haproxy"));
    assert_eq!(e.how_to_install(), "apt-get install -y haproxy");
    assert!(e.is_missing());
}

#[test]
fn not_root_says_why_root_is_needed_and_has_no_package() {
    let e = Unavailable::not_root("needs CAP_NET_ADMIN for netns");
    assert_eq!(
        e.to_string(),
        "this test needs root (needs CAP_NET_ADMIN for netns) \
         (install: nothing; run the tests as root)"
    );
    assert_eq!(e.package(), None);
    assert!(e.is_missing());
}

#[test]
fn skip_outside_ci_returns() {
    missing_haproxy().skip_under("some_test", false);
}

#[test]
fn skip_on_ci_panics_with_the_test_name_and_reason() {
    let panic = std::panic::catch_unwind(|| missing_haproxy().skip_under("some_test", true))
        .expect_err("a missing service on CI must fail the test");
    let message = panic
        .downcast_ref::<String>()
        .expect("formatted panic message");
    assert!(message.contains("some_test"), "{message}");
    assert!(message.contains("apt-get install -y haproxy"), "{message}");
}

#[test]
fn a_service_that_failed_to_start_is_never_skipped() {
    let failed = || Unavailable::failed("PostgreSQL", "initdb exited with status 1");
    assert!(!failed().is_missing());
    assert_eq!(failed().package(), None);
    for on_ci in [false, true] {
        let panic = std::panic::catch_unwind(|| failed().skip_under("pg_test", on_ci))
            .expect_err("a broken service is a failure, not a skip");
        let message = panic
            .downcast_ref::<String>()
            .expect("formatted panic message");
        assert!(message.contains("initdb exited with status 1"), "{message}");
    }
}

#[test]
fn ci_is_recognised_only_when_set_to_true_or_1() {
    assert!(running_on_ci(Some("true")));
    assert!(running_on_ci(Some("TRUE")));
    assert!(running_on_ci(Some("1")));
    assert!(!running_on_ci(Some("false")));
    assert!(!running_on_ci(Some("0")));
    assert!(!running_on_ci(Some("")));
    assert!(!running_on_ci(None));
}

#[test]
fn a_download_that_failed_is_missing_and_says_what_provisions_it() {
    let e = Unavailable::not_provisioned(
        "Octavia's Python environment",
        "pip install exited with status 1: no network",
        "cargo xtask test (or pip install -c octavia-constraints.txt octavia==19.0.0)",
    );
    assert!(e.is_missing());
    assert_eq!(e.package(), None);
    assert_eq!(
        e.to_string(),
        "Octavia's Python environment could not be provisioned: pip install exited with \
         status 1: no network (install: cargo xtask test (or pip install -c \
         octavia-constraints.txt octavia==19.0.0))"
    );
    assert!(e.how_to_install().starts_with("cargo xtask test"));
    let panic = std::panic::catch_unwind(|| e.clone().skip_under("os_test", true))
        .expect_err("on CI a missing environment is a failure");
    let message = panic.downcast_ref::<String>().expect("message");
    assert!(message.contains("os_test"), "{message}");
    e.skip_under("os_test", false);
}
