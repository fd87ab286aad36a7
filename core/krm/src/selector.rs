//! Label selectors: Kubernetes' `matchLabels` + `matchExpressions`, matching, and the string
//! form used by `kubectl -l`.
//!
//! # String form
//!
//! Requirements separated by commas, all of which must hold:
//!
//! | string | structure | matches when |
//! |---|---|---|
//! | `a=b`, `a==b` | `matchLabels: {a: b}` | label `a` is `b` |
//! | `a!=b` | `{key: a, operator: NotIn, values: [b]}` | `a` is absent **or** not `b` |
//! | `a in (b,c)` | `{key: a, operator: In, values: [b, c]}` | `a` is `b` or `c` |
//! | `a notin (b,c)` | `{key: a, operator: NotIn, values: [b, c]}` | `a` is absent or neither |
//! | `a` | `{key: a, operator: Exists}` | `a` is present |
//! | `!a` | `{key: a, operator: DoesNotExist}` | `a` is absent |
//!
//! `!=` is Kubernetes' semantics: it matches objects that lack the label, i.e. it is `NotIn`
//! with one value (and is displayed back as `!=`). As in Kubernetes' parser, an omitted value is
//! the empty string: `a=` requires label `a` with an empty value, `a!=` excludes it, and
//! `a in ()` is `a in ("")` (not an empty set, which would be invalid). Tokens are separated by
//! ASCII spaces, tabs and line breaks only. A second `=` requirement on a key already in
//! `matchLabels` becomes an `In` expression with one value, so nothing is lost.
//!
//! [`Display`](std::fmt::Display) writes the canonical form: `matchLabels` first, in order, then
//! the expressions in order; parsing it gives back an equal selector. An empty selector is the
//! empty string and matches everything.
//!
//! ```
//! use nephrite_krm::LabelSelector;
//!
//! let selector: LabelSelector = "region=eu, tier!=test, role in (upf,smf), !legacy".parse()?;
//! assert_eq!(selector.to_string(), "region=eu,tier!=test,role in (upf,smf),!legacy");
//! assert!(selector.matches(&[("region", "eu"), ("role", "upf")]));
//! assert!(!selector.matches(&[("region", "eu"), ("role", "upf"), ("tier", "test")]));
//!
//! let err = "region=eu,role in (upf".parse::<LabelSelector>().unwrap_err();
//! assert_eq!(err.to_string(), r#"label selector "region=eu,role in (upf": at position 22: expected `,` or `)`, found end of input"#);
//! # Ok::<(), nephrite_krm::SelectorParseError>(())
//! ```

use std::fmt;
use std::str::FromStr;

use indexmap::IndexMap;
use serde::{Deserialize, Deserializer, Serialize};

use crate::label::{LabelError, LabelLookup, validate_label_key, validate_label_value};

/// A Kubernetes label selector. Every `matchLabels` entry and every expression must hold; the
/// empty selector matches everything. (A *missing* selector, matching nothing, is the caller's
/// `Option<LabelSelector>`.)
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LabelSelector {
    /// Labels that must be present with exactly these values.
    #[serde(
        default,
        deserialize_with = "null_as_default",
        skip_serializing_if = "IndexMap::is_empty"
    )]
    pub match_labels: IndexMap<String, String>,
    /// Further requirements.
    #[serde(
        default,
        deserialize_with = "null_as_default",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub match_expressions: Vec<LabelSelectorRequirement>,
}

/// One entry of `matchExpressions`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LabelSelectorRequirement {
    /// The label key.
    pub key: String,
    /// How the label is compared.
    pub operator: SelectorOperator,
    /// The values for `In` / `NotIn` (non-empty); empty for `Exists` / `DoesNotExist`.
    #[serde(
        default,
        deserialize_with = "null_as_default",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub values: Vec<String>,
}

/// The operator of a [`LabelSelectorRequirement`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum SelectorOperator {
    /// The label is present with one of the values.
    In,
    /// The label is absent, or present with none of the values.
    NotIn,
    /// The label is present.
    Exists,
    /// The label is absent.
    DoesNotExist,
}

impl fmt::Display for SelectorOperator {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            SelectorOperator::In => "In",
            SelectorOperator::NotIn => "NotIn",
            SelectorOperator::Exists => "Exists",
            SelectorOperator::DoesNotExist => "DoesNotExist",
        })
    }
}

fn null_as_default<'de, D, T>(deserializer: D) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: Default + Deserialize<'de>,
{
    Ok(Option::<T>::deserialize(deserializer)?.unwrap_or_default())
}

/// A selector that breaks Kubernetes' validation rules.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SelectorError {
    /// A key or value is not a valid label key or value.
    #[error(transparent)]
    Label(#[from] LabelError),
    /// `In` / `NotIn` without values.
    #[error("requirement on {key:?} with operator {operator} needs at least one value")]
    MissingValues {
        /// The requirement's key.
        key: String,
        /// Its operator.
        operator: SelectorOperator,
    },
    /// `Exists` / `DoesNotExist` with values.
    #[error(
        "requirement on {key:?} with operator {operator} must not have values, found {values:?}"
    )]
    UnexpectedValues {
        /// The requirement's key.
        key: String,
        /// Its operator.
        operator: SelectorOperator,
        /// The values found.
        values: Vec<String>,
    },
}

/// A selector string that could not be parsed. Positions are 0-based byte offsets.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SelectorParseError {
    /// A token that does not fit the grammar.
    #[error("label selector {input:?}: at position {position}: expected {expected}, found {found}")]
    Unexpected {
        /// The whole selector string.
        input: String,
        /// Byte offset of the token.
        position: usize,
        /// The token found (quoted), or `end of input`.
        found: String,
        /// What would have fitted.
        expected: &'static str,
    },
    /// A key or value that is not a valid label key or value.
    #[error("label selector {input:?}: at position {position}: {source}")]
    InvalidLabel {
        /// The whole selector string.
        input: String,
        /// Byte offset of the key or value.
        position: usize,
        /// What is wrong with it.
        source: LabelError,
    },
}

impl LabelSelectorRequirement {
    /// `key in (values)`.
    pub fn in_values<I, S>(key: impl Into<String>, values: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        Self::with_values(key, SelectorOperator::In, values)
    }

    /// `key notin (values)`.
    pub fn not_in<I, S>(key: impl Into<String>, values: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        Self::with_values(key, SelectorOperator::NotIn, values)
    }

    /// `key` (the label exists).
    pub fn exists(key: impl Into<String>) -> Self {
        Self::with_values(key, SelectorOperator::Exists, Vec::<String>::new())
    }

    /// `!key` (the label does not exist).
    pub fn does_not_exist(key: impl Into<String>) -> Self {
        Self::with_values(key, SelectorOperator::DoesNotExist, Vec::<String>::new())
    }

    fn with_values<I, S>(key: impl Into<String>, operator: SelectorOperator, values: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        LabelSelectorRequirement {
            key: key.into(),
            operator,
            values: values.into_iter().map(Into::into).collect(),
        }
    }

    /// Whether the labels satisfy this requirement. `In` with no values matches nothing and
    /// `NotIn` with no values matches everything; values of `Exists` / `DoesNotExist` are
    /// ignored ([`LabelSelector::validate`] rejects both).
    pub fn matches<L: LabelLookup + ?Sized>(&self, labels: &L) -> bool {
        let value = labels.label_value(&self.key);
        match self.operator {
            SelectorOperator::In => value.is_some_and(|v| self.values.iter().any(|x| x == v)),
            SelectorOperator::NotIn => value.is_none_or(|v| self.values.iter().all(|x| x != v)),
            SelectorOperator::Exists => value.is_some(),
            SelectorOperator::DoesNotExist => value.is_none(),
        }
    }

    /// Checks the key, the values and that the operator has values exactly when it needs them.
    pub fn validate(&self) -> Result<(), SelectorError> {
        validate_label_key(&self.key)?;
        match self.operator {
            SelectorOperator::In | SelectorOperator::NotIn if self.values.is_empty() => {
                return Err(SelectorError::MissingValues {
                    key: self.key.clone(),
                    operator: self.operator,
                });
            }
            SelectorOperator::Exists | SelectorOperator::DoesNotExist
                if !self.values.is_empty() =>
            {
                return Err(SelectorError::UnexpectedValues {
                    key: self.key.clone(),
                    operator: self.operator,
                    values: self.values.clone(),
                });
            }
            _ => {}
        }
        for value in &self.values {
            validate_label_value(&self.key, value)?;
        }
        Ok(())
    }
}

impl fmt::Display for LabelSelectorRequirement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let key = &self.key;
        match (self.operator, self.values.as_slice()) {
            (SelectorOperator::NotIn, [value]) => write!(f, "{key}!={value}"),
            (SelectorOperator::In, values) => write!(f, "{key} in ({})", values.join(",")),
            (SelectorOperator::NotIn, values) => write!(f, "{key} notin ({})", values.join(",")),
            (SelectorOperator::Exists, _) => f.write_str(key),
            (SelectorOperator::DoesNotExist, _) => write!(f, "!{key}"),
        }
    }
}

impl LabelSelector {
    /// The empty selector (matches everything).
    pub fn new() -> Self {
        LabelSelector::default()
    }

    /// The same selector also requiring label `key` to be `value`.
    pub fn with_label(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.match_labels.insert(key.into(), value.into());
        self
    }

    /// The same selector with one more expression.
    pub fn with_expression(mut self, requirement: LabelSelectorRequirement) -> Self {
        self.match_expressions.push(requirement);
        self
    }

    /// Whether it has no requirement (and so matches everything).
    pub fn is_empty(&self) -> bool {
        self.match_labels.is_empty() && self.match_expressions.is_empty()
    }

    /// Whether the labels satisfy every requirement.
    pub fn matches<L: LabelLookup + ?Sized>(&self, labels: &L) -> bool {
        self.match_labels
            .iter()
            .all(|(key, value)| labels.label_value(key) == Some(value.as_str()))
            && self.match_expressions.iter().all(|r| r.matches(labels))
    }

    /// Checks every key and value and the operators' values (Kubernetes' validation).
    pub fn validate(&self) -> Result<(), SelectorError> {
        for (key, value) in &self.match_labels {
            validate_label_key(key)?;
            validate_label_value(key, value)?;
        }
        self.match_expressions
            .iter()
            .try_for_each(LabelSelectorRequirement::validate)
    }
}

impl fmt::Display for LabelSelector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut separator = "";
        for (key, value) in &self.match_labels {
            write!(f, "{separator}{key}={value}")?;
            separator = ",";
        }
        for requirement in &self.match_expressions {
            write!(f, "{separator}{requirement}")?;
            separator = ",";
        }
        Ok(())
    }
}

impl FromStr for LabelSelector {
    type Err = SelectorParseError;

    fn from_str(input: &str) -> Result<Self, Self::Err> {
        Parser::new(input).selector()
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Token<'a> {
    Word(&'a str),
    Equals,
    DoubleEquals,
    NotEquals,
    Bang,
    Open,
    Close,
    Comma,
    End,
}

impl Token<'_> {
    fn describe(&self) -> String {
        match self {
            Token::Word(word) => format!("{word:?}"),
            Token::Equals => "`=`".into(),
            Token::DoubleEquals => "`==`".into(),
            Token::NotEquals => "`!=`".into(),
            Token::Bang => "`!`".into(),
            Token::Open => "`(`".into(),
            Token::Close => "`)`".into(),
            Token::Comma => "`,`".into(),
            Token::End => "end of input".into(),
        }
    }
}

/// Whitespace between tokens: what Kubernetes' lexer skips (space, tab, CR, LF). Other Unicode
/// spaces (a no-break space pasted from a web page) are part of a word, so the key or value
/// holding one is rejected instead of silently matching something else.
fn is_space(c: char) -> bool {
    matches!(c, ' ' | '\t' | '\r' | '\n')
}

fn is_word_char(c: char) -> bool {
    !is_space(c) && !matches!(c, ',' | '(' | ')' | '=' | '!')
}

fn tokenize(input: &str) -> Vec<(usize, Token<'_>)> {
    let mut tokens = Vec::new();
    let mut rest = input.char_indices().peekable();
    while let Some((at, c)) = rest.next() {
        let token = match c {
            c if is_space(c) => continue,
            ',' => Token::Comma,
            '(' => Token::Open,
            ')' => Token::Close,
            '=' | '!' => {
                let double = rest.next_if(|&(_, next)| next == '=').is_some();
                match (c, double) {
                    ('=', false) => Token::Equals,
                    ('=', true) => Token::DoubleEquals,
                    (_, false) => Token::Bang,
                    (_, true) => Token::NotEquals,
                }
            }
            _ => {
                let mut end = at + c.len_utf8();
                while let Some((next_at, next)) = rest.next_if(|&(_, next)| is_word_char(next)) {
                    end = next_at + next.len_utf8();
                }
                Token::Word(&input[at..end])
            }
        };
        tokens.push((at, token));
    }
    tokens.push((input.len(), Token::End));
    tokens
}

struct Parser<'a> {
    input: &'a str,
    tokens: Vec<(usize, Token<'a>)>,
    next: usize,
}

impl<'a> Parser<'a> {
    fn new(input: &'a str) -> Self {
        Parser {
            input,
            tokens: tokenize(input),
            next: 0,
        }
    }

    fn peek(&self) -> (usize, Token<'a>) {
        self.tokens
            .get(self.next)
            .cloned()
            .unwrap_or((self.input.len(), Token::End))
    }

    fn bump(&mut self) -> (usize, Token<'a>) {
        let token = self.peek();
        self.next += 1;
        token
    }

    fn unexpected(
        &self,
        (position, token): (usize, Token<'a>),
        expected: &'static str,
    ) -> SelectorParseError {
        SelectorParseError::Unexpected {
            input: self.input.to_owned(),
            position,
            found: token.describe(),
            expected,
        }
    }

    fn invalid(&self, position: usize, source: LabelError) -> SelectorParseError {
        SelectorParseError::InvalidLabel {
            input: self.input.to_owned(),
            position,
            source,
        }
    }

    fn selector(mut self) -> Result<LabelSelector, SelectorParseError> {
        let mut selector = LabelSelector::new();
        if self.peek().1 == Token::End {
            return Ok(selector);
        }
        loop {
            self.requirement(&mut selector)?;
            match self.bump() {
                (_, Token::Comma) => {}
                (_, Token::End) => return Ok(selector),
                other => return Err(self.unexpected(other, "`,` or end of input")),
            }
        }
    }

    fn key(&mut self) -> Result<&'a str, SelectorParseError> {
        match self.bump() {
            (position, Token::Word(key)) => {
                validate_label_key(key).map_err(|e| self.invalid(position, e))?;
                Ok(key)
            }
            other => Err(self.unexpected(other, "a label key")),
        }
    }

    fn value(&mut self, key: &str) -> Result<String, SelectorParseError> {
        match self.peek() {
            (position, Token::Word(value)) => {
                self.next += 1;
                validate_label_value(key, value).map_err(|e| self.invalid(position, e))?;
                Ok(value.to_owned())
            }
            _ => Ok(String::new()),
        }
    }

    fn requirement(&mut self, selector: &mut LabelSelector) -> Result<(), SelectorParseError> {
        if let (_, Token::Bang) = self.peek() {
            self.next += 1;
            let key = self.key()?;
            selector
                .match_expressions
                .push(LabelSelectorRequirement::does_not_exist(key));
            return Ok(());
        }
        let key = self.key()?;
        let requirement = match self.peek() {
            (_, Token::Comma | Token::End) => LabelSelectorRequirement::exists(key),
            (_, Token::Equals | Token::DoubleEquals) => {
                self.next += 1;
                let value = self.value(key)?;
                if !selector.match_labels.contains_key(key) {
                    selector.match_labels.insert(key.to_owned(), value);
                    return Ok(());
                }
                LabelSelectorRequirement::in_values(key, [value])
            }
            (_, Token::NotEquals) => {
                self.next += 1;
                let value = self.value(key)?;
                LabelSelectorRequirement::not_in(key, [value])
            }
            (_, Token::Word(word)) if word == "in" || word == "notin" => {
                self.next += 1;
                let values = self.values(key)?;
                if word == "in" {
                    LabelSelectorRequirement::in_values(key, values)
                } else {
                    LabelSelectorRequirement::not_in(key, values)
                }
            }
            other => {
                return Err(
                    self.unexpected(other, "`=`, `==`, `!=`, `in`, `notin`, `,` or end of input")
                );
            }
        };
        selector.match_expressions.push(requirement);
        Ok(())
    }

    /// `( value? (, value?)* )`: an omitted value is the empty string, so `()` is `[""]`.
    fn values(&mut self, key: &str) -> Result<Vec<String>, SelectorParseError> {
        match self.bump() {
            (_, Token::Open) => {}
            other => return Err(self.unexpected(other, "`(`")),
        }
        let mut values = Vec::new();
        loop {
            values.push(self.value(key)?);
            match self.bump() {
                (_, Token::Comma) => {}
                (_, Token::Close) => return Ok(values),
                other => return Err(self.unexpected(other, "`,` or `)`")),
            }
        }
    }
}

#[cfg(test)]
mod tests;
