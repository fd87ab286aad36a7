//! The line of every section and option in an INI text, for messages that name them.
//!
//! `rust-ini` parses values but keeps no positions, so this scans the text the way it reads
//! it: `[section]` headers, `key = value` or `key: value` lines, `#` and `;` comment lines;
//! options before any header belong to `DEFAULT`. An option set twice is reported at its last
//! line, the assignment that counts.

use std::collections::HashMap;

/// Lines (1-based) of sections and options.
#[derive(Debug, Clone, Default)]
pub struct LineIndex {
    sections: HashMap<String, usize>,
    options: HashMap<(String, String), usize>,
}

impl LineIndex {
    /// Scan `text`.
    pub fn new(text: &str) -> LineIndex {
        let mut index = LineIndex::default();
        let mut section = "DEFAULT".to_owned();
        for (n, raw) in text.lines().enumerate() {
            let line = raw.trim();
            if line.is_empty() || line.starts_with('#') || line.starts_with(';') {
                continue;
            }
            if let Some(rest) = line.strip_prefix('[') {
                if let Some((name, _)) = rest.split_once(']') {
                    section = name.trim().to_owned();
                    index.sections.entry(section.clone()).or_insert(n + 1);
                }
                continue;
            }
            let key = line
                .split(['=', ':'])
                .next()
                .map(str::trim)
                .unwrap_or_default();
            if !key.is_empty() {
                index
                    .options
                    .insert((section.clone(), key.to_owned()), n + 1);
            }
        }
        index
    }

    /// The line of `[section]`'s first header; 0 when absent.
    pub fn section(&self, section: &str) -> usize {
        self.sections.get(section).copied().unwrap_or(0)
    }

    /// The line of the last assignment of `option` in `section`; the section's line when the
    /// option is absent.
    pub fn option(&self, section: &str, option: &str) -> usize {
        self.options
            .get(&(section.to_owned(), option.to_owned()))
            .copied()
            .unwrap_or_else(|| self.section(section))
    }
}
