//! Size and nesting limits for a YAML document, checked in one linear pass before parsing.
//!
//! libyaml (under serde_norway) does work proportional to the flow nesting level for every token
//! it scans, so a few hundred kilobytes of `{a: {a: {a: …` take minutes to parse, and serde's own
//! recursion limit (128) only answers after the whole document has been scanned. This pass
//! follows libyaml's tokenizer (token starts, comments, quoted, plain and block scalars, tags,
//! anchors, block indentation) closely enough to know the nesting level — flow collections
//! plus indented block collections — at every token, and stops at the first one past the limit.
//! Its cost per byte is constant, so refusing a hostile document takes as long as reading it.
//!
//! Where the tokenizer errors (a character that starts no token, a tab in indentation), this pass
//! keeps going one character later: libyaml stops there, so nothing after it costs anything.

use std::fmt;

/// Default [`YamlLimits::max_document_bytes`]: 8 MiB, far beyond any package document.
pub const DEFAULT_MAX_DOCUMENT_BYTES: usize = 8 * 1024 * 1024;

/// Default [`YamlLimits::max_depth`]: below serde_norway's own recursion limit of 128, so no
/// document it could read is refused.
pub const DEFAULT_MAX_DEPTH: usize = 100;

/// Limits every YAML document read from outside input must keep.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct YamlLimits {
    /// The largest document, in bytes of its text.
    pub max_document_bytes: usize,
    /// The deepest nesting of collections (flow `[` / `{` and indented block collections).
    pub max_depth: usize,
}

impl Default for YamlLimits {
    fn default() -> Self {
        YamlLimits {
            max_document_bytes: DEFAULT_MAX_DOCUMENT_BYTES,
            max_depth: DEFAULT_MAX_DEPTH,
        }
    }
}

/// A document over one of the [`YamlLimits`]. Positions are 1-based within the text checked.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LimitError {
    /// The document's text is longer than `limit` bytes.
    #[error("the document is {size} bytes, over the limit of {limit} bytes")]
    TooLarge {
        /// The document's size in bytes.
        size: usize,
        /// [`YamlLimits::max_document_bytes`].
        limit: usize,
    },
    /// Collections nest deeper than `limit` levels.
    #[error(
        "collections nest deeper than the limit of {limit} levels at line {line} column {column}"
    )]
    TooDeep {
        /// [`YamlLimits::max_depth`].
        limit: usize,
        /// Line of the collection one level too deep.
        line: usize,
        /// Column of that collection.
        column: usize,
    },
}

impl LimitError {
    /// Where the limit was crossed (`None` for a document too large as a whole).
    pub fn position(&self) -> Option<(usize, usize)> {
        match self {
            LimitError::TooLarge { .. } => None,
            LimitError::TooDeep { line, column, .. } => Some((*line, *column)),
        }
    }
}

impl YamlLimits {
    /// Checks one YAML document's text against the limits, in time linear in its length.
    ///
    /// # Errors
    /// The first limit crossed, with its position.
    pub fn check(&self, text: &str) -> Result<(), LimitError> {
        if text.len() > self.max_document_bytes {
            return Err(LimitError::TooLarge {
                size: text.len(),
                limit: self.max_document_bytes,
            });
        }
        Scanner::new(text, self.max_depth).run()
    }
}

/// libyaml keeps a possible simple key for at most this many characters.
const SIMPLE_KEY_SPAN: usize = 1024;

/// Where a token that may turn out to be a block mapping key started.
#[derive(Clone, Copy)]
struct KeyStart {
    line: usize,
    column: usize,
    index: usize,
}

struct Scanner<'a> {
    bytes: &'a [u8],
    pos: usize,
    /// 0-based line and column (in characters) of `pos`, and characters before it.
    line: usize,
    column: usize,
    index: usize,
    max_depth: usize,
    flow_level: usize,
    /// Columns of the open block collections (libyaml's indentation stack), innermost last.
    indents: Vec<usize>,
    simple_key_allowed: bool,
    key: Option<KeyStart>,
}

impl<'a> Scanner<'a> {
    fn new(text: &'a str, max_depth: usize) -> Self {
        Scanner {
            bytes: text.as_bytes(),
            pos: 0,
            line: 0,
            column: 0,
            index: 0,
            max_depth,
            flow_level: 0,
            indents: Vec::new(),
            simple_key_allowed: true,
            key: None,
        }
    }

    fn at(&self, ahead: usize) -> u8 {
        self.bytes.get(self.pos + ahead).copied().unwrap_or(0)
    }

    fn at_end(&self) -> bool {
        self.pos >= self.bytes.len()
    }

    /// The length of the line break at `pos + ahead` (YAML's: `\r\n`, `\r`, `\n`, NEL, LS, PS).
    fn break_len(&self, ahead: usize) -> usize {
        let rest = self.bytes.get(self.pos + ahead..).unwrap_or_default();
        match rest {
            [b'\r', b'\n', ..] => 2,
            [b'\r' | b'\n', ..] => 1,
            [0xC2, 0x85, ..] => 2,
            [0xE2, 0x80, 0xA8 | 0xA9, ..] => 3,
            _ => 0,
        }
    }

    fn is_blank(&self, ahead: usize) -> bool {
        matches!(self.at(ahead), b' ' | b'\t')
    }

    fn is_blankz(&self, ahead: usize) -> bool {
        self.pos + ahead >= self.bytes.len() || self.is_blank(ahead) || self.break_len(ahead) > 0
    }

    /// Moves past one character (not a line break).
    fn advance(&mut self) {
        self.pos += 1;
        while self.pos < self.bytes.len() && self.bytes[self.pos] & 0xC0 == 0x80 {
            self.pos += 1;
        }
        self.column += 1;
        self.index += 1;
    }

    /// Moves past a line break if there is one at `pos`; whether there was.
    fn skip_break(&mut self) -> bool {
        let len = self.break_len(0);
        if len == 0 {
            return false;
        }
        self.pos += len;
        self.line += 1;
        self.column = 0;
        self.index += 1;
        true
    }

    fn skip_to_break(&mut self) {
        while !self.at_end() && self.break_len(0) == 0 {
            self.advance();
        }
    }

    fn indent(&self) -> isize {
        self.indents.last().map_or(-1, |&c| c as isize)
    }

    fn too_deep(&self, line: usize, column: usize) -> Result<(), LimitError> {
        if self.flow_level + self.indents.len() > self.max_depth {
            return Err(LimitError::TooDeep {
                limit: self.max_depth,
                line: line + 1,
                column: column + 1,
            });
        }
        Ok(())
    }

    fn roll_indent(&mut self, column: usize) -> Result<(), LimitError> {
        if self.flow_level == 0 && self.indent() < column as isize {
            self.indents.push(column);
            self.too_deep(self.line, column)?;
        }
        Ok(())
    }

    fn save_key(&mut self) {
        if self.simple_key_allowed && self.flow_level == 0 {
            self.key = Some(KeyStart {
                line: self.line,
                column: self.column,
                index: self.index,
            });
        }
    }

    /// Keys in flow collections never open block mappings; only the block context's is kept.
    fn forget_block_key(&mut self) {
        if self.flow_level == 0 {
            self.key = None;
        }
    }

    fn at_document_indicator(&self) -> bool {
        self.column == 0
            && (self.bytes[self.pos..].starts_with(b"---")
                || self.bytes[self.pos..].starts_with(b"..."))
            && self.is_blankz(3)
    }

    fn run(mut self) -> Result<(), LimitError> {
        loop {
            self.skip_to_next_token();
            if self.at_end() {
                return Ok(());
            }
            if self
                .key
                .is_some_and(|k| k.line < self.line || k.index + SIMPLE_KEY_SPAN < self.index)
            {
                self.key = None;
            }
            if self.flow_level == 0 {
                while self.indent() > self.column as isize {
                    self.indents.pop();
                }
            }
            self.token()?;
        }
    }

    fn skip_to_next_token(&mut self) {
        loop {
            if self.column == 0 && self.bytes[self.pos..].starts_with("\u{feff}".as_bytes()) {
                self.advance();
            }
            while self.at(0) == b' '
                || (self.at(0) == b'\t' && (self.flow_level > 0 || !self.simple_key_allowed))
            {
                self.advance();
            }
            if self.at(0) == b'#' {
                self.skip_to_break();
            }
            if !self.skip_break() {
                return;
            }
            if self.flow_level == 0 {
                self.simple_key_allowed = true;
            }
        }
    }

    /// Scans one token at `pos`, as libyaml's `fetch_next_token` would.
    fn token(&mut self) -> Result<(), LimitError> {
        let c = self.at(0);
        if self.column == 0 && (c == b'%' || self.at_document_indicator()) {
            self.indents.clear();
            self.key = None;
            self.simple_key_allowed = false;
            if c == b'%' {
                self.skip_to_break();
            } else {
                (0..3).for_each(|_| self.advance());
            }
            return Ok(());
        }
        let in_flow = self.flow_level > 0;
        match c {
            b'[' | b'{' => {
                self.save_key();
                self.flow_level += 1;
                self.too_deep(self.line, self.column)?;
                self.simple_key_allowed = true;
                self.advance();
            }
            b']' | b'}' => {
                self.flow_level = self.flow_level.saturating_sub(1);
                self.simple_key_allowed = false;
                self.advance();
            }
            b',' => {
                self.simple_key_allowed = true;
                self.advance();
            }
            b'-' if self.is_blankz(1) => {
                self.forget_block_key();
                self.roll_indent(self.column)?;
                self.simple_key_allowed = true;
                self.advance();
            }
            b'?' if in_flow || self.is_blankz(1) => {
                self.forget_block_key();
                self.roll_indent(self.column)?;
                self.simple_key_allowed = !in_flow;
                self.advance();
            }
            b':' if in_flow || self.is_blankz(1) => {
                let key = if in_flow { None } else { self.key.take() };
                match key {
                    Some(key) => {
                        self.roll_indent(key.column)?;
                        self.simple_key_allowed = false;
                    }
                    None => {
                        self.roll_indent(self.column)?;
                        self.simple_key_allowed = !in_flow;
                    }
                }
                self.advance();
            }
            b'*' | b'&' => {
                self.save_key();
                self.simple_key_allowed = false;
                self.advance();
                while is_alpha(self.at(0)) {
                    self.advance();
                }
            }
            b'!' => {
                self.save_key();
                self.simple_key_allowed = false;
                self.tag();
            }
            b'|' | b'>' if !in_flow => {
                self.key = None;
                self.simple_key_allowed = true;
                self.block_scalar();
            }
            b'\'' | b'"' => {
                self.save_key();
                self.simple_key_allowed = false;
                self.quoted_scalar(c);
            }
            _ if self.starts_plain_scalar() => {
                self.save_key();
                self.simple_key_allowed = false;
                if self.plain_scalar() {
                    self.simple_key_allowed = true;
                }
            }
            // libyaml stops here with "found character that cannot start any token".
            _ => self.advance(),
        }
        Ok(())
    }

    fn starts_plain_scalar(&self) -> bool {
        let c = self.at(0);
        let indicator = self.is_blankz(0) || b"-?:,[]{}#&*!|>'\"%@`".contains(&c);
        !indicator
            || (c == b'-' && !self.is_blank(1))
            || (self.flow_level == 0 && matches!(c, b'?' | b':') && !self.is_blankz(1))
    }

    /// A tag: `!<verbatim>`, or `!handle!suffix` / `!suffix` up to the first character a tag
    /// cannot hold.
    fn tag(&mut self) {
        self.advance();
        if self.at(0) == b'<' {
            self.advance();
            while is_uri_char(self.at(0)) || matches!(self.at(0), b',' | b'[' | b']') {
                self.advance();
            }
            if self.at(0) == b'>' {
                self.advance();
            }
        } else {
            while is_uri_char(self.at(0)) {
                self.advance();
            }
        }
    }

    fn quoted_scalar(&mut self, quote: u8) {
        self.advance();
        while !self.at_end() {
            let c = self.at(0);
            if quote == b'\'' && c == b'\'' && self.at(1) == b'\'' {
                self.advance();
                self.advance();
            } else if c == quote {
                self.advance();
                return;
            } else if quote == b'"' && c == b'\\' {
                self.advance();
                if !self.skip_break() && !self.at_end() {
                    self.advance();
                }
            } else if !self.skip_break() {
                self.advance();
            }
        }
    }

    /// A plain scalar, possibly over several lines; whether it ended after a line break.
    fn plain_scalar(&mut self) -> bool {
        let indent = self.indent() + 1;
        let mut leading_blanks = false;
        loop {
            if self.at_document_indicator() || self.at(0) == b'#' {
                break;
            }
            while !self.is_blankz(0) {
                let c = self.at(0);
                if self.flow_level > 0 && c == b':' && b",?[]{}".contains(&self.at(1)) {
                    // libyaml: "found unexpected ':'"; it stops.
                    return leading_blanks;
                }
                if (c == b':' && self.is_blankz(1))
                    || (self.flow_level > 0 && b",[]{}".contains(&c))
                {
                    break;
                }
                leading_blanks = false;
                self.advance();
            }
            if !(self.is_blank(0) || self.break_len(0) > 0) {
                break;
            }
            while self.is_blank(0) || self.break_len(0) > 0 {
                if self.is_blank(0) {
                    if leading_blanks && (self.column as isize) < indent && self.at(0) == b'\t' {
                        // libyaml: "found a tab character that violates indentation".
                        return leading_blanks;
                    }
                    self.advance();
                } else {
                    self.skip_break();
                    leading_blanks = true;
                }
            }
            if self.flow_level == 0 && (self.column as isize) < indent {
                break;
            }
        }
        leading_blanks
    }

    /// A literal (`|`) or folded (`>`) block scalar: its header, then every line indented at
    /// least as far as its content.
    fn block_scalar(&mut self) {
        self.advance();
        let mut increment = 0;
        for _ in 0..2 {
            match self.at(0) {
                b'+' | b'-' => self.advance(),
                c @ b'1'..=b'9' => {
                    increment = (c - b'0') as isize;
                    self.advance();
                }
                _ => break,
            }
        }
        while self.is_blank(0) {
            self.advance();
        }
        if self.at(0) == b'#' {
            self.skip_to_break();
        }
        if !self.skip_break() {
            // libyaml: "did not find expected comment or line break"; it stops.
            return;
        }
        let parent = self.indent();
        let mut indent = match increment {
            0 => 0,
            n if parent >= 0 => parent + n,
            n => n,
        };
        if !self.block_scalar_breaks(&mut indent, parent) {
            return;
        }
        while self.column as isize == indent && !self.at_end() {
            self.skip_to_break();
            self.skip_break();
            if !self.block_scalar_breaks(&mut indent, parent) {
                return;
            }
        }
    }

    /// Empty lines and the indentation of the next line; settles `indent` when it is still 0.
    /// False where libyaml would stop (a tab in the indentation).
    fn block_scalar_breaks(&mut self, indent: &mut isize, parent: isize) -> bool {
        let mut max_indent = 0;
        loop {
            while (*indent == 0 || (self.column as isize) < *indent) && self.at(0) == b' ' {
                self.advance();
            }
            max_indent = max_indent.max(self.column as isize);
            if (*indent == 0 || (self.column as isize) < *indent) && self.at(0) == b'\t' {
                return false;
            }
            if !self.skip_break() {
                break;
            }
        }
        if *indent == 0 {
            *indent = max_indent.max(parent + 1).max(1);
        }
        true
    }
}

/// libyaml's `IS_ALPHA`: what anchors, aliases and tag handles are made of.
fn is_alpha(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'_' || c == b'-'
}

/// The characters of a tag's URI outside `!<…>`.
fn is_uri_char(c: u8) -> bool {
    is_alpha(c) || b";/?:@&=+$.%!~*'()".contains(&c)
}

impl fmt::Display for YamlLimits {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "at most {} bytes and {} levels of nesting per document",
            self.max_document_bytes, self.max_depth
        )
    }
}

#[cfg(test)]
mod tests;
