//! What the gate writes: JUnit XML read back by an XML parser (roxmltree), and the Markdown
//! summary read back by a CommonMark parser with GitHub's tables (pulldown-cmark).
mod common;
#[path = "common/states.rs"]
mod states;

use kubectl_msgbench::gate::{decide, Observed};
use kubectl_msgbench::{junit, summary};
use msgbench_crds::benchmark_run::{Metric, Phase, Severity, ThresholdOp};
use pulldown_cmark::{Event, Options, Parser, Tag, TagEnd};
use states::*;

/// A message with everything XML and Markdown must escape, and a control character XML 1.0
/// cannot carry at all.
const NASTY: &str = "runner <1> & \"2\" said 'no' | *bold* \u{1b}[31m";

/// A passed run with a warning, a run failed on thresholds, a run failed before its load, and
/// a missing one.
fn four_runs() -> Vec<Observed> {
    let t = |m, op, v, o, s| threshold(m, op, v, o, s);
    let passed = judged(vec![
        t(
            Metric::ReceiveRate,
            ThresholdOp::Ge,
            900.0,
            Some(999.9),
            Severity::Fail,
        ),
        t(
            Metric::LatencyP999Ms,
            ThresholdOp::Lt,
            2.0,
            Some(8.2),
            Severity::Warn,
        ),
    ]);
    let failed = judged(vec![
        t(
            Metric::LatencyP99Ms,
            ThresholdOp::Le,
            1.0,
            Some(3.4),
            Severity::Fail,
        ),
        t(
            Metric::LostAcked,
            ThresholdOp::Le,
            0.0,
            None,
            Severity::Fail,
        ),
        t(
            Metric::Errors,
            ThresholdOp::Le,
            0.0,
            Some(0.0),
            Severity::Fail,
        ),
    ]);
    let broken = finished(
        fixture("plain-run.yaml"),
        Phase::Failed,
        "TargetNotFound",
        NASTY,
    );
    vec![
        named("passed", passed),
        named("failed", failed),
        named("broken", broken),
        missing("ghost"),
    ]
}

fn attr(n: roxmltree::Node, name: &str) -> usize {
    n.attribute(name).unwrap().parse().unwrap()
}

#[test]
fn junit_has_a_suite_per_run_a_case_per_threshold_and_honest_counts() {
    let runs = four_runs();
    let xml = junit::render(&runs, false).unwrap();
    let doc = roxmltree::Document::parse(&xml).unwrap();
    let root = doc.root_element();
    assert_eq!(root.tag_name().name(), "testsuites");
    let suites: Vec<_> = root
        .children()
        .filter(|n| n.has_tag_name("testsuite"))
        .collect();
    let names: Vec<_> = suites
        .iter()
        .map(|s| s.attribute("name").unwrap())
        .collect();
    assert_eq!(names, ["passed", "failed", "broken", "ghost"]);
    // (tests, failures, errors): completion + thresholds; warn-only passes.
    let want = [(3, 0, 0), (4, 3, 0), (1, 1, 0), (1, 0, 1)];
    for (s, want) in suites.iter().zip(want) {
        let cases: Vec<_> = s
            .children()
            .filter(|n| n.has_tag_name("testcase"))
            .collect();
        let count = |tag: &str| {
            cases
                .iter()
                .filter(|c| c.children().any(|x| x.has_tag_name(tag)))
                .count()
        };
        let got = (cases.len(), count("failure"), count("error"));
        assert_eq!(got, want, "{:?}", s.attribute("name"));
        assert_eq!(
            (attr(*s, "tests"), attr(*s, "failures"), attr(*s, "errors")),
            want
        );
        assert_eq!(cases[0].attribute("name"), Some("completion"));
    }
    assert_eq!(
        (
            attr(root, "tests"),
            attr(root, "failures"),
            attr(root, "errors")
        ),
        (9, 4, 1)
    );

    let failure_of = |suite: usize, case: &str| {
        let c = suites[suite]
            .descendants()
            .find(|n| n.has_tag_name("testcase") && n.attribute("name") == Some(case))
            .unwrap_or_else(|| panic!("no test case {case}"));
        let f = c.children().find(|n| n.has_tag_name("failure")).unwrap();
        (
            f.attribute("type").unwrap().to_string(),
            f.attribute("message").unwrap().to_string(),
        )
    };
    let (kind, message) = failure_of(1, "latencyP99Ms <= 1");
    assert_eq!(
        (kind.as_str(), message.as_str()),
        ("ThresholdNotMet", "observed 3.4 ms, limit <= 1 ms")
    );
    let (_, message) = failure_of(1, "lostAcked <= 0");
    assert!(
        message.contains("unavailable (publishes are not acknowledged"),
        "{message}"
    );
    // The run's own failure, escaped and read back exactly (the control character replaced).
    let (kind, message) = failure_of(2, "completion");
    assert_eq!(kind, "TargetNotFound");
    assert_eq!(
        message,
        format!("TargetNotFound: {}", NASTY.replace('\u{1b}', "\u{fffd}"))
    );
    let warned = suites[0]
        .descendants()
        .find(|n| n.has_tag_name("system-out") && n.text().unwrap().starts_with("warning"))
        .unwrap();
    assert!(warned
        .text()
        .unwrap()
        .contains("observed 8.2 ms, limit < 2 ms"));
    let error = suites[3]
        .descendants()
        .find(|n| n.has_tag_name("error"))
        .unwrap();
    assert_eq!(error.attribute("type"), Some("Missing"));
}

#[test]
fn junit_calls_a_run_unfinished_at_the_deadline_a_timeout() {
    let runs = vec![found(running(fixture("plain-run.yaml"), 1))];
    let xml = junit::render(&runs, true).unwrap();
    let doc = roxmltree::Document::parse(&xml).unwrap();
    let e = doc.descendants().find(|n| n.has_tag_name("error")).unwrap();
    assert_eq!(e.attribute("type"), Some("Timeout"));
    assert!(e.attribute("message").unwrap().contains("phase Running"));
}

/// Every GFM table in `md`: rows of cell texts, the header row first.
fn tables(md: &str) -> Vec<Vec<Vec<String>>> {
    let mut out: Vec<Vec<Vec<String>>> = vec![];
    for e in Parser::new_ext(md, Options::ENABLE_TABLES) {
        let table = out.last_mut();
        match e {
            Event::Start(Tag::Table(_)) => out.push(vec![]),
            Event::Start(Tag::TableHead | Tag::TableRow) => table.unwrap().push(vec![]),
            Event::Start(Tag::TableCell) => table.unwrap().last_mut().unwrap().push(String::new()),
            Event::Text(t) | Event::Code(t) => {
                if let Some(cell) = table.and_then(|t| t.last_mut()).and_then(|r| r.last_mut()) {
                    cell.push_str(&t);
                }
            }
            Event::End(TagEnd::Table) => {}
            _ => {}
        }
    }
    out
}

#[test]
fn the_summary_has_the_headline_threshold_and_comparison_tables() {
    let mut runs = four_runs();
    runs.insert(0, found(fixture("variants-run.yaml")));
    let outcome = decide(&runs, false);
    let md = summary::render(&runs, &outcome);
    assert!(
        md.starts_with("## msgbench gate: undecided (exit 2)\n"),
        "{md}"
    );
    let t = tables(&md);
    // variants run: headlines + comparison (no thresholds); passed, failed, broken: headlines +
    // thresholds (broken has none: a note, no table); ghost: nothing but its line.
    let heads: Vec<&str> = t.iter().map(|t| t[0][1].as_str()).collect();
    assert_eq!(
        heads,
        [
            "delivery rate (msg/s)",
            "figure",
            "delivery rate (msg/s)",
            "observed",
            "delivery rate (msg/s)",
            "observed",
            "delivery rate (msg/s)"
        ]
    );
    let headline = &t[0];
    assert_eq!(
        headline.iter().map(|r| r[0].as_str()).collect::<Vec<_>>(),
        ["series", "r1", "r2"]
    );
    assert_eq!(t[1].len(), 1 + 5, "one row per paired figure");
    let failed_thresholds = &t[5];
    assert_eq!(failed_thresholds.len(), 1 + 3);
    assert_eq!(
        failed_thresholds[1],
        ["latencyP99Ms <= 1", "3.4 ms", "fail", "NOT HELD"]
    );
    assert!(failed_thresholds[2][1].starts_with("unavailable: publishes are not acknowledged"));
    // The escaped message reads back as written, inside one list item.
    let plain: String = Parser::new(&md)
        .filter_map(|e| match e {
            Event::Text(t) => Some(t.to_string()),
            _ => None,
        })
        .collect();
    assert!(
        plain.contains(&format!(
            "broken: Failed (TargetNotFound): {}",
            NASTY.replace('\u{1b}', "\u{fffd}")
        )),
        "{plain}"
    );
    assert!(
        md.len() < 8_000,
        "small enough for a comment: {} bytes",
        md.len()
    );
}

#[test]
fn the_report_shows_the_same_thresholds_table() {
    let run = judged(vec![threshold(
        Metric::LostAcked,
        ThresholdOp::Le,
        0.0,
        None,
        Severity::Fail,
    )]);
    let html = kubectl_msgbench::report_cmd::render(&run).unwrap();
    let at = html
        .find("<table class=\"thresholds\">")
        .expect("a thresholds table");
    let table = &html[at..at + html[at..].find("</table>").unwrap()];
    assert!(table.contains("<td>lostAcked &lt;= 0</td>"), "{table}");
    assert!(table.contains("<span class=\"na\">unavailable: publishes are not acknowledged"));
    assert!(table.contains("<td>NOT HELD</td>"));
    // A run without thresholds gets no section.
    let plain = kubectl_msgbench::report_cmd::render(&fixture("plain-run.yaml")).unwrap();
    assert!(!plain.contains("Thresholds"));
}
