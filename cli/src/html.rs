//! The self-contained HTML page: inline CSS, inline SVG, no scripts, no fonts, no links, so
//! the file opens anywhere without a network.
use std::fmt::Write as _;

pub use crate::doc::{Cell, Doc};

pub fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
        .replace('\'', "&#39;")
}

const CSS: &str = "
body{font-family:sans-serif;margin:24px auto;max-width:1100px;color:#222}
h1{font-size:24px;margin-bottom:4px}h2{font-size:19px;margin-top:32px;border-bottom:1px solid #ccc}
.meta{color:#555;margin:2px 0}
table{border-collapse:collapse;margin:8px 0 16px;font-size:13px}
th,td{border:1px solid #ccc;padding:3px 8px;text-align:right;white-space:nowrap}
th:first-child,td:first-child{text-align:left}th{background:#f2f2f2}
.na{color:#a00;font-style:italic}
figure.chart{margin:12px 0}figcaption{color:#555;font-size:13px;margin-top:2px}
.note{color:#555;font-size:14px}
";

/// Page builder: sections in order.
pub struct Page {
    body: String,
}

impl Page {
    pub fn new(title: &str) -> Page {
        let mut body = String::new();
        let _ = writeln!(body, "<h1>{}</h1>", esc(title));
        Page { body }
    }

    pub fn meta(&mut self, label: &str, value: &str) {
        let _ = writeln!(
            self.body,
            "<p class=\"meta\"><b>{}:</b> {}</p>",
            esc(label),
            esc(value)
        );
    }

    pub fn heading(&mut self, text: &str) {
        let _ = writeln!(self.body, "<h2>{}</h2>", esc(text));
    }

    pub fn note(&mut self, text: &str) {
        let _ = writeln!(self.body, "<p class=\"note\">{}</p>", esc(text));
    }

    /// An SVG chart wrapped so tests and readers can tell what it shows and which series it has.
    pub fn chart(&mut self, kind: &str, series: &[String], svg: &str, caption: &str) {
        let names = series.iter().map(|s| esc(s)).collect::<Vec<_>>().join(",");
        let _ = writeln!(
            self.body,
            "<figure class=\"chart\" data-chart=\"{}\" data-series=\"{names}\">\n{}\n<figcaption>{}</figcaption></figure>",
            esc(kind),
            strip_xml_declaration(svg),
            esc(caption)
        );
    }

    pub fn finish(self, title: &str) -> String {
        format!(
            "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n<title>{}</title>\n<style>{CSS}</style></head>\n<body>\n{}</body></html>\n",
            esc(title),
            self.body
        )
    }
}

/// A cell's HTML: its text escaped, a missing figure marked (and styled) as unavailable.
fn cell_html(c: &Cell) -> String {
    let text = esc(&c.text);
    match &c.missing {
        None => text,
        Some(why) => {
            let na = format!("<span class=\"na\">unavailable: {}</span>", esc(why));
            if text.is_empty() {
                na
            } else {
                format!("{text} {na}")
            }
        }
    }
}

impl Doc for Page {
    fn heading(&mut self, text: &str) {
        Page::heading(self, text);
    }

    fn note(&mut self, text: &str) {
        Page::note(self, text);
    }

    fn table(&mut self, class: &str, head: &[&str], rows: &[Vec<Cell>]) {
        let _ = write!(self.body, "<table class=\"{}\"><tr>", esc(class));
        for h in head {
            let _ = write!(self.body, "<th>{}</th>", esc(h));
        }
        self.body.push_str("</tr>\n");
        for row in rows {
            self.body.push_str("<tr>");
            for c in row {
                let _ = write!(self.body, "<td>{}</td>", cell_html(c));
            }
            self.body.push_str("</tr>\n");
        }
        self.body.push_str("</table>\n");
    }
}

/// plotters writes no XML declaration today; strip one if a version does, as inline SVG in
/// HTML must not carry it.
fn strip_xml_declaration(svg: &str) -> &str {
    match svg.strip_prefix("<?xml") {
        Some(rest) => rest.split_once("?>").map_or(svg, |(_, s)| s.trim_start()),
        None => svg,
    }
}
