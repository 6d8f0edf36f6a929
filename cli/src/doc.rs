//! What the tables are written into: the HTML report ([`crate::html::Page`]) or the gate's
//! Markdown summary ([`crate::markdown::Markdown`]). A table function fills a [`Doc`] with
//! plain-text [`Cell`]s, and each document escapes them its own way, so one table serves both.

/// One table cell: its text, and why a figure is not there (shown as "unavailable: why",
/// never as 0). Both may be set: a figure whose interval is missing.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Cell {
    pub text: String,
    pub missing: Option<String>,
}

impl Cell {
    pub fn text(s: &str) -> Cell {
        Cell {
            text: s.to_string(),
            missing: None,
        }
    }

    /// A figure that is not defined: shown with why, never as 0.
    pub fn unavailable(reason: &str) -> Cell {
        Cell {
            text: String::new(),
            missing: Some(reason.to_string()),
        }
    }

    /// `text` followed by why part of it is missing.
    pub fn partly(text: &str, reason: &str) -> Cell {
        Cell {
            text: text.to_string(),
            missing: Some(reason.to_string()),
        }
    }

    /// The cell as plain text: `text unavailable: why`.
    pub fn plain(&self) -> String {
        match (&self.missing, self.text.is_empty()) {
            (None, _) => self.text.clone(),
            (Some(why), true) => format!("unavailable: {why}"),
            (Some(why), false) => format!("{} unavailable: {why}", self.text),
        }
    }
}

/// A document tables are written into, in order.
pub trait Doc {
    fn heading(&mut self, text: &str);
    fn note(&mut self, text: &str);
    /// `class` names the table for readers and tests (HTML class; Markdown ignores it).
    fn table(&mut self, class: &str, head: &[&str], rows: &[Vec<Cell>]);
}

#[cfg(test)]
mod tests {
    use super::Cell;

    #[test]
    fn plain_text_says_why_a_figure_is_missing() {
        assert_eq!(Cell::text("3 ms").plain(), "3 ms");
        assert_eq!(Cell::unavailable("no acks").plain(), "unavailable: no acks");
        assert_eq!(
            Cell::partly("1.2", "one round").plain(),
            "1.2 unavailable: one round"
        );
    }
}
