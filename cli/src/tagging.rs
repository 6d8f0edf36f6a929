//! Marks each series' SVG elements after plotters drew them: plotters has no attributes of its
//! own for that, but draws each series in its own colour, which identifies its elements.
use plotters::style::RGBColor;

/// Adds `class="series" data-series="NAME"` to each polyline, circle and rect drawn in a
/// series' colour (plotters writes one element per line, colours as `#RRGGBB`).
pub fn tag_series(svg: &str, tags: &[(RGBColor, String)]) -> String {
    let keyed: Vec<(String, String)> = tags
        .iter()
        .map(|(c, name)| {
            (
                format!("\"#{:02X}{:02X}{:02X}\"", c.0, c.1, c.2),
                crate::html::esc(name),
            )
        })
        .collect();
    let mut out = String::with_capacity(svg.len() + 4096);
    for line in svg.lines() {
        let t = line.trim_start();
        let el = ["<polyline ", "<circle ", "<rect "]
            .into_iter()
            .find(|e| t.starts_with(e));
        let hit = el.and_then(|el| {
            keyed
                .iter()
                .find(|(c, _)| t.contains(c.as_str()))
                .map(|k| (el, k))
        });
        match hit {
            Some((el, (_, name))) => {
                let indent = &line[..line.len() - t.len()];
                let rest = &t[el.len()..];
                out.push_str(&format!(
                    "{indent}{el}class=\"series\" data-series=\"{name}\" {rest}"
                ));
            }
            None => out.push_str(line),
        }
        out.push('\n');
    }
    out
}
