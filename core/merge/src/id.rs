//! Ids and id patterns, as TKO defines them.
//!
//! A valid id (template, site, deployment, plugin) is a non-empty string of ASCII letters,
//! digits and `_ . - / :` (TKO's `^[0-9A-Za-z_.\-/:]+$`), so ids can be path-like
//! (`nf/gateway:v2`, `dc/hq-1`).
//!
//! A pattern matches ids: `*` matches any run (possibly empty) of characters other than `/` and
//! `:` — one path segment — and `**` matches any run at all. Everything else matches itself.
//! The same syntax matches metadata values ([`IdPattern::parse_value`]), where any character
//! but `*` stands for itself.

use std::fmt;

/// Why an id or pattern was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum IdError {
    /// The id is empty.
    #[error("invalid id: empty")]
    Empty,
    /// The id has a character outside `[0-9A-Za-z_.\-/:]`.
    #[error(
        "invalid id {id:?}: character {character:?} is not allowed (use letters, digits and _ . - / :)"
    )]
    BadCharacter {
        /// The id as given.
        id: String,
        /// The first character refused.
        character: char,
    },
    /// The pattern has three or more `*` in a row.
    #[error(
        "invalid pattern {pattern:?}: use `*` (one segment) or `**` (anything), not {stars} stars"
    )]
    TooManyStars {
        /// The pattern as given.
        pattern: String,
        /// How many stars in a row.
        stars: usize,
    },
}

fn is_id_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-' | '/' | ':')
}

/// Checks that `id` is a valid id.
pub fn validate_id(id: &str) -> Result<(), IdError> {
    if id.is_empty() {
        return Err(IdError::Empty);
    }
    match id.chars().find(|&c| !is_id_char(c)) {
        Some(character) => Err(IdError::BadCharacter {
            id: id.to_owned(),
            character,
        }),
        None => Ok(()),
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Token {
    Literal(Vec<char>),
    /// `*`: any run without `/` or `:`.
    Segment,
    /// `**`: any run.
    Any,
}

/// A compiled `*` / `**` pattern.
///
/// ```
/// use nephrite_merge::IdPattern;
///
/// let pattern = IdPattern::parse("nf/*:v2")?;
/// assert!(pattern.matches("nf/gateway:v2"));
/// assert!(!pattern.matches("nf/edge/gateway:v2"));
/// assert!(IdPattern::parse("nf/**")?.matches("nf/edge/gateway:v2"));
/// assert_eq!(pattern.literal_prefix(), "nf/");
/// # Ok::<(), nephrite_merge::IdError>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IdPattern {
    source: String,
    tokens: Vec<Token>,
}

impl IdPattern {
    /// Parses a pattern over ids: every character but `*` must be an id character.
    pub fn parse(pattern: &str) -> Result<Self, IdError> {
        if pattern.is_empty() {
            return Err(IdError::Empty);
        }
        if let Some(character) = pattern.chars().find(|&c| c != '*' && !is_id_char(c)) {
            return Err(IdError::BadCharacter {
                id: pattern.to_owned(),
                character,
            });
        }
        IdPattern::parse_value(pattern)
    }

    /// Parses a pattern over metadata values: any character but `*` stands for itself.
    pub fn parse_value(pattern: &str) -> Result<Self, IdError> {
        let mut tokens = Vec::new();
        let mut literal = Vec::new();
        let mut chars = pattern.chars().peekable();
        while let Some(c) = chars.next() {
            if c != '*' {
                literal.push(c);
                continue;
            }
            let mut stars = 1;
            while chars.peek() == Some(&'*') {
                chars.next();
                stars += 1;
            }
            if stars > 2 {
                return Err(IdError::TooManyStars {
                    pattern: pattern.to_owned(),
                    stars,
                });
            }
            if !literal.is_empty() {
                tokens.push(Token::Literal(std::mem::take(&mut literal)));
            }
            tokens.push(if stars == 1 {
                Token::Segment
            } else {
                Token::Any
            });
        }
        if !literal.is_empty() {
            tokens.push(Token::Literal(literal));
        }
        Ok(IdPattern {
            source: pattern.to_owned(),
            tokens,
        })
    }

    /// The pattern as given.
    pub fn as_str(&self) -> &str {
        &self.source
    }

    /// The id itself when the pattern has no wildcard.
    pub fn exact(&self) -> Option<&str> {
        (!self.source.contains('*')).then_some(self.source.as_str())
    }

    /// The text before the first wildcard (the whole pattern when it has none): every match
    /// starts with it, so a store can narrow a search by prefix first.
    pub fn literal_prefix(&self) -> &str {
        match self.source.find('*') {
            Some(at) => &self.source[..at],
            None => &self.source,
        }
    }

    /// Whether `text` matches the whole pattern.
    pub fn matches(&self, text: &str) -> bool {
        let text: Vec<char> = text.chars().collect();
        // reachable[i]: the tokens consumed so far can end at text position i.
        let mut reachable = vec![false; text.len() + 1];
        reachable[0] = true;
        for token in &self.tokens {
            let mut next = vec![false; text.len() + 1];
            match token {
                Token::Literal(literal) => {
                    for start in 0..=text.len() {
                        if reachable[start] && text[start..].starts_with(literal) {
                            next[start + literal.len()] = true;
                        }
                    }
                }
                Token::Any => {
                    if let Some(first) = reachable.iter().position(|&r| r) {
                        next[first..].iter_mut().for_each(|n| *n = true);
                    }
                }
                Token::Segment => {
                    let mut open = false;
                    for at in 0..=text.len() {
                        open = reachable[at] || open;
                        next[at] = open;
                        if at < text.len() && matches!(text[at], '/' | ':') {
                            open = false;
                        }
                    }
                }
            }
            reachable = next;
        }
        reachable[text.len()]
    }
}

impl fmt::Display for IdPattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.source)
    }
}

impl std::str::FromStr for IdPattern {
    type Err = IdError;
    fn from_str(pattern: &str) -> Result<Self, IdError> {
        IdPattern::parse(pattern)
    }
}

#[cfg(test)]
mod tests;
