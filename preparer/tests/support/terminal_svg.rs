//! A terminal screen (tmux `capture-pane -e`: text with SGR colour codes) drawn as SVG, for
//! the README's picture of the terminal dashboard.

use std::fmt::Write as _;

const CELL_WIDTH: f64 = 8.4;
const CELL_HEIGHT: f64 = 17.0;
const FOREGROUND: &str = "#d0d0d0";
const BACKGROUND: &str = "#1c1c1c";
/// The eight ANSI colours and their bright forms, as a dark terminal theme shows them.
const PALETTE: [&str; 16] = [
    "#1c1c1c", "#e05050", "#50c050", "#d0b040", "#5080e0", "#c060c0", "#40b0c0", "#d0d0d0",
    "#606060", "#ff7070", "#70e070", "#f0d060", "#70a0ff", "#e080e0", "#60d0e0", "#ffffff",
];

#[derive(Clone, Copy, Default, PartialEq)]
struct Style {
    fg: Option<usize>,
    bg: Option<usize>,
    bold: bool,
    dim: bool,
    reverse: bool,
}

impl Style {
    fn apply(&mut self, codes: &[usize]) {
        let mut codes = codes.iter().copied();
        while let Some(code) = codes.next() {
            match code {
                0 => *self = Style::default(),
                1 => self.bold = true,
                2 => self.dim = true,
                22 => (self.bold, self.dim) = (false, false),
                7 => self.reverse = true,
                27 => self.reverse = false,
                30..=37 => self.fg = Some(code - 30),
                90..=97 => self.fg = Some(code - 90 + 8),
                39 => self.fg = None,
                40..=47 => self.bg = Some(code - 40),
                100..=107 => self.bg = Some(code - 100 + 8),
                49 => self.bg = None,
                38 | 48 => match codes.next() {
                    // 256-colour form: its first sixteen are the ANSI colours.
                    Some(5) => {
                        let colour = codes.next().filter(|c| *c < 16);
                        if code == 38 {
                            self.fg = colour;
                        } else {
                            self.bg = colour;
                        }
                    }
                    // RGB form: not drawn, its arguments skipped.
                    Some(2) => {
                        codes.nth(2);
                    }
                    _ => {}
                },
                _ => {}
            }
        }
    }

    fn colours(&self) -> (&'static str, Option<&'static str>) {
        let fg = self.fg.map_or(FOREGROUND, |c| PALETTE[c]);
        let bg = self.bg.map(|c| PALETTE[c]);
        if self.reverse {
            (bg.unwrap_or(BACKGROUND), Some(fg))
        } else {
            (fg, bg)
        }
    }
}

fn escape(c: char, out: &mut String) {
    match c {
        '&' => out.push_str("&amp;"),
        '<' => out.push_str("&lt;"),
        '>' => out.push_str("&gt;"),
        // Renderers collapse plain spaces in SVG text whatever xml:space says.
        ' ' => out.push('\u{a0}'),
        c => out.push(c),
    }
}

/// The screen `capture` (lines of text with SGR sequences) as an SVG of `columns` × rows.
pub fn svg(capture: &str, columns: usize) -> String {
    let lines: Vec<&str> = capture.lines().collect();
    let width = columns as f64 * CELL_WIDTH + 16.0;
    let height = lines.len() as f64 * CELL_HEIGHT + 16.0;
    let mut body = String::new();
    let mut style = Style::default();
    for (row, line) in lines.iter().enumerate() {
        let y = 8.0 + row as f64 * CELL_HEIGHT;
        let mut column = 0usize;
        let mut chars = line.chars().peekable();
        let mut run = String::new();
        let mut run_start = 0usize;
        let mut run_style = style;
        let flush = |body: &mut String,
                     run: &mut String,
                     start: usize,
                     len: usize,
                     style: Style| {
            if run.is_empty() {
                return;
            }
            let (fg, bg) = style.colours();
            let x = 8.0 + start as f64 * CELL_WIDTH;
            if let Some(bg) = bg {
                let _ = write!(
                    body,
                    "<rect x=\"{x:.1}\" y=\"{y:.1}\" width=\"{:.1}\" height=\"{CELL_HEIGHT}\" fill=\"{bg}\"/>",
                    len as f64 * CELL_WIDTH
                );
            }
            let weight = if style.bold {
                " font-weight=\"bold\""
            } else {
                ""
            };
            let opacity = if style.dim { " opacity=\"0.7\"" } else { "" };
            let _ = write!(
                body,
                "<text x=\"{x:.1}\" y=\"{:.1}\" fill=\"{fg}\"{weight}{opacity} textLength=\"{:.1}\">{run}</text>",
                y + 13.0,
                len as f64 * CELL_WIDTH
            );
            run.clear();
        };
        let mut run_len = 0usize;
        while let Some(c) = chars.next() {
            if c == '\u{1b}' && chars.peek() == Some(&'[') {
                chars.next();
                let mut sequence = String::new();
                for c in chars.by_ref() {
                    if c.is_ascii_alphabetic() {
                        if c == 'm' {
                            flush(&mut body, &mut run, run_start, run_len, run_style);
                            let codes: Vec<usize> = if sequence.is_empty() {
                                vec![0]
                            } else {
                                sequence.split(';').filter_map(|n| n.parse().ok()).collect()
                            };
                            style.apply(&codes);
                            run_style = style;
                            run_start = column;
                            run_len = 0;
                        }
                        break;
                    }
                    sequence.push(c);
                }
                continue;
            }
            escape(c, &mut run);
            run_len += 1;
            column += 1;
        }
        flush(&mut body, &mut run, run_start, run_len, run_style);
    }
    format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{width:.0}\" height=\"{height:.0}\" viewBox=\"0 0 {width:.0} {height:.0}\" font-family=\"DejaVu Sans Mono, Menlo, Consolas, monospace\" font-size=\"14\" xml:space=\"preserve\" style=\"white-space: pre\"><rect width=\"100%\" height=\"100%\" fill=\"{BACKGROUND}\"/>{body}</svg>\n"
    )
}
