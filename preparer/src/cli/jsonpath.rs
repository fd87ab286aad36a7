//! `-o jsonpath=TEMPLATE`, as kubectl reads it: text is copied, `{EXPR}` prints what a JSONPath
//! expression selects (`.items[*].siteId`; several values space-separated, strings without
//! quotes, objects as JSON), `{"\n"}` prints a quoted literal with `\n`, `\t`, `\\` and `\"`
//! escapes, and `{range EXPR}…{end}` repeats its body for every value selected, with the
//! expressions inside relative to that value. Listings are the object
//! `{"kind": "List", "items": [...]}`, as in kubectl. Expressions are RFC 9535 JSONPath
//! (`jsonpath-rust`) with the leading `$` optional.

use std::fmt::Write as _;

use jsonpath_rust::JsonPath as _;
use serde_json::Value;

/// A parsed template.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Template(Vec<Node>);

#[derive(Debug, Clone, PartialEq, Eq)]
enum Node {
    Text(String),
    Query(String),
    Range(String, Vec<Node>),
}

/// What is wrong with a template, with the byte offset it was found at.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TemplateError {
    /// A `{` without its `}`.
    #[error("jsonpath template: `{{` at byte {0} is never closed")]
    Unclosed(usize),
    /// An `{end}` without a `{range}`.
    #[error("jsonpath template: `{{end}}` at byte {0} closes no `{{range}}`")]
    StrayEnd(usize),
    /// A `{range}` without its `{end}`.
    #[error("jsonpath template: `{{range}}` at byte {0} has no `{{end}}`")]
    UnendedRange(usize),
    /// `{}` or `{ }`.
    #[error("jsonpath template: empty expression at byte {0}")]
    Empty(usize),
    /// An expression JSONPath does not accept.
    #[error("jsonpath template: expression {expression:?} at byte {at}: {reason}")]
    Expression {
        /// Where it starts.
        at: usize,
        /// The expression as written.
        expression: String,
        /// Why it is refused.
        reason: String,
    },
    /// A quoted literal that does not end or has an unknown escape.
    #[error(
        "jsonpath template: literal at byte {0} is not a closed string with \\n \\t \\\\ \\\" escapes"
    )]
    Literal(usize),
}

impl std::str::FromStr for Template {
    type Err = TemplateError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        // Each open `{range}`: where it started, its expression, and the nodes of the enclosing
        // body it will be pushed into.
        let mut open: Vec<(usize, String, Vec<Node>)> = Vec::new();
        let mut nodes = Vec::new();
        let mut rest = text;
        while !rest.is_empty() {
            let at = text.len() - rest.len();
            let Some(brace) = rest.find('{') else {
                nodes.push(Node::Text(rest.to_owned()));
                break;
            };
            if brace > 0 {
                nodes.push(Node::Text(rest[..brace].to_owned()));
            }
            let start = at + brace;
            let inner_len = closing(&rest[brace + 1..]).ok_or(TemplateError::Unclosed(start))?;
            let inner = rest[brace + 1..brace + 1 + inner_len].trim();
            rest = &rest[brace + 1 + inner_len + 1..];
            if inner.is_empty() {
                return Err(TemplateError::Empty(start));
            } else if inner == "end" {
                let (_, expression, outer) = open.pop().ok_or(TemplateError::StrayEnd(start))?;
                let body = std::mem::replace(&mut nodes, outer);
                nodes.push(Node::Range(expression, body));
            } else if let Some(expression) = inner.strip_prefix("range ") {
                let expression = path(expression.trim(), start)?;
                open.push((start, expression, std::mem::take(&mut nodes)));
            } else if inner.starts_with('"') || inner.starts_with('\'') {
                nodes.push(Node::Text(
                    literal(inner).ok_or(TemplateError::Literal(start))?,
                ));
            } else {
                nodes.push(Node::Query(path(inner, start)?));
            }
        }
        if let Some((at, _, _)) = open.pop() {
            return Err(TemplateError::UnendedRange(at));
        }
        Ok(Self(nodes))
    }
}

impl Template {
    /// The template applied to `root`.
    pub fn render(&self, root: &Value) -> String {
        let mut out = String::new();
        render(&self.0, root, &mut out);
        out
    }
}

fn render(nodes: &[Node], current: &Value, out: &mut String) {
    for node in nodes {
        match node {
            Node::Text(text) => out.push_str(text),
            Node::Query(expression) => {
                let values = select(current, expression);
                for (n, value) in values.iter().enumerate() {
                    if n > 0 {
                        out.push(' ');
                    }
                    print(value, out);
                }
            }
            Node::Range(expression, body) => {
                for value in select(current, expression) {
                    render(body, value, out);
                }
            }
        }
    }
}

/// What `expression` selects in `value`, a range over an array selecting its elements.
fn select<'a>(value: &'a Value, expression: &str) -> Vec<&'a Value> {
    // Validated when parsed; an expression the library still refuses selects nothing.
    value.query(expression).unwrap_or_default()
}

fn print(value: &Value, out: &mut String) {
    match value {
        Value::String(text) => out.push_str(text),
        Value::Null => {}
        other => {
            let _ = write!(out, "{other}");
        }
    }
}

/// `expression` as RFC 9535 JSONPath: `.a`, `[0]` and `@.a` get their `$`.
fn path(expression: &str, at: usize) -> Result<String, TemplateError> {
    let rooted = if let Some(relative) = expression.strip_prefix('@') {
        format!("${relative}")
    } else if expression.starts_with('.') || expression.starts_with('[') {
        format!("${expression}")
    } else if expression.starts_with('$') {
        expression.to_owned()
    } else {
        return Err(TemplateError::Expression {
            at,
            expression: expression.to_owned(),
            reason: "an expression starts with `.`, `[`, `@` or `$`".to_owned(),
        });
    };
    Value::Null
        .query(&rooted)
        .map_err(|error| TemplateError::Expression {
            at,
            expression: expression.to_owned(),
            reason: error.to_string(),
        })?;
    Ok(rooted)
}

/// The length of the text before the `}` closing a `{`, skipping quoted strings and brackets.
fn closing(text: &str) -> Option<usize> {
    let mut quote: Option<char> = None;
    let mut escaped = false;
    let mut depth = 0usize;
    for (at, c) in text.char_indices() {
        match quote {
            Some(q) => {
                if escaped {
                    escaped = false;
                } else if c == '\\' {
                    escaped = true;
                } else if c == q {
                    quote = None;
                }
            }
            None => match c {
                '"' | '\'' => quote = Some(c),
                '[' | '(' => depth += 1,
                ']' | ')' => depth = depth.saturating_sub(1),
                '}' if depth == 0 => return Some(at),
                _ => {}
            },
        }
    }
    None
}

/// A quoted literal's text, escapes resolved.
fn literal(quoted: &str) -> Option<String> {
    let quote = quoted.chars().next()?;
    let body = quoted.strip_prefix(quote)?.strip_suffix(quote)?;
    let mut out = String::new();
    let mut chars = body.chars();
    while let Some(c) = chars.next() {
        if c == quote {
            return None;
        }
        if c != '\\' {
            out.push(c);
            continue;
        }
        out.push(match chars.next()? {
            'n' => '\n',
            't' => '\t',
            'r' => '\r',
            '\\' => '\\',
            '"' => '"',
            '\'' => '\'',
            _ => return None,
        });
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::{Template, TemplateError};

    fn list() -> serde_json::Value {
        json!({"kind": "List", "items": [
            {"deploymentId": "d1", "siteId": "paris/edge-1", "metadata": {"nf-deployed-id": "upf-paris"}, "approved": true},
            {"deploymentId": "d2", "siteId": "lyon/edge-2", "metadata": {}, "approved": false},
        ]})
    }

    fn render(template: &str) -> String {
        template.parse::<Template>().unwrap().render(&list())
    }

    #[test]
    fn kubectl_style_templates_print_what_they_select() {
        assert_eq!(render("{.items[*].deploymentId}"), "d1 d2");
        assert_eq!(render("{.items[0].siteId}"), "paris/edge-1");
        assert_eq!(
            render(r#"{range .items[*]}{.deploymentId}{"\t"}{.approved}{"\n"}{end}"#),
            "d1\ttrue\nd2\tfalse\n"
        );
        assert_eq!(
            render("{.items[0].metadata['nf-deployed-id']}"),
            "upf-paris"
        );
        assert_eq!(render("ids: {$.items[*].deploymentId}!"), "ids: d1 d2!");
        assert_eq!(render("{.items[1].metadata}"), "{}");
        assert_eq!(render("{.items[5].siteId}"), "", "nothing selected");
        assert_eq!(
            render("{.items[?(@.approved == true)].deploymentId}"),
            "d1",
            "a filter with brackets and parentheses inside the braces"
        );
        assert_eq!(
            render(r#"{range .items[*]}{range .metadata.*}{@}{"\n"}{end}{end}"#),
            "upf-paris\n"
        );
    }

    #[test]
    fn broken_templates_say_what_and_where() {
        let error = |t: &str| t.parse::<Template>().unwrap_err();
        assert_eq!(error("id {.items"), TemplateError::Unclosed(3));
        assert_eq!(error("{end}"), TemplateError::StrayEnd(0));
        assert_eq!(
            error("x{range .items[*]}{.a}"),
            TemplateError::UnendedRange(1)
        );
        assert_eq!(error("{ }"), TemplateError::Empty(0));
        assert_eq!(error(r#"{"\q"}"#), TemplateError::Literal(0));
        assert!(matches!(
            error("{items}"),
            TemplateError::Expression { at: 0, .. }
        ));
        assert!(matches!(
            error("{.items[}"),
            TemplateError::Unclosed(0) | TemplateError::Expression { .. }
        ));
        assert!(error("{.items[?(@.a ==]}").to_string().contains("byte 0"));
    }
}
