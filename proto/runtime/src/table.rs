//! Aligned text tables for every CLI's `-o table`: a header row and columns three spaces apart,
//! as `kubectl get` prints them (elastic tabstops, widths in terminal columns).
//!
//! Cells are sanitised: a tab, newline or other control character in a value (an error message
//! from a plugin, a name from a request) becomes a space, so no value can break the columns or
//! forge a row.

use std::io::Write as _;

/// A table being built: headers first, then rows.
#[derive(Debug, Clone, Default)]
pub struct Table {
    headers: Vec<String>,
    rows: Vec<Vec<String>>,
}

impl Table {
    /// A table with these column headers.
    pub fn new<I, S>(headers: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        Self {
            headers: headers.into_iter().map(Into::into).collect(),
            rows: Vec::new(),
        }
    }

    /// Appends a row; missing trailing cells print empty, extra cells print past the last header.
    pub fn row<I, S>(&mut self, cells: I) -> &mut Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.rows.push(cells.into_iter().map(Into::into).collect());
        self
    }

    /// How many rows were added (the header not counted).
    pub fn len(&self) -> usize {
        self.rows.len()
    }

    /// Whether no row was added.
    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    /// The table as text, one line per row, each ending in a newline, no trailing spaces.
    pub fn render(&self) -> String {
        let mut writer = tabwriter::TabWriter::new(Vec::new()).minwidth(0).padding(3);
        for line in std::iter::once(&self.headers).chain(&self.rows) {
            let cells: Vec<String> = line.iter().map(|cell| sanitise(cell)).collect();
            // Writing into a Vec cannot fail.
            let _ = writeln!(writer, "{}", cells.join("\t"));
        }
        let bytes = writer.into_inner().unwrap_or_default();
        let text = String::from_utf8_lossy(&bytes);
        let mut out = String::with_capacity(text.len());
        for line in text.lines() {
            out.push_str(line.trim_end());
            out.push('\n');
        }
        out
    }
}

impl std::fmt::Display for Table {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.render())
    }
}

/// `cell` with every control character (tab and newline included) turned into a space.
fn sanitise(cell: &str) -> String {
    cell.chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::Table;

    #[test]
    fn columns_are_aligned_three_spaces_apart_with_no_trailing_spaces() {
        let mut table = Table::new(["NAME", "SITE", "READY"]);
        table.row(["upf-1", "paris/edge-1", "true"]);
        table.row(["smf", "lyon/regional-1", ""]);
        assert_eq!(
            table.render(),
            "NAME    SITE              READY\n\
             upf-1   paris/edge-1      true\n\
             smf     lyon/regional-1\n"
        );
        assert_eq!(table.len(), 2);
    }

    #[test]
    fn a_tab_or_newline_in_a_value_cannot_break_the_columns_or_forge_a_row() {
        let mut table = Table::new(["ID", "ERROR"]);
        table.row(["a", "plugin said:\tno\nb   forged"]);
        let text = table.render();
        assert_eq!(text.lines().count(), 2, "{text}");
        assert!(
            text.ends_with("a    plugin said: no b   forged\n"),
            "{text}"
        );
    }

    #[test]
    fn wide_characters_count_as_the_columns_they_take() {
        let mut table = Table::new(["NAME", "X"]);
        table.row(["é", "1"]);
        table.row(["日本", "2"]);
        let text = table.render();
        let at: Vec<usize> = text
            .lines()
            .map(|l| {
                let end = l.rfind(' ').unwrap_or(0) + 1;
                unicode_columns(&l[..end])
            })
            .collect();
        assert!(at.windows(2).all(|w| w[0] == w[1]), "{text}");
    }

    /// Terminal columns of `s`: two for CJK ideographs, one otherwise (enough for the test).
    fn unicode_columns(s: &str) -> usize {
        s.chars()
            .map(|c| {
                if ('\u{4e00}'..='\u{9fff}').contains(&c) {
                    2
                } else {
                    1
                }
            })
            .sum()
    }

    #[test]
    fn a_table_without_rows_is_its_header() {
        let table = Table::new(["ID"]);
        assert!(table.is_empty());
        assert_eq!(table.to_string(), "ID\n");
    }
}
