//! Reading the report back: its charts, their tagged series and points.
#![allow(dead_code)]

/// The `<figure>` of chart `kind`, whole.
pub fn figure<'a>(html: &'a str, kind: &str) -> &'a str {
    let start = html
        .find(&format!("data-chart=\"{kind}\""))
        .unwrap_or_else(|| panic!("no chart {kind}"));
    let start = html[..start].rfind("<figure").unwrap();
    let end = start + html[start..].find("</figure>").unwrap();
    &html[start..end]
}

/// The figure's `data-series` list.
pub fn declared_series(fig: &str) -> Vec<String> {
    let at = fig.find("data-series=\"").unwrap() + "data-series=\"".len();
    let list = &fig[at..at + fig[at..].find('"').unwrap()];
    list.split(',')
        .filter(|s| !s.is_empty())
        .map(String::from)
        .collect()
}

/// Lines of element `el` (e.g. `polyline`) tagged as series `name`.
pub fn tagged<'a>(fig: &'a str, el: &str, name: &str) -> Vec<&'a str> {
    let tag = format!("<{el} class=\"series\" data-series=\"{name}\"");
    fig.lines()
        .filter(|l| l.trim_start().starts_with(&tag))
        .collect()
}

/// Points of a polyline element.
pub fn points(polyline: &str) -> Vec<(f64, f64)> {
    let at = polyline.find("points=\"").unwrap() + "points=\"".len();
    let list = &polyline[at..at + polyline[at..].find('"').unwrap()];
    list.split_whitespace()
        .map(|p| {
            let (x, y) = p.split_once(',').unwrap();
            (x.parse().unwrap(), y.parse().unwrap())
        })
        .collect()
}

/// Every `<text>` content in the figure.
pub fn texts(fig: &str) -> Vec<String> {
    fig.split("<text")
        .skip(1)
        .filter_map(|t| {
            let body = &t[t.find('>')? + 1..];
            Some(body[..body.find("</text>")?].trim().to_string())
        })
        .collect()
}
