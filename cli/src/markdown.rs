//! A GitHub-flavoured Markdown document: the tables of [`crate::tables`] and
//! [`crate::thresholds`] as pipe tables, for a pull-request comment or a CI job summary.
use std::fmt::Write as _;

use crate::doc::{Cell, Doc};

#[derive(Default)]
pub struct Markdown {
    text: String,
}

impl Markdown {
    pub fn new() -> Markdown {
        Markdown::default()
    }

    /// `# text` at `level` (1–6).
    pub fn title(&mut self, level: usize, text: &str) {
        let _ = writeln!(self.text, "{} {}\n", "#".repeat(level), esc(text));
    }

    /// A paragraph of `label: value` with the label in bold.
    pub fn field(&mut self, label: &str, value: &str) {
        let _ = writeln!(self.text, "**{}:** {}\n", esc(label), esc(value));
    }

    /// A bulleted list.
    pub fn list(&mut self, items: &[String]) {
        for i in items {
            let _ = writeln!(self.text, "- {}", esc(i));
        }
        self.text.push('\n');
    }

    pub fn finish(self) -> String {
        self.text
    }
}

impl Doc for Markdown {
    fn heading(&mut self, text: &str) {
        self.title(4, text);
    }

    fn note(&mut self, text: &str) {
        let _ = writeln!(self.text, "{}\n", esc(text));
    }

    fn table(&mut self, _class: &str, head: &[&str], rows: &[Vec<Cell>]) {
        let line = |cells: Vec<String>| format!("| {} |\n", cells.join(" | "));
        self.text
            .push_str(&line(head.iter().map(|h| esc(h)).collect()));
        self.text
            .push_str(&line(vec!["---".to_string(); head.len()]));
        for row in rows {
            // A short row (a figure missing for the rest) is padded: GFM needs none, but
            // readers of the raw text do.
            let mut cells: Vec<String> = row.iter().map(cell).collect();
            cells.resize(head.len().max(cells.len()), String::new());
            self.text.push_str(&line(cells));
        }
        self.text.push('\n');
    }
}

/// A missing figure in italics, so it stands out from the figures.
fn cell(c: &Cell) -> String {
    match &c.missing {
        None => esc(&c.text),
        Some(why) => {
            let na = format!("_unavailable: {}_", esc(why));
            if c.text.is_empty() {
                na
            } else {
                format!("{} {na}", esc(&c.text))
            }
        }
    }
}

/// Text that renders as itself: Markdown and inline-HTML punctuation backslash-escaped, a pipe
/// so it cannot end a table cell, and line breaks folded into spaces (a table row is one line).
pub fn esc(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '\\' | '`' | '*' | '_' | '[' | ']' | '<' | '>' | '|' | '~' | '&' | '#' | '!' => {
                out.push('\\');
                out.push(c);
            }
            '\n' | '\r' | '\t' => out.push(' '),
            c if c.is_control() => out.push('\u{fffd}'),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escaping_keeps_text_inside_its_cell() {
        assert_eq!(esc("a|b"), "a\\|b");
        assert_eq!(esc("<b>x</b>"), "\\<b\\>x\\</b\\>");
        assert_eq!(esc("p99 *1*\nnext"), "p99 \\*1\\* next");
        assert_eq!(esc("r2/r1 0.64× ±0.04"), "r2/r1 0.64× ±0.04");
    }
}
