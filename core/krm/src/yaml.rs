//! YAML text: splitting a stream into documents with their line numbers, and writing objects.
//!
//! Reading uses serde_norway per document, through the strict JSON builder in [`reader`] (merge
//! keys expanded; repeated keys, `.nan`, out-of-range numbers and application tags rejected).
//! Line breaks are YAML's (`\n`, `\r\n`, lone `\r`); a byte order mark may open the stream.
//! Writing is done here so that the output is safe for
//! YAML 1.1 readers too (Kubernetes tooling): strings such as `yes`, `on`, `1.0` or `null` are
//! always quoted, multi-line strings become literal blocks when that is exact, anything else
//! that is not obviously plain is quoted.

use serde_json::{Map, Value};

use crate::object::Object;

pub(crate) mod limits;
mod reader;

pub(crate) use reader::document_to_json;

/// One document of a YAML stream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct DocumentText<'a> {
    /// The document's text, including its `---` line if it has one.
    pub text: &'a str,
    /// 1-based line in the stream of the document's first line of `text`.
    pub first_line: usize,
    /// 1-based line where the document starts: its `---` marker, else its first content line.
    pub start_line: usize,
    /// Whether the document has any content (not only blank lines, comments and markers).
    pub has_content: bool,
}

fn is_marker(line: &str, marker: &str) -> bool {
    line.strip_prefix(marker)
        .is_some_and(|rest| rest.is_empty() || rest.starts_with([' ', '\t']))
}

fn is_blank_or_comment(text: &str) -> bool {
    let trimmed = text.trim_start_matches([' ', '\t']);
    trimmed.is_empty() || trimmed.starts_with('#')
}

/// The lines of `text`, each with its line break. Line breaks are those of YAML: `\n`, `\r\n` and
/// a lone `\r`.
fn lines_with_breaks(text: &str) -> impl Iterator<Item = &str> {
    let mut rest = text;
    std::iter::from_fn(move || {
        if rest.is_empty() {
            return None;
        }
        let end = match rest.find(['\n', '\r']) {
            None => rest.len(),
            Some(at) if rest[at..].starts_with("\r\n") => at + 2,
            Some(at) => at + 1,
        };
        let (line, after) = rest.split_at(end);
        rest = after;
        Some(line)
    })
}

/// Splits a YAML stream at `---` and `...` lines (column 0). A `---` line belongs to the document
/// it starts; directives (`%…`) stay with the document that follows them. A byte order mark at
/// the start of the stream is not part of any document.
pub(crate) fn split_documents<'a>(input: &'a str) -> Vec<DocumentText<'a>> {
    let input = input.strip_prefix('\u{feff}').unwrap_or(input);
    struct Current {
        start: usize,
        first_line: usize,
        marker_line: Option<usize>,
        content_line: Option<usize>,
        only_directives: bool,
    }
    let new = |start, first_line| Current {
        start,
        first_line,
        marker_line: None,
        content_line: None,
        only_directives: true,
    };
    let mut documents = Vec::new();
    let finish = |current: &Current, end: usize, documents: &mut Vec<DocumentText<'a>>| {
        let text = &input[current.start..end];
        documents.push(DocumentText {
            text,
            first_line: current.first_line,
            start_line: current
                .marker_line
                .or(current.content_line)
                .unwrap_or(current.first_line),
            has_content: current.content_line.is_some(),
        });
    };

    let mut current = new(0, 1);
    let mut offset = 0;
    for (index, raw) in lines_with_breaks(input).enumerate() {
        let line_number = index + 1;
        let line = raw.trim_end_matches(['\n', '\r']);
        if is_marker(line, "---") {
            let keeps_directives = current.only_directives && current.marker_line.is_none();
            if !keeps_directives {
                finish(&current, offset, &mut documents);
                current = new(offset, line_number);
            }
            current.marker_line = Some(line_number);
            current.only_directives = false;
            if !is_blank_or_comment(&line[3..]) {
                current.content_line.get_or_insert(line_number);
            }
        } else if is_marker(line, "...") {
            current.only_directives = false;
            finish(&current, offset + raw.len(), &mut documents);
            current = new(offset + raw.len(), line_number + 1);
        } else if line.starts_with('%') && current.only_directives && current.content_line.is_none()
        {
            // A directive: it belongs to the document its `---` opens.
        } else if !is_blank_or_comment(line) {
            current.only_directives = false;
            current.content_line.get_or_insert(line_number);
        }
        offset += raw.len();
    }
    finish(&current, input.len(), &mut documents);
    documents
}

/// The 1-based line and column of a byte order mark inside `document` (YAML allows one only at
/// the start of the stream, and libyaml's own message for it is misleading).
pub(crate) fn stray_byte_order_mark(document: &DocumentText<'_>) -> Option<(usize, usize)> {
    (document.first_line..)
        .zip(lines_with_breaks(document.text))
        .find_map(|(line, text)| {
            let at = text.find('\u{feff}')?;
            Some((line, text[..at].chars().count() + 1))
        })
}

/// Writes `object` as one block-style YAML document (no `---`).
pub(crate) fn write_object(out: &mut String, object: &Object) {
    if let Value::Object(map) = object.to_json() {
        write_mapping(out, &map, 0, false);
    }
}

/// Writes the entries of `map` at `indent` spaces. With `inline_first`, the caller has already
/// written the indentation (as `- `) of the first entry.
fn write_mapping(out: &mut String, map: &Map<String, Value>, indent: usize, inline_first: bool) {
    for (index, (key, value)) in map.iter().enumerate() {
        if !(inline_first && index == 0) {
            push_indent(out, indent);
        }
        let mut written_key = String::new();
        write_key(&mut written_key, key);
        if written_key.len() > 1000 {
            // libyaml limits implicit keys to 1024 bytes *as written* (quotes, escapes and
            // multi-byte characters count): use an explicit `? key` entry.
            out.push_str("? ");
            write_quoted(out, key);
            out.push('\n');
            push_indent(out, indent);
        } else {
            out.push_str(&written_key);
        }
        out.push(':');
        match value {
            Value::Object(inner) if !inner.is_empty() => {
                out.push('\n');
                write_mapping(out, inner, indent + 2, false);
            }
            Value::Array(items) if !items.is_empty() => {
                out.push('\n');
                write_sequence(out, items, indent, false);
            }
            scalar => {
                out.push(' ');
                write_scalar(out, scalar, indent);
            }
        }
    }
}

fn write_sequence(out: &mut String, items: &[Value], indent: usize, inline_first: bool) {
    for (index, item) in items.iter().enumerate() {
        if !(inline_first && index == 0) {
            push_indent(out, indent);
        }
        out.push_str("- ");
        match item {
            Value::Object(inner) if !inner.is_empty() => {
                write_mapping(out, inner, indent + 2, true)
            }
            Value::Array(inner) if !inner.is_empty() => {
                write_sequence(out, inner, indent + 2, true)
            }
            scalar => write_scalar(out, scalar, indent),
        }
    }
}

fn push_indent(out: &mut String, indent: usize) {
    out.extend(std::iter::repeat_n(' ', indent));
}

/// Writes a scalar (or empty collection) and the line break after it. `indent` is the
/// indentation of the node that holds it; literal block lines go two spaces deeper.
fn write_scalar(out: &mut String, value: &Value, indent: usize) {
    match value {
        Value::Null => out.push_str("null"),
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Number(n) => out.push_str(&n.to_string()),
        Value::String(s) => {
            if is_plain_safe(s) {
                out.push_str(s);
            } else if literal_block_fits(s) {
                write_literal_block(out, s, indent + 2);
                return;
            } else {
                write_quoted(out, s);
            }
        }
        Value::Array(_) => out.push_str("[]"),
        Value::Object(_) => out.push_str("{}"),
    }
    out.push('\n');
}

fn write_key(out: &mut String, key: &str) {
    if is_plain_safe(key) {
        out.push_str(key);
    } else {
        write_quoted(out, key);
    }
}

/// Characters that YAML cannot carry unescaped (or that readers treat as line breaks).
fn needs_escape(c: char) -> bool {
    c < ' '
        || ('\u{7f}'..='\u{9f}').contains(&c)
        || matches!(
            c,
            '\u{2028}' | '\u{2029}' | '\u{feff}' | '\u{fffe}' | '\u{ffff}'
        )
}

/// Single quotes when nothing needs escaping, double quotes with escapes otherwise.
fn write_quoted(out: &mut String, s: &str) {
    if !s.chars().any(needs_escape) {
        out.push('\'');
        out.push_str(&s.replace('\'', "''"));
        out.push('\'');
        return;
    }
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            c if needs_escape(c) => out.push_str(&format!("\\u{:04X}", u32::from(c))),
            c => out.push(c),
        }
    }
    out.push('"');
}

/// Whether `s` can be written without quotes and read back as the same string by YAML 1.1 and
/// 1.2 readers. Deliberately conservative: anything that could look like a number, bool, null,
/// timestamp, indicator or comment is quoted.
fn is_plain_safe(s: &str) -> bool {
    const RESERVED: &[&str] = &[
        "y", "n", "yes", "no", "true", "false", "on", "off", "null", "~",
    ];
    let mut chars = s.chars();
    let Some(first) = chars.next() else {
        return false;
    };
    let first_ok = (first.is_alphabetic() && !first.is_ascii_digit())
        || matches!(first, '_' | '/' | '$' | '(')
        || (first == '-'
            && chars
                .next()
                .is_some_and(|c| c == '-' || c.is_ascii_alphabetic()));
    first_ok
        && !s.starts_with("---")
        && !s.ends_with([' ', ':'])
        && !s.contains(": ")
        && !s.contains("  ")
        && s.chars()
            .all(|c| c.is_alphanumeric() || " -_./:=+@,()%~$*&!?^'\"\\|<>[]{};`".contains(c))
        && !RESERVED.contains(&s.to_ascii_lowercase().as_str())
}

/// Whether a multi-line string can be written as a literal block and read back exactly.
fn literal_block_fits(s: &str) -> bool {
    s.contains('\n')
        && s.contains(|c: char| !matches!(c, ' ' | '\n' | '\t'))
        && !s.chars().any(|c| needs_escape(c) && c != '\n')
}

fn write_literal_block(out: &mut String, s: &str, content_indent: usize) {
    let body = s.trim_end_matches('\n');
    let trailing_breaks = s.len() - body.len();
    out.push('|');
    // An explicit indentation indicator when the first non-empty line starts with whitespace
    // (auto-detection would take it for indentation).
    if body
        .split('\n')
        .find(|line| !line.is_empty())
        .is_some_and(|line| line.starts_with([' ', '\t']))
    {
        out.push('2');
    }
    out.push(match trailing_breaks {
        0 => '-',
        1 => '\n',
        _ => '+',
    });
    if trailing_breaks != 1 {
        out.push('\n');
    }
    for line in body.split('\n') {
        if !line.is_empty() {
            push_indent(out, content_indent);
            out.push_str(line);
        }
        out.push('\n');
    }
    for _ in 1..trailing_breaks {
        out.push('\n');
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn summary(input: &str) -> Vec<(usize, usize, bool, &str)> {
        split_documents(input)
            .into_iter()
            .map(|d| (d.first_line, d.start_line, d.has_content, d.text))
            .collect()
    }

    #[test]
    fn splits_with_line_numbers() {
        let input = "# lead\na: 1\n---\nb: 2\n--- # c\n\n---\n  c: 3\n";
        assert_eq!(
            summary(input),
            vec![
                (1, 2, true, "# lead\na: 1\n"),
                (3, 3, true, "---\nb: 2\n"),
                (5, 5, false, "--- # c\n\n"),
                (7, 7, true, "---\n  c: 3\n"),
            ]
        );
    }

    #[test]
    fn leading_marker_directives_and_end_markers() {
        assert_eq!(summary("---\na: 1\n"), vec![(1, 1, true, "---\na: 1\n")]);
        assert_eq!(
            summary("# c\n\n---\na: 1\n"),
            vec![(1, 3, true, "# c\n\n---\na: 1\n")]
        );
        assert_eq!(
            summary("%YAML 1.2\n---\na: 1\n...\nb: 2"),
            vec![
                (1, 2, true, "%YAML 1.2\n---\na: 1\n...\n"),
                (5, 5, true, "b: 2")
            ]
        );
        assert_eq!(
            summary("--- {a: 1}\n---a: 2\n"),
            vec![(1, 1, true, "--- {a: 1}\n---a: 2\n")]
        );
        assert_eq!(summary(""), vec![(1, 1, false, "")]);
        assert_eq!(summary("a: 1\r\n---\r\nb: 2\r\n").len(), 2);
    }

    #[test]
    fn plain_or_quoted() {
        for plain in [
            "web",
            "nephio.org/prepare",
            "Hello world",
            "--flag=x",
            "a:b",
            "é",
            "x#y",
        ] {
            if plain == "x#y" {
                assert!(!is_plain_safe(plain));
                continue;
            }
            assert!(is_plain_safe(plain), "{plain:?}");
        }
        for quoted in [
            "",
            "yes",
            "No",
            "ON",
            "y",
            "null",
            "~",
            "1.0",
            "10.0.0.1",
            "2024-01-01",
            ".inf",
            "-1",
            "- x",
            ":",
            "a: b",
            "a ",
            " a",
            "#x",
            "@x",
            "*x",
            "&x",
            "!x",
            "'",
            "---",
            "...",
            "<<",
            "=",
            "a\nb",
            "a\tb",
        ] {
            assert!(!is_plain_safe(quoted), "{quoted:?}");
        }
    }

    #[test]
    fn long_keys_are_measured_as_written() {
        // Each is at most 1000 characters but longer than 1024 bytes once written.
        for key in [
            "\u{1}".repeat(500),
            "'".repeat(600),
            "日".repeat(400),
            "é".repeat(999),
        ] {
            let mut body = crate::Body::default();
            body.insert(key.clone(), Value::from(1)).unwrap();
            let object = Object {
                api_version: "v1".into(),
                kind: "X".into(),
                body,
                ..Object::default()
            };
            let yaml = object.to_yaml();
            let value = document_to_json(&yaml).unwrap_or_else(|e| panic!("{e}\n{yaml:.200}"));
            assert_eq!(value[key.as_str()], Value::from(1), "{yaml:.200}");
        }
    }

    #[test]
    fn line_breaks_are_those_of_yaml() {
        assert_eq!(
            lines_with_breaks("a\nb\r\nc\rd").collect::<Vec<_>>(),
            ["a\n", "b\r\n", "c\r", "d"]
        );
        assert_eq!(
            summary("a: 1\r---\rb: 2\r"),
            vec![(1, 1, true, "a: 1\r"), (2, 2, true, "---\rb: 2\r")]
        );
    }

    #[test]
    fn byte_order_mark_starts_no_document() {
        assert_eq!(
            summary("\u{feff}---\na: 1\n"),
            vec![(1, 1, true, "---\na: 1\n")]
        );
        assert_eq!(summary("\u{feff}a: 1\n"), vec![(1, 1, true, "a: 1\n")]);
    }

    #[test]
    fn literal_blocks() {
        let mut out = String::new();
        write_literal_block(&mut out, "a\n  b\n\n", 2);
        assert_eq!(out, "|+\n  a\n    b\n\n");
        let mut out = String::new();
        write_literal_block(&mut out, " a\nb", 4);
        assert_eq!(out, "|2-\n     a\n    b\n");
    }
}
