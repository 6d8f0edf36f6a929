//! The variants report in a real browser (Debian's headless Chromium): it renders, the
//! screenshot is a real picture, and the page logs nothing. `make unit` installs chromium
//! (`e2e/tools/ensure apt:chromium`); without it this fails rather than skips.
mod common;

use kubectl_msgbench::{browser, report_cmd, source};

const SIZE: (u32, u32) = (1280, 2400);

#[test]
fn the_variants_report_renders_in_chromium_without_errors() {
    let run = source::from_file(&common::fixture("variants-run.yaml")).unwrap();
    let html = report_cmd::render(&run).unwrap();
    let r = browser::render(&html, SIZE).unwrap();
    assert!(r.problems.is_empty(), "the page logged: {:#?}", r.problems);
    let ink = browser::ink(&r.png).unwrap();
    let (colours, inked, dom) = (ink.colours, ink.inked, r.dom);
    assert_eq!((ink.width, ink.height), SIZE);
    // Two variant colours anti-aliased on white, text and grid: hundreds of shades; a blank or
    // failed page has a handful.
    assert!(colours > 200, "{colours} distinct colours");
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
}

/// The check above can fail: a page that logs to the console is caught.
#[test]
fn a_page_that_logs_an_error_is_caught() {
    let html =
        "<!DOCTYPE html><html><body><p>x</p><script>console.error('boom')</script></body></html>";
    let problems = browser::render(html, (400, 300)).unwrap().problems;
    assert!(problems.iter().any(|p| p.contains("boom")), "{problems:#?}");
    // ... and so is a blank page, by the check `report --screenshot` makes.
    let blank = "<!DOCTYPE html><html><body></body></html>";
    let err = browser::screenshot_checked(blank, (400, 300)).unwrap_err();
    assert!(err.to_string().contains("looks blank"), "{err}");
}
