use super::*;

#[test]
fn rules_parse_case_insensitively() {
    let rule: WaitRule = " SMF : upf ".parse().unwrap();
    assert_eq!(rule, WaitRule::new("smf", "upf"));
    assert_eq!(rule.to_string(), "smf:upf");
    for bad in ["smf", "smf:", ":upf", "a:b:c"] {
        let err = bad.parse::<WaitRule>().unwrap_err();
        assert!(err.to_string().contains(&format!("{bad:?}")), "{err}");
    }
}

#[test]
fn cycles_are_refused_naming_the_types() {
    let err = RolloutPolicy::parse(&["smf:upf", "upf:amf", "amf:smf", "nrf:smf"]).unwrap_err();
    assert_eq!(
        err.to_string(),
        "rollout rules form a cycle between NF types amf, smf, upf"
    );
    let err = RolloutPolicy::parse(&["upf:upf"]).unwrap_err();
    assert_eq!(
        err.to_string(),
        "rollout rules form a cycle between NF types upf"
    );
}

#[test]
fn several_rules_and_stages() {
    let policy = RolloutPolicy::parse(&["smf:upf", "amf:smf", "smf:upf", "smf:nrf"]).unwrap();
    assert_eq!(policy.rules().len(), 3);
    assert_eq!(
        policy.waits_for(&NfType::new("smf")),
        [NfType::new("nrf"), NfType::new("upf")]
    );
    assert!(policy.waits_for(&NfType::new("upf")).is_empty());
    let types = [
        NfType::new("amf"),
        NfType::new("upf"),
        NfType::new("smf"),
        NfType::new("ausf"),
    ];
    let stages: Vec<Vec<String>> = policy
        .stages(types.iter())
        .into_iter()
        .map(|s| s.into_iter().map(|t| t.to_string()).collect())
        .collect();
    assert_eq!(stages, [vec!["ausf", "upf"], vec!["smf"], vec!["amf"]]);
    assert_eq!(
        RolloutPolicy::default().rules(),
        [WaitRule::new("smf", "upf")]
    );
    assert!(RolloutPolicy::none().rules().is_empty());
}
