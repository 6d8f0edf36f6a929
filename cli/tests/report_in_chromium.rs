//! The variants report in a real browser (Debian's headless Chromium): it renders, the
//! screenshot is a real picture, and the page logs nothing. `make unit` installs chromium
//! (`e2e/tools/ensure apt:chromium`); without it this fails rather than skips.
//! `MSGBENCH_UPDATE_SCREENSHOT=1` also saves the screenshot as docs/report-screenshot.png.
mod common;

use kubectl_msgbench::{report, source};
use std::collections::HashSet;
use std::path::Path;
use std::process::{Command, Output};

const SIZE: (u32, u32) = (1280, 2400);

fn chromium(page: &Path, profile: &Path, extra: &[&str]) -> Output {
    let found = Command::new("chromium").arg("--version").output();
    assert!(
        found.is_ok_and(|o| o.status.success()),
        "chromium is not on PATH: run `e2e/tools/ensure apt:chromium` (make unit does)"
    );
    // `timeout` so a hung browser fails the test instead of hanging it.
    let out = Command::new("timeout")
        .args([
            "120",
            "chromium",
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
        ])
        .args(["--enable-logging=stderr", "--v=0", "--hide-scrollbars"])
        .arg(format!("--user-data-dir={}", profile.display()))
        .args(extra)
        .arg(format!("file://{}", page.display()))
        .output()
        .unwrap();
    assert!(out.status.success(), "chromium failed: {out:?}");
    out
}

/// Console messages and errors about the page (Chromium's own D-Bus/GPU noise is not the page's).
fn page_problems(stderr: &[u8], page: &Path) -> Vec<String> {
    let name = page.file_name().unwrap().to_string_lossy().into_owned();
    String::from_utf8_lossy(stderr)
        .lines()
        .filter(|l| l.contains("CONSOLE") || (l.contains("ERROR") && l.contains(&name)))
        .map(String::from)
        .collect()
}

fn screenshot(html: &str, dir: &Path) -> (Vec<u8>, Vec<String>, String) {
    let page = dir.join("report.html");
    std::fs::write(&page, html).unwrap();
    let png = dir.join("shot.png");
    let size = format!("--window-size={},{}", SIZE.0, SIZE.1);
    let shot = chromium(
        &page,
        &dir.join("p1"),
        &[&format!("--screenshot={}", png.display()), &size],
    );
    let dom = chromium(&page, &dir.join("p2"), &["--dump-dom"]);
    let mut problems = page_problems(&shot.stderr, &page);
    problems.extend(page_problems(&dom.stderr, &page));
    let bytes =
        std::fs::read(&png).unwrap_or_else(|e| panic!("no screenshot {}: {e}", png.display()));
    (bytes, problems, String::from_utf8(dom.stdout).unwrap())
}

/// Width, height and the set of distinct RGB colours.
fn decode(png_bytes: &[u8]) -> (u32, u32, HashSet<[u8; 3]>, f64) {
    let mut dec = png::Decoder::new(std::io::Cursor::new(png_bytes))
        .read_info()
        .unwrap();
    let mut buf = vec![0; dec.output_buffer_size().unwrap()];
    let info = dec.next_frame(&mut buf).unwrap();
    let step = info.color_type.samples();
    assert!(
        step >= 3,
        "colour screenshot expected, got {:?}",
        info.color_type
    );
    let px: Vec<[u8; 3]> = buf[..info.buffer_size()]
        .chunks(step)
        .map(|c| [c[0], c[1], c[2]])
        .collect();
    let inked = px.iter().filter(|p| **p != [255, 255, 255]).count() as f64 / px.len() as f64;
    (info.width, info.height, px.into_iter().collect(), inked)
}

#[test]
fn the_variants_report_renders_in_chromium_without_errors() {
    let run = source::from_file(&common::fixture("variants-run.yaml")).unwrap();
    let html = report::render(&run).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let (bytes, problems, dom) = screenshot(&html, dir.path());
    assert!(problems.is_empty(), "the page logged: {problems:#?}");
    let (w, h, colours, inked) = decode(&bytes);
    assert_eq!((w, h), SIZE);
    // Two variant colours anti-aliased on white, text and grid: hundreds of shades; a blank or
    // failed page has a handful.
    assert!(colours.len() > 200, "{} distinct colours", colours.len());
    assert!(
        inked > 0.03,
        "only {:.1} % of the pixels are not white",
        inked * 100.0
    );
    for chart in [
        "latency-percentiles",
        "throughput-timeline",
        "p99-timeline",
        "paired-ratios",
    ] {
        assert!(
            dom.contains(&format!("data-chart=\"{chart}\"")),
            "DOM lacks {chart}"
        );
    }
    assert!(dom.matches("<svg").count() >= 4);
    if std::env::var_os("MSGBENCH_UPDATE_SCREENSHOT").is_some() {
        let docs = Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/report-screenshot.png");
        std::fs::write(docs, &bytes).unwrap();
    }
}

/// The check above can fail: a page that logs to the console is caught.
#[test]
fn a_page_that_logs_an_error_is_caught() {
    let dir = tempfile::tempdir().unwrap();
    let html =
        "<!DOCTYPE html><html><body><p>x</p><script>console.error('boom')</script></body></html>";
    let (_, problems, _) = screenshot(html, dir.path());
    assert!(problems.iter().any(|p| p.contains("boom")), "{problems:#?}");
}
