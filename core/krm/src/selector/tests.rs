use super::*;

fn parse(s: &str) -> LabelSelector {
    s.parse().unwrap_or_else(|e| panic!("{s:?}: {e}"))
}

#[test]
fn parses_every_form() {
    let selector = parse("a=b,c!=d,e in (f,g),!h,  i ,x notin (y, z),j==k,a=l");
    let expected = LabelSelector::new()
        .with_label("a", "b")
        .with_label("j", "k")
        .with_expression(LabelSelectorRequirement::not_in("c", ["d"]))
        .with_expression(LabelSelectorRequirement::in_values("e", ["f", "g"]))
        .with_expression(LabelSelectorRequirement::does_not_exist("h"))
        .with_expression(LabelSelectorRequirement::exists("i"))
        .with_expression(LabelSelectorRequirement::not_in("x", ["y", "z"]))
        .with_expression(LabelSelectorRequirement::in_values("a", ["l"]));
    assert_eq!(selector, expected);
    assert_eq!(
        selector.to_string(),
        "a=b,j=k,c!=d,e in (f,g),!h,i,x notin (y,z),a in (l)"
    );
    assert_eq!(parse(&selector.to_string()), selector);
    assert_eq!(parse("x notin (y)").to_string(), "x!=y");
    assert_eq!(parse("a="), LabelSelector::new().with_label("a", ""));
    assert_eq!(parse("a in ()").match_expressions[0].values, [""]);
    assert_eq!(parse("a in (b,)").match_expressions[0].values, ["b", ""]);
    assert_eq!(
        parse("in in (in)").match_expressions[0],
        LabelSelectorRequirement::in_values("in", ["in"])
    );
    assert_eq!(parse(""), LabelSelector::new());
    assert_eq!(parse("   "), LabelSelector::new());
    assert!(parse("").is_empty());
}

#[test]
fn errors_name_position_and_token() {
    let cases = [
        ("a=b,", 4, "end of input", "a label key"),
        (",a", 0, "`,`", "a label key"),
        (
            "a b",
            2,
            "\"b\"",
            "`=`, `==`, `!=`, `in`, `notin`, `,` or end of input",
        ),
        ("a in b", 5, "\"b\"", "`(`"),
        ("a in (b c)", 8, "\"c\"", "`,` or `)`"),
        ("a=b=c", 3, "`=`", "`,` or end of input"),
        ("!=a", 0, "`!=`", "a label key"),
        (
            "a)",
            1,
            "`)`",
            "`=`, `==`, `!=`, `in`, `notin`, `,` or end of input",
        ),
    ];
    for (input, position, found, expected) in cases {
        let err = input.parse::<LabelSelector>().unwrap_err();
        assert_eq!(
            err,
            SelectorParseError::Unexpected {
                input: input.into(),
                position,
                found: found.into(),
                expected,
            },
            "{input:?}"
        );
    }
    let err = "ok=1,Bad.Prefix/x=1".parse::<LabelSelector>().unwrap_err();
    assert!(
        matches!(err, SelectorParseError::InvalidLabel { position: 5, .. }),
        "{err}"
    );
    assert!(err.to_string().contains("Bad.Prefix/x"), "{err}");
    let err = "a in (ok,-bad)".parse::<LabelSelector>().unwrap_err();
    assert!(
        matches!(err, SelectorParseError::InvalidLabel { position: 9, .. }),
        "{err}"
    );
}

#[test]
fn matching_semantics() {
    let labels = [("app", "web"), ("tier", "front")];
    assert!(LabelSelector::new().matches(&labels));
    assert!(parse("app=web").matches(&labels));
    assert!(!parse("app=db").matches(&labels));
    assert!(
        parse("env!=prod").matches(&labels),
        "!= matches an absent label"
    );
    assert!(!parse("tier!=front").matches(&labels));
    assert!(parse("tier in (back,front)").matches(&labels));
    assert!(!parse("env in (prod)").matches(&labels));
    assert!(parse("env notin (prod)").matches(&labels));
    assert!(parse("app").matches(&labels));
    assert!(!parse("!app").matches(&labels));
    assert!(parse("!env").matches(&labels));
    assert!(!parse("app,env").matches(&labels));
}

#[test]
fn kubernetes_json_shape() {
    let json = serde_json::json!({
        "matchLabels": {"region": "eu"},
        "matchExpressions": [
            {"key": "role", "operator": "In", "values": ["upf", "smf"]},
            {"key": "legacy", "operator": "DoesNotExist"}
        ]
    });
    let selector: LabelSelector = serde_json::from_value(json.clone()).unwrap();
    assert_eq!(selector.to_string(), "region=eu,role in (upf,smf),!legacy");
    assert_eq!(serde_json::to_value(&selector).unwrap(), json);
    let nulls: LabelSelector =
        serde_json::from_value(serde_json::json!({"matchLabels": null, "matchExpressions": [{"key": "a", "operator": "Exists", "values": null}]})).unwrap();
    assert_eq!(nulls.to_string(), "a");
    assert_eq!(
        serde_json::to_value(LabelSelector::new()).unwrap(),
        serde_json::json!({})
    );
    assert!(
        serde_json::from_value::<LabelSelector>(
            serde_json::json!({"matchExpressions": [{"key": "a", "operator": "Maybe"}]})
        )
        .is_err()
    );
}

#[test]
fn validation() {
    assert_eq!(parse("a in (b),c").validate(), Ok(()));
    let missing = LabelSelector::new().with_expression(LabelSelectorRequirement::in_values(
        "a",
        Vec::<String>::new(),
    ));
    assert!(matches!(
        missing.validate(),
        Err(SelectorError::MissingValues { .. })
    ));
    let mut extra = LabelSelectorRequirement::exists("a");
    extra.values.push("b".into());
    assert!(matches!(
        LabelSelector::new().with_expression(extra).validate(),
        Err(SelectorError::UnexpectedValues { .. })
    ));
    assert!(matches!(
        LabelSelector::new().with_label("a", "b c").validate(),
        Err(SelectorError::Label(LabelError::InvalidValue { .. }))
    ));
}

#[test]
fn only_ascii_whitespace_separates_tokens() {
    assert_eq!(parse(" \t a \r\n= b ,\t! c ").to_string(), "a=b,!c");
    for (input, position) in [("a=b\u{a0}", 2), ("a=\u{3000}b", 2), ("\u{a0}a=b", 0)] {
        let err = input.parse::<LabelSelector>().unwrap_err();
        assert!(
            matches!(err, SelectorParseError::InvalidLabel { position: at, .. } if at == position),
            "{input:?}: {err}"
        );
    }
}

#[test]
fn omitted_values_are_empty_strings_as_in_kubernetes() {
    let unlabelled: [(&str, &str); 0] = [];
    let empty = [("a", "")];
    let other = [("a", "x")];
    // (selector, canonical form, matches a="", matches a="x", matches no label a)
    for (input, canonical, on_empty, on_other, on_missing) in [
        ("a=", "a=", true, false, false),
        ("a ==", "a=", true, false, false),
        ("a!=", "a!=", false, true, true),
        ("a in ()", "a in ()", true, false, false),
        ("a in ( )", "a in ()", true, false, false),
        ("a notin ()", "a!=", false, true, true),
        ("a in (x,)", "a in (x,)", true, true, false),
    ] {
        let selector = parse(input);
        assert_eq!(selector.to_string(), canonical, "{input}");
        assert_eq!(parse(canonical), selector, "{input}");
        assert_eq!(selector.validate(), Ok(()), "{input}");
        assert_eq!(selector.matches(&empty), on_empty, "{input}");
        assert_eq!(selector.matches(&other), on_other, "{input}");
        assert_eq!(selector.matches(&unlabelled), on_missing, "{input}");
    }
    for (input, key, values) in [
        (
            "example.com/app in (a.b-c_d, x)",
            "example.com/app",
            vec!["a.b-c_d", "x"],
        ),
        ("! example.com/app", "example.com/app", vec![]),
    ] {
        let selector = parse(input);
        assert_eq!(selector.match_expressions[0].key, key, "{input}");
        assert_eq!(selector.match_expressions[0].values, values, "{input}");
    }
}
