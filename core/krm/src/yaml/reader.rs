//! Reading one YAML document into a JSON value, strictly.
//!
//! serde_json's own `Value` would accept what serde_norway hands it and quietly lose data: `.nan`
//! and `.inf` become `null`, a repeated key keeps only its last value, a merge key `<<` stays an
//! ordinary key named `<<`, and a plain float too large for `f64` (`1e400`) becomes the string
//! `"1e400"`. This reader builds the JSON value itself and instead:
//!
//! - expands merge keys (`<<: *base`, `<<: [*a, *b]`) as YAML 1.1 and Kubernetes do: explicit
//!   keys win over merged ones, earlier merged mappings win over later ones, merged keys take the
//!   place of the `<<` entry. Only a *plain* `<<` is a merge key; a quoted `'<<'` is an ordinary
//!   key (as in go-yaml), which is how [`super::write_object`] writes such a key.
//! - rejects, with the reader's line and column: repeated keys, `.nan` / `.inf`, plain numbers
//!   beyond 64-bit integers or `f64`, merge values that are not mappings, and application tags
//!   (`!foo`) JSON has no room for.
//!
//! Telling a plain scalar from a quoted one: serde does not say, but serde_norway hands out
//! scalars that occur verbatim in the input as slices *of the input*. A quoted scalar's slice is
//! preceded by its quote character; a plain scalar's never is (a plain scalar cannot follow a
//! quote). A scalar not borrowed from the input (escapes, folded lines) is never a plain `<<` or
//! a plain number. The unit tests pin this behaviour down.

use std::collections::HashSet;
use std::fmt;

use serde::de::{self, DeserializeSeed, Deserializer, EnumAccess, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Number, Value};

use crate::object::describe;

/// Reads `text` (one YAML document) as a JSON value.
pub(crate) fn document_to_json(text: &str) -> Result<Value, serde_norway::Error> {
    Strict { text }.deserialize(serde_norway::Deserializer::from_str(text))
}

/// Deserializes any node into a [`Value`]; `text` is the whole input the node is borrowed from.
#[derive(Clone, Copy)]
struct Strict<'de> {
    text: &'de str,
}

impl Strict<'_> {
    /// Whether `s` is a plain (unquoted) scalar borrowed from the input.
    fn is_plain(&self, s: &str) -> bool {
        let Some(offset) = (s.as_ptr() as usize)
            .checked_sub(self.text.as_ptr() as usize)
            .filter(|offset| offset + s.len() <= self.text.len())
        else {
            return false;
        };
        offset == 0 || !matches!(self.text.as_bytes()[offset - 1], b'\'' | b'"')
    }
}

/// Whether `s` has the syntax of a YAML 1.2 (core schema) float.
fn looks_like_float(s: &str) -> bool {
    let s = s.strip_prefix(['-', '+']).unwrap_or(s);
    let (mantissa, exponent) = match s.find(['e', 'E']) {
        Some(at) => (&s[..at], Some(&s[at + 1..])),
        None => (s, None),
    };
    let (whole, fraction) = mantissa.split_once('.').unwrap_or((mantissa, ""));
    let digits = |t: &str| t.bytes().all(|b| b.is_ascii_digit());
    let mantissa_ok = digits(whole)
        && digits(fraction)
        && (!whole.is_empty() || !fraction.is_empty())
        && (mantissa.contains('.') || !whole.is_empty());
    let exponent_ok = exponent.is_none_or(|e| {
        let e = e.strip_prefix(['-', '+']).unwrap_or(e);
        !e.is_empty() && digits(e)
    });
    mantissa_ok && exponent_ok
}

impl<'de> DeserializeSeed<'de> for Strict<'de> {
    type Value = Value;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Value, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Strict<'de> {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a YAML value that JSON can hold")
    }

    fn visit_bool<E: de::Error>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Value, E> {
        Ok(Value::from(v))
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Value, E> {
        Ok(Value::from(v))
    }

    fn visit_i128<E: de::Error>(self, v: i128) -> Result<Value, E> {
        Err(E::custom(format!(
            "integer {v} is out of range: numbers must fit in 64 bits (quote it to keep it as a string)"
        )))
    }

    fn visit_u128<E: de::Error>(self, v: u128) -> Result<Value, E> {
        Err(E::custom(format!(
            "integer {v} is out of range: numbers must fit in 64 bits (quote it to keep it as a string)"
        )))
    }

    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Value, E> {
        Number::from_f64(v).map(Value::Number).ok_or_else(|| {
            let what = if v.is_nan() {
                ".nan"
            } else if v > 0.0 {
                ".inf"
            } else {
                "-.inf"
            };
            E::custom(format!(
                "{what} cannot be represented: JSON numbers are finite (quote it to keep it as a string)"
            ))
        })
    }

    fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Value, E> {
        if self.is_plain(v) && looks_like_float(v) && v.parse::<f64>().is_ok_and(f64::is_infinite) {
            // serde_norway gives a plain float it cannot hold as `f64` back as a string. (So does
            // it for `!!str 1e400`, which cannot be told apart here: `'1e400'` is the way.)
            return Err(E::custom(format!(
                "number {v} is out of range of a 64-bit float (quote it to keep it as a string)"
            )));
        }
        Ok(Value::String(v.to_owned()))
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<Value, E> {
        Ok(Value::String(v.to_owned()))
    }

    fn visit_string<E: de::Error>(self, v: String) -> Result<Value, E> {
        Ok(Value::String(v))
    }

    fn visit_unit<E: de::Error>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_none<E: de::Error>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_some<D: Deserializer<'de>>(self, deserializer: D) -> Result<Value, D::Error> {
        deserializer.deserialize_any(self)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut items = Vec::with_capacity(seq.size_hint().unwrap_or(0));
        while let Some(item) = seq.next_element_seed(self)? {
            items.push(item);
        }
        Ok(Value::Array(items))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut access: A) -> Result<Value, A::Error> {
        enum Entry {
            Explicit(String, Value),
            Merge(Vec<Map<String, Value>>),
        }
        let mut entries = Vec::new();
        let mut seen = HashSet::new();
        while let Some(key) = access.next_key_seed(KeySeed {
            strict: self,
            seen: &seen,
        })? {
            match key {
                Key::Merge => entries.push(Entry::Merge(access.next_value_seed(MergeSeed(self))?)),
                Key::Explicit(key) => {
                    let value = access.next_value_seed(self)?;
                    seen.insert(key.clone());
                    entries.push(Entry::Explicit(key, value));
                }
            }
        }
        let mut map = Map::with_capacity(entries.len());
        for entry in entries {
            match entry {
                Entry::Explicit(key, value) => {
                    map.insert(key, value);
                }
                Entry::Merge(sources) => {
                    for (key, value) in sources.into_iter().flatten() {
                        if !seen.contains(&key) && !map.contains_key(&key) {
                            map.insert(key, value);
                        }
                    }
                }
            }
        }
        Ok(Value::Object(map))
    }

    fn visit_enum<A: EnumAccess<'de>>(self, data: A) -> Result<Value, A::Error> {
        let (tag, _) = data.variant::<String>()?;
        Err(de::Error::custom(format!(
            "the YAML tag !{tag} is not supported: Kubernetes objects hold plain JSON values"
        )))
    }
}

enum Key {
    /// A plain `<<`.
    Merge,
    Explicit(String),
}

/// A mapping key: always a string (`1`, `true`, `null` as written), unique within its mapping.
struct KeySeed<'a, 'de> {
    strict: Strict<'de>,
    seen: &'a HashSet<String>,
}

impl<'de> DeserializeSeed<'de> for KeySeed<'_, 'de> {
    type Value = Key;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Key, D::Error> {
        deserializer.deserialize_str(self)
    }
}

impl<'de> Visitor<'de> for KeySeed<'_, 'de> {
    type Value = Key;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a string key")
    }

    fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Key, E> {
        if v == "<<" && self.strict.is_plain(v) {
            return Ok(Key::Merge);
        }
        self.visit_str(v)
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<Key, E> {
        if self.seen.contains(v) {
            return Err(E::custom(format!("duplicate key {v:?}")));
        }
        Ok(Key::Explicit(v.to_owned()))
    }
}

/// The value of a merge key: a mapping or a list of mappings.
struct MergeSeed<'de>(Strict<'de>);

impl<'de> DeserializeSeed<'de> for MergeSeed<'de> {
    type Value = Vec<Map<String, Value>>;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
        let bad = |found: &Value| {
            de::Error::custom(format!(
                "the merge key << needs a mapping or a list of mappings, found {}",
                describe(found)
            ))
        };
        match self.0.deserialize(deserializer)? {
            Value::Object(map) => Ok(vec![map]),
            Value::Array(items) => items
                .into_iter()
                .map(|item| match item {
                    Value::Object(map) => Ok(map),
                    other => Err(bad(&other)),
                })
                .collect(),
            other => Err(bad(&other)),
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn read(text: &str) -> Result<Value, String> {
        document_to_json(text).map_err(|e| e.to_string())
    }

    #[test]
    fn floats_are_recognised() {
        for float in ["1e400", "-1e400", "+1.5", ".5", "1.", "1.5E-3", "0.0"] {
            assert!(looks_like_float(float), "{float}");
        }
        for other in [
            "inf", "nan", "1e", "e5", ".", "-", "1.2.3", "0x1f", "", "1e+",
        ] {
            assert!(!looks_like_float(other), "{other}");
        }
    }

    #[test]
    fn non_finite_and_out_of_range_numbers_are_errors_with_positions() {
        for (text, message) in [
            ("a: .nan\n", ".nan cannot be represented"),
            ("a: .inf\n", ".inf cannot be represented"),
            ("a: -.Inf\n", "-.inf cannot be represented"),
            (
                "a: 1e400\n",
                "number 1e400 is out of range of a 64-bit float",
            ),
            ("a: [-1e400]\n", "number -1e400 is out of range"),
            (
                "a: 18446744073709551616\n",
                "integer 18446744073709551616 is out of range",
            ),
            (
                "a: -9223372036854775809\n",
                "integer -9223372036854775809 is out of range",
            ),
        ] {
            let err = read(text).expect_err(text);
            assert!(err.contains(message), "{text}: {err}");
            assert!(err.contains("line 1 column"), "{text}: {err}");
        }
        // Quoted, they are strings.
        assert_eq!(
            read("a: '1e400'\nb: \".nan\"\nc: '18446744073709551616'\n").unwrap(),
            json!({"a": "1e400", "b": ".nan", "c": "18446744073709551616"})
        );
        assert_eq!(
            read("a: 1e300\nb: -0.0\nc: 18446744073709551615\nd: -9223372036854775808\n").unwrap(),
            json!({"a": 1e300, "b": -0.0, "c": u64::MAX, "d": i64::MIN})
        );
    }

    #[test]
    fn keys_are_strings_as_written_and_unique() {
        assert_eq!(
            read("{1: a, 0x1f: b, true: c, null: d, 1.5: e, '': f, é: g}").unwrap(),
            json!({"1": "a", "0x1f": "b", "true": "c", "null": "d", "1.5": "e", "": "f", "é": "g"})
        );
        let err = read("a: 1\nb:\n  c: 2\n  c: 3\n").unwrap_err();
        assert!(err.contains("duplicate key \"c\""), "{err}");
        assert!(err.contains("line 4 column 3"), "{err}");
        assert!(
            read("{a: 1, 'a': 2}")
                .unwrap_err()
                .contains("duplicate key")
        );
        // A key that is a list or mapping has no JSON form.
        assert!(read("{? [a] : b}").is_err());
    }

    #[test]
    fn merge_keys_are_expanded() {
        let text = "\
base: &base {a: 1, b: 2, c: 3}
other: &other {c: 30, d: 40}
one:
  b: 20
  <<: *base
  z: 0
many:
  <<: [*other, *base]
  a: 10
";
        let value = read(text).unwrap();
        assert_eq!(
            serde_json::to_string(&value["one"]).unwrap(),
            r#"{"b":20,"a":1,"c":3,"z":0}"#
        );
        assert_eq!(
            serde_json::to_string(&value["many"]).unwrap(),
            r#"{"c":30,"d":40,"b":2,"a":10}"#
        );
        // A quoted '<<' is an ordinary key.
        assert!(
            read("'<<': {a: 1}\n\"<<\": x\n")
                .unwrap_err()
                .contains("duplicate key \"<<\"")
        );
        assert_eq!(read("'<<': {a: 1}\n").unwrap(), json!({"<<": {"a": 1}}));
        assert_eq!(read("\"<<\": [1]\n").unwrap(), json!({"<<": [1]}));
        for bad in ["<<: 1\n", "<<: [{a: 1}, 2]\n", "<<: [[]]\n"] {
            let err = read(bad).unwrap_err();
            assert!(err.contains("merge key << needs a mapping"), "{bad}: {err}");
        }
    }

    #[test]
    fn application_tags_are_errors() {
        let err = read("a: !custom x\n").unwrap_err();
        assert!(err.contains("YAML tag !custom is not supported"), "{err}");
        assert!(err.contains("line 1"), "{err}");
        assert_eq!(
            read("a: !!str 1\nb: !!binary aGk=\nc: !!int '7'\nd: !!str 1.5\n").unwrap(),
            json!({"a": "1", "b": "aGk=", "c": 7, "d": "1.5"})
        );
    }
}
