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
