use std::path::Path;

use super::*;

#[test]
fn source_spec_parses_dir_and_kube() {
    assert_eq!(
        "dir:/etc/l7".parse::<SourceSpec>().unwrap(),
        SourceSpec::Dir("/etc/l7".into())
    );
    assert_eq!("kube".parse::<SourceSpec>().unwrap(), SourceSpec::Kube);
    assert!(
        "etcd:x"
            .parse::<SourceSpec>()
            .unwrap_err()
            .to_string()
            .contains("expected dir:PATH or kube")
    );
    assert!("dir:".parse::<SourceSpec>().is_err());
}

#[test]
fn a_bad_document_is_reported_with_file_and_line_and_the_good_ones_still_apply() {
    let text = "\
apiVersion: v1
kind: Service
metadata: {name: a, namespace: ns}
---
apiVersion: v1
kind: Service
metadata: {name: b
  namespace: [
---
apiVersion: v1
kind: Service
metadata: {name: c, namespace: ns}
";
    let mut objects = Vec::new();
    let mut errors = Vec::new();
    read_file(
        Path::new("/srv/l7/services.yaml"),
        text,
        &mut objects,
        &mut errors,
    );
    let names: Vec<_> = objects
        .iter()
        .map(|o| o.object.name().unwrap_or_default().to_owned())
        .collect();
    assert_eq!(names, ["a", "c"]);
    assert_eq!(errors.len(), 1);
    assert!(
        errors[0].starts_with("/srv/l7/services.yaml: line "),
        "{}",
        errors[0]
    );
    let line: usize = errors[0]["/srv/l7/services.yaml: line ".len()..]
        .split(':')
        .next()
        .unwrap()
        .parse()
        .unwrap();
    assert!(
        (5..=9).contains(&line),
        "line {line} is inside the bad document: {}",
        errors[0]
    );
    assert!(objects.iter().all(|o| o.origin == "/srv/l7/services.yaml"));
}

#[test]
fn a_document_without_kind_names_its_starting_line() {
    let text = "apiVersion: v1\nkind: Service\nmetadata: {name: a}\n---\napiVersion: v1\nmetadata: {name: b}\n";
    let mut objects = Vec::new();
    let mut errors = Vec::new();
    read_file(Path::new("f.yml"), text, &mut objects, &mut errors);
    assert_eq!(objects.len(), 1);
    assert!(
        errors[0].starts_with("f.yml: line 4: missing kind"),
        "{}",
        errors[0]
    );
}

#[test]
fn load_dir_reads_yaml_and_yml_only_in_name_order() {
    let dir = tempfile::tempdir().unwrap();
    let service =
        |name: &str| format!("apiVersion: v1\nkind: Service\nmetadata: {{name: {name}}}\n");
    std::fs::write(dir.path().join("b.yml"), service("b")).unwrap();
    std::fs::write(dir.path().join("a.yaml"), service("a")).unwrap();
    std::fs::write(dir.path().join("c.json"), service("c")).unwrap();
    std::fs::write(dir.path().join("d.yaml"), [0xff, 0xfe]).unwrap();
    let (objects, errors) = load_dir(dir.path()).unwrap();
    let names: Vec<_> = objects
        .iter()
        .map(|o| o.object.name().unwrap_or_default().to_owned())
        .collect();
    assert_eq!(names, ["a", "b"]);
    assert!(errors[0].ends_with("d.yaml: not UTF-8 text"), "{errors:?}");
    assert!(
        load_dir(&dir.path().join("missing"))
            .unwrap_err()
            .to_string()
            .contains("cannot read directory")
    );
}
