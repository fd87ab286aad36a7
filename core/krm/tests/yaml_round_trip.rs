//! Property: writing a package as YAML and reading it back gives the same objects, with every
//! field, in the same order.

use indexmap::IndexMap;
use nephrite_krm::{MetaDetails, Object, ObjectMeta, OwnerReference, Package};
use proptest::prelude::*;
use serde_json::{Map, Number, Value};

/// Strings that YAML readers are known to misread unless they are quoted or written carefully.
const TRICKY: &[&str] = &[
    "yes",
    "no",
    "on",
    "off",
    "y",
    "n",
    "Y",
    "NO",
    "true",
    "False",
    "null",
    "Null",
    "~",
    "1.0",
    "1",
    "-1",
    "+1",
    "1e3",
    "0x1F",
    "0o17",
    "017",
    ".5",
    ".inf",
    "-.inf",
    ".NaN",
    "1_000",
    "1:20",
    ":",
    "a:",
    ": a",
    "a: b",
    "- x",
    "-",
    "--flag=x",
    "#c",
    "a #b",
    "a#b",
    "'",
    "\"",
    "''",
    "|",
    ">",
    "|-",
    "---",
    "...",
    "--- x",
    "<<",
    "=",
    "?",
    "? x",
    "@x",
    "`x",
    "%x",
    "!x",
    "!!str",
    "&x",
    "*x",
    "[a]",
    "{a: 1}",
    "a,b",
    "\\",
    "\\n",
    "",
    " ",
    "  lead",
    "trail ",
    "a  b",
    "multi\nline",
    "end\n",
    "end\n\n",
    "\n",
    "\n\n",
    "\nlead",
    " x\n y",
    "x\n  \n",
    "x\n\ty",
    "\ttab",
    "a\tb",
    "x\r\ny",
    "\r",
    "é",
    "日本語",
    "\u{85}",
    "\u{2028}",
    "\u{feff}x",
    "\u{0}",
    "\u{7f}",
    "\u{1b}[0m",
    "2024-01-01T00:00:00Z",
    "10.0.0.1",
    "nephio.org/prepare",
    "  - item\n  - item",
    "key: value\nother: 1\n",
    "# not a comment\n---\n...\n",
];

fn tricky_string() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => proptest::sample::select(TRICKY).prop_map(str::to_owned),
        2 => "[a-zA-Z0-9._/-]{1,12}",
        2 => "[ -~]{0,12}",
        1 => "[ -~\n\t]{0,24}",
        1 => "\\PC{0,8}",
        1 => proptest::collection::vec(any::<char>(), 0..6).prop_map(String::from_iter),
        1 => proptest::collection::vec(proptest::sample::select(TRICKY), 1..4).prop_map(|parts| parts.concat()),
    ]
}

fn key_string() -> impl Strategy<Value = String> {
    prop_oneof![
        20 => tricky_string(),
        1 => "[a-z]{1001,1010}", // longer than an implicit YAML key may be
        // Short in characters, long once written: escapes, doubled quotes, multi-byte characters.
        1 => proptest::collection::vec(proptest::sample::select(&["\u{1}", "'", "日", "é", "a", "\n", ": "][..]), 300..700)
            .prop_map(|parts| parts.concat()),
    ]
}

fn scalar() -> impl Strategy<Value = Value> {
    prop_oneof![
        1 => Just(Value::Null),
        1 => any::<bool>().prop_map(Value::Bool),
        1 => any::<i64>().prop_map(Value::from),
        1 => any::<u64>().prop_map(Value::from),
        1 => any::<f64>()
            .prop_filter_map("finite", Number::from_f64)
            .prop_map(Value::Number),
        1 => proptest::sample::select(&[0.0, -0.0, 1.0, 0.5, 1e-7, 1e300, -2.5e-300][..])
            .prop_filter_map("finite", Number::from_f64)
            .prop_map(Value::Number),
        4 => tricky_string().prop_map(Value::String),
    ]
}

fn value() -> impl Strategy<Value = Value> {
    scalar().prop_recursive(3, 24, 4, |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            proptest::collection::vec((key_string(), inner), 0..4)
                .prop_map(|entries| Value::Object(entries.into_iter().collect())),
        ]
    })
}

fn string_map() -> impl Strategy<Value = Option<IndexMap<String, String>>> {
    proptest::option::of(
        proptest::collection::vec((key_string(), tricky_string()), 0..4)
            .prop_map(|e| e.into_iter().collect()),
    )
}

const META_FIELDS: &[&str] = &[
    "name",
    "generateName",
    "namespace",
    "uid",
    "resourceVersion",
    "generation",
    "creationTimestamp",
    "deletionTimestamp",
    "labels",
    "annotations",
    "ownerReferences",
    "finalizers",
];

fn extra_map(reserved: &'static [&'static str]) -> impl Strategy<Value = Map<String, Value>> {
    proptest::collection::vec((key_string(), value()), 0..3).prop_map(move |entries| {
        entries
            .into_iter()
            .filter(|(k, _)| !reserved.contains(&k.as_str()))
            .collect()
    })
}

fn owner_reference() -> impl Strategy<Value = OwnerReference> {
    (
        tricky_string(),
        tricky_string(),
        tricky_string(),
        "[a-z0-9-]{1,8}",
        proptest::option::of(any::<bool>()),
        proptest::option::of(any::<bool>()),
        extra_map(&[
            "apiVersion",
            "kind",
            "name",
            "uid",
            "controller",
            "blockOwnerDeletion",
        ]),
    )
        .prop_map(
            |(api_version, kind, name, uid, controller, block_owner_deletion, extra)| {
                OwnerReference {
                    api_version,
                    kind,
                    name,
                    uid,
                    controller,
                    block_owner_deletion,
                    extra,
                }
            },
        )
}

fn metadata() -> impl Strategy<Value = ObjectMeta> {
    let opt = || proptest::option::of(tricky_string());
    (
        (
            opt(),
            opt(),
            opt(),
            opt(),
            opt(),
            proptest::option::of(any::<i64>()),
            opt(),
            opt(),
        ),
        string_map(),
        string_map(),
        proptest::option::of(proptest::collection::vec(owner_reference(), 0..2)),
        proptest::option::of(proptest::collection::vec(tricky_string(), 0..3)),
        extra_map(META_FIELDS),
    )
        .prop_map(
            |(
                (
                    name,
                    generate_name,
                    namespace,
                    uid,
                    resource_version,
                    generation,
                    created,
                    deleted,
                ),
                labels,
                annotations,
                owner_references,
                finalizers,
                extra,
            )| {
                ObjectMeta {
                    name,
                    namespace,
                    labels,
                    annotations,
                    details: Some(Box::new(MetaDetails {
                        generate_name,
                        uid,
                        resource_version,
                        generation,
                        creation_timestamp: created,
                        deletion_timestamp: deleted,
                        owner_references,
                        finalizers,
                        extra,
                    })),
                }
            },
        )
}

fn object() -> impl Strategy<Value = Object> {
    let non_empty = || tricky_string().prop_filter("non-empty", |s| !s.is_empty());
    (
        prop_oneof![
            Just("v1".to_owned()),
            Just("apps/v1".to_owned()),
            non_empty()
        ],
        prop_oneof![Just("ConfigMap".to_owned()), non_empty()],
        metadata(),
        extra_map(&["apiVersion", "kind", "metadata"]),
    )
        .prop_map(|(api_version, kind, metadata, body)| Object {
            api_version,
            kind,
            metadata,
            body: body
                .try_into()
                .expect("extra_map excludes the reserved keys"),
        })
}

/// Exact text of an object, order-sensitive (map equality alone ignores order).
fn exact(object: &Object) -> String {
    serde_json::to_string(object).expect("objects serialize")
}

proptest! {
    #[test]
    fn package_round_trips_through_yaml(objects in proptest::collection::vec(object(), 0..4)) {
        let package = Package::from(objects);
        let yaml = package.to_yaml();
        let back = Package::from_yaml(&yaml).map_err(|e| TestCaseError::fail(format!("{e}\n--- yaml ---\n{yaml}")))?;
        prop_assert_eq!(back.len(), package.len(), "yaml:\n{}", yaml);
        for (got, want) in back.iter().zip(package.iter()) {
            prop_assert_eq!(exact(got), exact(want), "yaml:\n{}", yaml);
        }
        prop_assert_eq!(&back, &package);
        // Writing again gives the same text.
        prop_assert_eq!(back.to_yaml(), yaml);
    }

    #[test]
    fn single_object_yaml_is_a_one_document_package(object in object()) {
        let yaml = object.to_yaml();
        let back = Package::from_yaml(&yaml).map_err(|e| TestCaseError::fail(format!("{e}\n{yaml}")))?;
        prop_assert_eq!(back.len(), 1);
        prop_assert_eq!(exact(&back.objects()[0]), exact(&object));
    }

    #[test]
    fn reading_arbitrary_text_never_panics(text in "[ -~\n\t]{0,80}") {
        let _ = Package::from_yaml(&text);
    }

    #[test]
    fn reading_yaml_ish_text_never_panics(
        parts in proptest::collection::vec(proptest::sample::select(&[
            "a", ": ", "- ", "\n", "\r\n", "\r", "  ", "---", "...", "%YAML 1.2", "#", "&x ", "*x",
            "<<", "? ", "!t ", "!!str ", "'", "\"", "{", "}", "[", "]", ",", "|", ">", ".nan",
            "1e400", "99999999999999999999", "\u{feff}", "\u{85}", "\u{2028}", "é", "\t",
        ][..]), 0..40),
    ) {
        let _ = Package::from_yaml(&parts.concat());
    }

    #[test]
    fn windows_and_old_mac_line_breaks_read_like_unix_ones(
        objects in proptest::collection::vec(object(), 1..3),
        separator in proptest::sample::select(&["\r\n", "\r"][..]),
        bom in any::<bool>(),
    ) {
        let yaml = Package::from(objects).to_yaml();
        // Literal blocks keep their line breaks as `\n` whatever the file uses: compare the
        // parsed packages only where no string holds a line break.
        prop_assume!(!yaml.contains('|'));
        let converted = format!("{}{}", if bom { "\u{feff}" } else { "" }, yaml.replace('\n', separator));
        let back = Package::from_yaml(&converted).map_err(|e| TestCaseError::fail(format!("{e}\n{converted:?}")))?;
        prop_assert_eq!(back, Package::from_yaml(&yaml).expect("the writer's output reads back"));
    }
}
