//! Bad YAML input is an error naming the document (0-based index among non-empty documents)
//! and the line where it starts — never a panic.

use nephrite_krm::{DocumentError, Gvk, Object, Package, PackageError};
use proptest::prelude::*;

const BAD: &[(&str, &str)] = &[
    (
        "- a\n- b\n",
        "expected a mapping with apiVersion and kind, found a list",
    ),
    (
        "plain text\n",
        "expected a mapping with apiVersion and kind, found a string",
    ),
    (
        "kind: Thing\nmetadata: {name: t}\n",
        "missing apiVersion (kind \"Thing\")",
    ),
    (
        "apiVersion: v1\nmetadata: {name: t}\n",
        "missing kind (apiVersion \"v1\")",
    ),
    (
        "apiVersion: v1\nkind: Thing\nmetadata:\n  labels: [a]\n",
        "bad metadata.labels in v1 Thing",
    ),
    (
        "apiVersion: v1\nkind: Thing\nspec: [1, 2\n",
        "invalid YAML: ",
    ),
    (
        "apiVersion: v1\nkind: Thing\nspec:\n  a: 1\n   b: 2\n",
        "invalid YAML: ",
    ),
    (
        "apiVersion: v1\nkind: Thing\nspec: {ratio: .nan}\n",
        "invalid YAML: spec.ratio: .nan cannot be represented",
    ),
    (
        "apiVersion: v1\nkind: Thing\nspec: {a: 1, a: 2}\n",
        "invalid YAML: spec: duplicate key \"a\"",
    ),
    (
        "apiVersion: v1\nkind: Thing\nmetadata:\n  labels: {app: 1}\n",
        "bad metadata.labels.app in v1 Thing",
    ),
];

fn check(input: &str, index: usize, line: usize, message: &str) {
    let err = Package::from_yaml(input).expect_err(input);
    let text = err.to_string();
    assert_eq!(
        (err.document_index(), err.document_line()),
        (index, line),
        "{text}\n{input}"
    );
    let prefix = format!("document {index} (starting at line {line}): ");
    assert!(text.starts_with(&prefix), "{text}");
    assert!(text[prefix.len()..].starts_with(message), "{text}");
}

#[test]
fn non_mapping_document() {
    check(
        "apiVersion: v1\nkind: A\n---\n- a\n",
        1,
        3,
        "expected a mapping with apiVersion and kind, found a list",
    );
    check(
        "42\n",
        0,
        1,
        "expected a mapping with apiVersion and kind, found a number",
    );
}

#[test]
fn missing_api_version() {
    check(
        "\n\n# leading comment\nkind: A\n",
        0,
        4,
        "missing apiVersion (kind \"A\")",
    );
}

#[test]
fn missing_kind() {
    check(
        "---\napiVersion: v1\nkind: A\n---\n\n---\napiVersion: v2\n",
        1,
        6,
        "missing kind (apiVersion \"v2\")",
    );
}

#[test]
fn syntax_error() {
    let input =
        "apiVersion: v1\nkind: A\n---\napiVersion: v1\nkind: B\nmetadata:\n  name: 'unterminated\n";
    check(input, 1, 3, "invalid YAML: ");
    let err = Package::from_yaml(input).unwrap_err();
    let PackageError::Document {
        source: DocumentError::Yaml { line, message, .. },
        ..
    } = err
    else {
        panic!("{err:?}");
    };
    assert_eq!(line, 8, "{message}");
    assert!(
        message.contains("line 7"),
        "the message speaks of whole-stream lines: {message}"
    );
}

proptest! {
    #[test]
    fn bad_document_is_named_by_index_and_start_line(
        good in proptest::collection::vec("[a-z]{1,8}", 0..5),
        empties in proptest::collection::vec(any::<bool>(), 6),
        bad_at in 0usize..6,
        bad in proptest::sample::select(BAD),
    ) {
        let gvk = Gvk::new("example.org", "v1", "Thing");
        let bad_at = bad_at.min(good.len());
        let mut documents: Vec<String> = good.iter().map(|name| Object::new(&gvk, name.as_str()).to_yaml()).collect();
        documents.insert(bad_at, bad.0.to_owned());

        let mut input = String::new();
        let mut bad_line = 0;
        for (index, document) in documents.iter().enumerate() {
            if empties[index] {
                input.push_str("---\n# nothing here\n\n");
            }
            if index > 0 || empties[index] {
                input.push_str("---\n");
            }
            if index == bad_at {
                // The document starts at its `---` line, or at its first line when it has none.
                bad_line = input.lines().count().max(1);
            }
            input.push_str(document);
        }
        let err = Package::from_yaml(&input).expect_err("a bad document");
        prop_assert_eq!(err.document_index(), bad_at, "{}\n{}", err, input);
        prop_assert_eq!(err.document_line(), bad_line, "{}\n{}", err, input);
        let message = err.to_string();
        let after_prefix = message.split_once("): ").map(|(_, rest)| rest).unwrap_or_default();
        prop_assert!(after_prefix.starts_with(bad.1), "{}", message);
        if let PackageError::Document { source: DocumentError::Yaml { line, .. }, .. } = &err {
            // An error at the end of the document's text sits on the line after it.
            let end = bad_line + bad.0.lines().count() + 1;
            prop_assert!((bad_line..=end).contains(line), "error line {} outside {}..={}", line, bad_line, end);
        }
    }
}

/// The `DocumentError::Yaml` of `input`'s only bad document: (index, start line, error line,
/// message).
fn yaml_error(input: &str) -> (usize, usize, usize, String) {
    let err = Package::from_yaml(input).expect_err(input);
    let PackageError::Document {
        index,
        line: start,
        source: DocumentError::Yaml { line, message, .. },
    } = err
    else {
        panic!("not a YAML error: {err}");
    };
    (index, start, line, message)
}

#[test]
fn values_json_cannot_hold_are_errors_not_null_or_strings() {
    let head = "apiVersion: v1\nkind: A\n---\napiVersion: v1\nkind: B\n";
    for (value, message) in [
        (".nan", ".nan cannot be represented"),
        (".inf", ".inf cannot be represented"),
        ("-.inf", "-.inf cannot be represented"),
        ("1e400", "number 1e400 is out of range"),
        (
            "18446744073709551616",
            "integer 18446744073709551616 is out of range",
        ),
        ("!custom x", "YAML tag !custom is not supported"),
    ] {
        let input = format!("{head}spec:\n  ok: 1\n  value: {value}\n");
        let (index, start, line, text) = yaml_error(&input);
        assert_eq!((index, start, line), (1, 3, 8), "{text}");
        assert!(text.contains(message), "{text}");
        assert!(text.contains("spec.value"), "names the path: {text}");
    }
    // Quoted, they are the strings they look like.
    let package = Package::from_yaml(&format!(
        "{head}spec: {{a: '.nan', b: '1e400', c: \"-.inf\"}}\n"
    ))
    .unwrap();
    assert_eq!(
        package.objects()[1].body["spec"],
        serde_json::json!({"a": ".nan", "b": "1e400", "c": "-.inf"})
    );
}

#[test]
fn duplicate_keys_are_errors() {
    let input = "apiVersion: v1\nkind: A\nmetadata:\n  name: a\n  labels: {app: x}\n  name: b\n";
    let (index, start, line, message) = yaml_error(input);
    assert_eq!((index, start, line), (0, 1, 6), "{message}");
    assert!(message.contains("duplicate key \"name\""), "{message}");
}

#[test]
fn anchors_aliases_and_merge_keys_are_expanded() {
    let input = "\
apiVersion: v1
kind: ConfigMap
metadata:
  name: merged
  labels: &labels {app: web, tier: edge}
  annotations:
    <<: *labels
    tier: core
data:
  copy: *labels
";
    let package = Package::from_yaml(input).unwrap();
    let object = &package.objects()[0];
    assert_eq!(object.label("tier"), Some("edge"));
    assert_eq!(
        object.annotations().iter().collect::<Vec<_>>(),
        [
            (&"app".to_owned(), &"web".to_owned()),
            (&"tier".to_owned(), &"core".to_owned())
        ]
    );
    assert_eq!(object.body["data"]["copy"]["app"], "web");
    // A quoted '<<' is a key like any other, and survives a round trip.
    let input = "apiVersion: v1\nkind: A\nspec:\n  '<<': {a: 1}\n";
    let package = Package::from_yaml(input).unwrap();
    assert_eq!(
        package.objects()[0].body["spec"],
        serde_json::json!({"<<": {"a": 1}})
    );
    assert_eq!(Package::from_yaml(&package.to_yaml()).unwrap(), package);
    // A merge of something that is not a mapping is an error.
    let (_, _, line, message) = yaml_error("apiVersion: v1\nkind: A\nspec:\n  <<: [1]\n");
    assert_eq!(line, 4, "{message}");
    assert!(
        message.contains("merge key << needs a mapping"),
        "{message}"
    );
}

#[test]
fn byte_order_mark_and_line_breaks_of_every_kind() {
    let lf = "apiVersion: v1\nkind: A\n---\n# c\napiVersion: v1\nkind: B\nspec: [1,\n";
    let want = yaml_error(lf);
    assert_eq!((want.0, want.1, want.2), (1, 3, 8), "{}", want.3);
    for input in [
        format!("\u{feff}{lf}"),
        lf.replace('\n', "\r\n"),
        lf.replace('\n', "\r"),
    ] {
        let got = yaml_error(&input);
        assert_eq!(
            (got.0, got.1, got.2),
            (want.0, want.1, want.2),
            "{input:?}: {}",
            got.3
        );
    }
    let good = "\u{feff}apiVersion: v1\r\nkind: A\r\n--- # two\r\napiVersion: v1\r\nkind: B\r\n";
    assert_eq!(Package::from_yaml(good).unwrap().len(), 2);
    assert_eq!(
        Package::from_yaml(&good.replace("\r\n", "\r"))
            .unwrap()
            .len(),
        2
    );

    // A byte order mark anywhere else is named, not taken for a second document.
    let input = "apiVersion: v1\nkind: A\n---\n\u{feff}apiVersion: v1\nkind: B\n";
    let (index, start, line, message) = yaml_error(input);
    assert_eq!((index, start, line), (1, 3, 4), "{message}");
    assert!(
        message.contains("byte order mark (U+FEFF) at line 4 column 1"),
        "{message}"
    );
}

/// The hostile input of issue 30: a flow mapping nested 100,000 deep (~400 KB) took libyaml
/// minutes. It is refused by the nesting limit before parsing, in milliseconds.
#[test]
fn a_deeply_nested_flow_document_is_refused_quickly_naming_the_limit() {
    let depth = 100_000;
    let input = format!(
        "apiVersion: v1\nkind: Thing\nspec: {}1{}\n",
        "{a: ".repeat(depth),
        "}".repeat(depth)
    );
    let started = std::time::Instant::now();
    let err = Package::from_yaml(&input).expect_err("too deep");
    println!(
        "{} KB nested {depth} deep refused in {:?}",
        input.len() / 1024,
        started.elapsed()
    );
    assert_eq!((err.document_index(), err.document_line()), (0, 1));
    assert_eq!(
        err.to_string(),
        "document 0 (starting at line 1): invalid YAML: collections nest deeper than the limit \
         of 100 levels at line 3 column 403"
    );
    let PackageError::Document {
        source: DocumentError::Yaml { line, column, .. },
        ..
    } = err
    else {
        panic!("{err}");
    };
    assert_eq!((line, column), (3, 403));

    // Within the limit, nesting reads as before; a second document's lines are the stream's.
    let fine = format!(
        "apiVersion: v1\nkind: Thing\n---\napiVersion: v1\nkind: Thing\nspec: {}1{}\n",
        "[".repeat(90),
        "]".repeat(90)
    );
    assert_eq!(Package::from_yaml(&fine).expect("90 deep").len(), 2);
    let limits = nephrite_krm::YamlLimits {
        max_depth: 50,
        ..nephrite_krm::YamlLimits::default()
    };
    let err = Package::from_yaml_with_limits(&fine, &limits).expect_err("over 50");
    assert_eq!((err.document_index(), err.document_line()), (1, 3));
    assert!(
        err.to_string()
            .ends_with("the limit of 50 levels at line 6 column 56"),
        "{err}"
    );
}

#[test]
fn a_document_over_the_size_limit_is_refused_naming_the_limit() {
    let limits = nephrite_krm::YamlLimits {
        max_document_bytes: 64,
        ..nephrite_krm::YamlLimits::default()
    };
    let input = format!(
        "apiVersion: v1\nkind: Small\n---\napiVersion: v1\nkind: Big\ndata: {{a: '{}'}}\n",
        "x".repeat(100)
    );
    let err = Package::from_yaml_with_limits(&input, &limits).expect_err("too large");
    assert_eq!((err.document_index(), err.document_line()), (1, 3));
    assert!(
        err.to_string()
            .ends_with("invalid YAML: the document is 143 bytes, over the limit of 64 bytes"),
        "{err}"
    );
}
