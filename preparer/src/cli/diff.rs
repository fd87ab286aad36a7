//! A readable line diff of two packages' YAML for `deployment diff`: unified-diff style
//! (`--- a`, `+++ b`, ` ` kept, `-` removed, `+` added lines), hunks with three lines of
//! context. Lines are matched by a longest common subsequence over the lines between the
//! common head and tail; a middle beyond [`MAX_CELLS`] line pairs is shown as all removed,
//! then all added (correct, only less minimal).

/// The most line pairs the matching table may hold (16 MiB of `u32`s).
const MAX_CELLS: usize = 4_000_000;
/// Lines of context around each change.
const CONTEXT: usize = 3;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Line<'a> {
    Kept(&'a str),
    Removed(&'a str),
    Added(&'a str),
}

/// The diff of `old` (labelled `from`) to `new` (labelled `to`); empty when equal.
pub fn unified(from: &str, old: &str, to: &str, new: &str) -> String {
    let old: Vec<&str> = old.lines().collect();
    let new: Vec<&str> = new.lines().collect();
    let lines = edit_script(&old, &new);
    if lines.iter().all(|line| matches!(line, Line::Kept(_))) {
        return String::new();
    }
    let mut out = format!("--- {from}\n+++ {to}\n");
    // Hunks: runs of changes with up to CONTEXT kept lines around them (merged when close).
    let changed: Vec<usize> = (0..lines.len())
        .filter(|&i| !matches!(lines[i], Line::Kept(_)))
        .collect();
    let mut at = 0;
    while at < changed.len() {
        let start = changed[at].saturating_sub(CONTEXT);
        let mut end = changed[at];
        while at < changed.len() && changed[at] <= end + 2 * CONTEXT + 1 {
            end = changed[at];
            at += 1;
        }
        let end = (end + CONTEXT + 1).min(lines.len());
        let (old_start, new_start) = positions(&lines[..start]);
        let (old_len, new_len) = positions(&lines[start..end]);
        out.push_str(&format!(
            "@@ -{},{old_len} +{},{new_len} @@\n",
            old_start + 1,
            new_start + 1
        ));
        for line in &lines[start..end] {
            let (mark, text) = match line {
                Line::Kept(text) => (' ', text),
                Line::Removed(text) => ('-', text),
                Line::Added(text) => ('+', text),
            };
            out.push(mark);
            out.push_str(text);
            out.push('\n');
        }
    }
    out
}

/// How many old and new lines `lines` covers.
fn positions(lines: &[Line<'_>]) -> (usize, usize) {
    lines.iter().fold((0, 0), |(old, new), line| match line {
        Line::Kept(_) => (old + 1, new + 1),
        Line::Removed(_) => (old + 1, new),
        Line::Added(_) => (old, new + 1),
    })
}

fn edit_script<'a>(old: &[&'a str], new: &[&'a str]) -> Vec<Line<'a>> {
    let head = old.iter().zip(new).take_while(|(a, b)| a == b).count();
    let tail = old[head..]
        .iter()
        .rev()
        .zip(new[head..].iter().rev())
        .take_while(|(a, b)| a == b)
        .count();
    let (a, b) = (&old[head..old.len() - tail], &new[head..new.len() - tail]);
    let mut lines: Vec<Line<'a>> = old[..head].iter().map(|l| Line::Kept(l)).collect();
    if a.len().saturating_mul(b.len()) > MAX_CELLS {
        lines.extend(a.iter().map(|l| Line::Removed(l)));
        lines.extend(b.iter().map(|l| Line::Added(l)));
    } else {
        // lcs[i][j]: the longest common subsequence of a[i..] and b[j..].
        let width = b.len() + 1;
        let mut lcs = vec![0u32; (a.len() + 1) * width];
        for i in (0..a.len()).rev() {
            for j in (0..b.len()).rev() {
                lcs[i * width + j] = if a[i] == b[j] {
                    lcs[(i + 1) * width + j + 1] + 1
                } else {
                    lcs[(i + 1) * width + j].max(lcs[i * width + j + 1])
                };
            }
        }
        let (mut i, mut j) = (0, 0);
        while i < a.len() || j < b.len() {
            if i < a.len() && j < b.len() && a[i] == b[j] {
                lines.push(Line::Kept(a[i]));
                i += 1;
                j += 1;
            } else if i < a.len()
                && (j == b.len() || lcs[(i + 1) * width + j] >= lcs[i * width + j + 1])
            {
                lines.push(Line::Removed(a[i]));
                i += 1;
            } else {
                lines.push(Line::Added(b[j]));
                j += 1;
            }
        }
    }
    lines.extend(old[old.len() - tail..].iter().map(|l| Line::Kept(l)));
    lines
}

#[cfg(test)]
mod tests {
    use super::unified;

    #[test]
    fn equal_packages_have_no_diff() {
        assert_eq!(unified("a", "x\ny\n", "b", "x\ny\n"), "");
    }

    #[test]
    fn a_changed_line_shows_with_its_context() {
        let old = "a\nb\nc\nd\ne\nf\ng\nh\n";
        let new = "a\nb\nc\nd\nE\nf\ng\nh\nI\n";
        assert_eq!(
            unified("revision 1", old, "revision 2", new),
            "--- revision 1\n+++ revision 2\n@@ -2,7 +2,8 @@\n b\n c\n d\n-e\n+E\n f\n g\n h\n+I\n"
        );
    }

    #[test]
    fn far_apart_changes_are_separate_hunks() {
        let old: String = (0..20).map(|n| format!("{n}\n")).collect();
        let new: String = (0..20)
            .map(|n| match n {
                2 => "two\n".to_owned(),
                17 => "seventeen\n".to_owned(),
                n => format!("{n}\n"),
            })
            .collect();
        let diff = unified("a", &old, "b", &new);
        assert_eq!(diff.matches("@@ -").count(), 2, "{diff}");
        assert!(
            diff.contains("-2\n+two\n") && diff.contains("-17\n+seventeen\n"),
            "{diff}"
        );
    }
}
