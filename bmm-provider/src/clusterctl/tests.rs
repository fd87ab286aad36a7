use super::*;

#[test]
fn variables_and_defaults_are_found_and_substituted() {
    let text = "a: ${ONE}\nb: ${TWO:=2}\nc: $HOME {x}\n";
    assert_eq!(
        variables(text).into_iter().collect::<Vec<_>>(),
        vec!["ONE".to_string(), "TWO".to_string()]
    );
    let out = substitute(text, |n| (n == "ONE").then(|| "1".to_string())).expect("substituted");
    assert_eq!(out, "a: 1\nb: 2\nc: $HOME {x}\n");
    let err = substitute(text, |_| None).expect_err("ONE has no default");
    assert!(err.contains("ONE"), "{err}");
}

#[test]
fn metadata_maps_the_release_series_to_the_v1beta2_contract() {
    let m = metadata("v1.4.0");
    assert!(
        m.contains("major: 1\n    minor: 4\n    contract: v1beta2"),
        "{m}"
    );
    assert!(metadata("dev").contains("major: 0\n    minor: 1"));
}
