use super::*;

#[test]
fn valid_and_invalid_ids() {
    for id in ["a", "nf/gateway:v2", "dc/hq-1", "A_b.c-d/e:f", "0"] {
        assert_eq!(validate_id(id), Ok(()), "{id}");
    }
    assert_eq!(validate_id(""), Err(IdError::Empty));
    let err = validate_id("has space").unwrap_err();
    assert!(matches!(err, IdError::BadCharacter { character: ' ', .. }));
    assert!(err.to_string().contains("has space"));
    assert!(validate_id("star*").is_err());
    assert!(validate_id("é").is_err());
}

#[test]
fn single_star_stays_in_one_segment() {
    let p = IdPattern::parse("nf/*").unwrap();
    assert!(p.matches("nf/gateway"));
    assert!(p.matches("nf/"));
    assert!(!p.matches("nf/edge/gateway"));
    assert!(!p.matches("nf/gateway:v2"));
    assert!(!p.matches("xnf/gateway"));
    let p = IdPattern::parse("*-1").unwrap();
    assert!(p.matches("hq-1"));
    assert!(!p.matches("dc/hq-1"));
}

#[test]
fn double_star_matches_anything() {
    let p = IdPattern::parse("**").unwrap();
    assert!(p.matches(""));
    assert!(p.matches("a/b:c"));
    let p = IdPattern::parse("dc/**-1").unwrap();
    assert!(p.matches("dc/eu/hq-1"));
    assert!(p.matches("dc/-1"));
    assert!(!p.matches("dc/eu/hq-2"));
}

#[test]
fn literal_pattern_is_exact() {
    let p = IdPattern::parse("dc/hq-1").unwrap();
    assert_eq!(p.exact(), Some("dc/hq-1"));
    assert!(p.matches("dc/hq-1"));
    assert!(!p.matches("dc/hq-10"));
    assert_eq!(IdPattern::parse("a*b").unwrap().exact(), None);
    assert_eq!(IdPattern::parse("a*b").unwrap().literal_prefix(), "a");
    assert_eq!(IdPattern::parse("**").unwrap().literal_prefix(), "");
}

#[test]
fn bad_patterns() {
    assert!(matches!(
        IdPattern::parse("a***"),
        Err(IdError::TooManyStars { stars: 3, .. })
    ));
    assert!(matches!(
        IdPattern::parse("a b*"),
        Err(IdError::BadCharacter { .. })
    ));
    assert_eq!(IdPattern::parse(""), Err(IdError::Empty));
    // Metadata values may hold any character.
    assert!(
        IdPattern::parse_value("eu west*")
            .unwrap()
            .matches("eu west 1")
    );
}

#[test]
fn backtracking_cases() {
    let p = IdPattern::parse("*a*a").unwrap();
    assert!(p.matches("aaaa"));
    assert!(!p.matches("ba:a"));
    assert!(IdPattern::parse("**a**a").unwrap().matches("xa/ya"));
}
