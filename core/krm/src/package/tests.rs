use super::*;
use crate::object::ObjectError;

const TWO: &str = "\
# a comment before anything
apiVersion: v1
kind: ConfigMap
metadata:
  name: a
  namespace: one
data:
  z: '1'
  a: '2'
---
---   # nothing here

---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: a
spec:
  replicas: 2
...
---
apiVersion: v1
kind: ConfigMap
metadata: {name: a, namespace: two}
";

#[test]
fn reads_in_order_and_skips_empty_documents() {
    let package = Package::from_yaml(TWO).unwrap();
    assert_eq!(package.len(), 3);
    let kinds: Vec<_> = package
        .iter()
        .map(|o| (o.kind.as_str(), o.namespace()))
        .collect();
    assert_eq!(
        kinds,
        [
            ("ConfigMap", Some("one")),
            ("Deployment", None),
            ("ConfigMap", Some("two"))
        ]
    );
    let data = package.objects()[0].body["data"].as_object().unwrap();
    assert_eq!(data.keys().collect::<Vec<_>>(), ["z", "a"]);
    assert_eq!(Package::from_yaml("").unwrap(), Package::new());
    assert_eq!(
        Package::from_yaml("---\n# only a comment\n---\n")
            .unwrap()
            .len(),
        0
    );
}

#[test]
fn lookup_insert_remove() {
    let mut package = Package::from_yaml(TWO).unwrap();
    let cm = Gvk::new("", "v1", "ConfigMap");
    let deployment = Gvk::new("apps", "v1", "Deployment");
    assert_eq!(
        package.get(&cm, "a").and_then(Object::namespace),
        Some("one")
    );
    assert_eq!(
        package
            .get_namespaced(&cm, Some("two"), "a")
            .map(|o| o.name().unwrap_or_default()),
        Some("a")
    );
    assert!(package.get_namespaced(&cm, None, "a").is_none());
    assert_eq!(
        package.get(&deployment, "a").map(|o| o.kind.as_str()),
        Some("Deployment")
    );
    assert!(
        package
            .get(&Gvk::new("apps", "v2", "Deployment"), "a")
            .is_none()
    );
    assert_eq!(package.position(&deployment, "a"), Some(1));
    assert_eq!(package.of_type(&cm).count(), 2);
    let by_ref = ObjectRef::new(cm.clone(), "a").with_namespace("two");
    assert_eq!(
        package.get_by_ref(&by_ref).and_then(Object::namespace),
        Some("two")
    );

    // insert replaces in place by identity, appends otherwise
    let replacement = Object::new(&cm, "a")
        .with_namespace("two")
        .with_label("new", "yes");
    let old = package.insert(replacement).unwrap();
    assert_eq!(old.namespace(), Some("two"));
    assert_eq!(package.len(), 3);
    assert_eq!(package.objects()[2].label("new"), Some("yes"));
    assert!(package.insert(Object::new(&cm, "b")).is_none());
    assert_eq!(package.len(), 4);
    package.insert_at(99, Object::new(&cm, "c"));
    package.insert_at(0, Object::new(&cm, "first"));
    assert_eq!(package.objects()[0].name(), Some("first"));
    assert_eq!(package.objects()[5].name(), Some("c"));
    package
        .get_mut(&deployment, "a")
        .unwrap()
        .set_label("x", "y");
    assert_eq!(package.get(&deployment, "a").unwrap().label("x"), Some("y"));
    assert_eq!(
        package
            .remove(&cm, "first")
            .map(|o| o.name().unwrap_or_default().to_owned()),
        Some("first".into())
    );
    assert!(package.remove_namespaced(&cm, Some("one"), "a").is_some());
    assert!(package.remove(&cm, "missing").is_none());
    package.retain(|o| o.kind != "Deployment");
    assert_eq!(
        package.iter().map(Object::name).collect::<Vec<_>>(),
        [Some("a"), Some("b"), Some("c")]
    );
    let names: Vec<String> = package
        .clone()
        .into_iter()
        .map(|o| o.name().unwrap_or_default().to_owned())
        .collect();
    assert_eq!(names, ["a", "b", "c"]);
    let rebuilt: Package = names.iter().map(|n| Object::new(&cm, n.as_str())).collect();
    assert_eq!(rebuilt.len(), 3);
}

#[test]
fn writes_and_reads_back() {
    let package = Package::from_yaml(TWO).unwrap();
    let yaml = package.to_yaml();
    assert_eq!(
        yaml,
        "\
apiVersion: v1
kind: ConfigMap
metadata:
  name: a
  namespace: one
data:
  z: '1'
  a: '2'
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: a
spec:
  replicas: 2
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: a
  namespace: two
"
    );
    assert_eq!(Package::from_yaml(&yaml).unwrap(), package);
    assert_eq!(Package::new().to_yaml(), "");
}

fn error(input: &str) -> (usize, usize, String) {
    let err = Package::from_yaml(input).unwrap_err();
    (err.document_index(), err.document_line(), err.to_string())
}

#[test]
fn non_mapping_document() {
    let input = "apiVersion: v1\nkind: A\n---\n- a\n- b\n";
    assert_eq!(
        error(input),
        (1, 3, "document 1 (starting at line 3): expected a mapping with apiVersion and kind, found a list".into())
    );
    assert_eq!(error("just text\n").0, 0);
    assert!(error("--- null\n").2.contains("found null"));
}

#[test]
fn missing_api_version_or_kind() {
    let input = "apiVersion: v1\nkind: A\n---\n\n# comment\nkind: B\nmetadata: {name: b}\n";
    assert_eq!(
        error(input),
        (
            1,
            3,
            "document 1 (starting at line 3): missing apiVersion (kind \"B\")".into()
        )
    );
    // Without a `---` line the document starts at its first content line.
    let input = "apiVersion: v1\nkind: A\n...\n\napiVersion: v1\nmetadata: {name: b}\n";
    assert_eq!(
        error(input),
        (
            1,
            5,
            "document 1 (starting at line 5): missing kind (apiVersion \"v1\")".into()
        )
    );
}

#[test]
fn bad_metadata() {
    let input = "---\napiVersion: v1\nkind: A\n---\n---\napiVersion: v1\nkind: B\nmetadata:\n  labels: [x]\n";
    let (index, line, message) = error(input);
    assert_eq!((index, line), (1, 5));
    assert!(
        message.starts_with("document 1 (starting at line 5): bad metadata.labels in v1 B: "),
        "{message}"
    );
    let err = Package::from_yaml(input).unwrap_err();
    assert!(matches!(
        err,
        PackageError::Document {
            source: DocumentError::Object(ObjectError::BadMetadata { .. }),
            ..
        }
    ));
}

#[test]
fn syntax_errors_carry_lines() {
    let input =
        "apiVersion: v1\nkind: A\n---\napiVersion: v1\nkind: B\nspec:\n  list: [1, 2\n  other: x\n";
    let err = Package::from_yaml(input).unwrap_err();
    let PackageError::Document {
        index,
        line,
        source:
            DocumentError::Yaml {
                line: at,
                column,
                message,
            },
    } = &err
    else {
        panic!("{err:?}");
    };
    assert_eq!((*index, *line), (1, 3));
    assert_eq!((*at, *column), (8, 8), "{message}");
    assert!(message.contains("line 8"), "{message}");
    assert!(
        err.to_string()
            .starts_with("document 1 (starting at line 3): invalid YAML: "),
        "{err}"
    );

    let input = "apiVersion: v1\nkind: A\nmetadata:\n  name: a\n   bad: indent\n";
    let err = Package::from_yaml(input).unwrap_err();
    assert_eq!((err.document_index(), err.document_line()), (0, 1));
    let PackageError::Document {
        source: DocumentError::Yaml { line, .. },
        ..
    } = err
    else {
        panic!("{err:?}");
    };
    assert_eq!(line, 5);

    // A tab used for indentation, an unclosed quote, a bad alias: all errors, never panics.
    for bad in [
        "a:\n\t- b\n",
        "a: 'open\n",
        "a: *nothing\n",
        "a: b: c\n",
        "[1, 2\n",
    ] {
        let err = Package::from_yaml(bad).unwrap_err();
        assert!(
            matches!(
                err,
                PackageError::Document {
                    index: 0,
                    line: 1,
                    source: DocumentError::Yaml { .. }
                }
            ),
            "{bad:?}: {err}"
        );
    }
}
