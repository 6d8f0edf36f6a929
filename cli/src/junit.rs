//! `gate --junit FILE`: the gate's outcome as JUnit XML, which CI systems show as tests. One
//! `<testsuite>` per run: a `completion` test case (a failure when the run's verdict failed, an
//! error when it did not finish, is missing or could not be read) and one test case per
//! threshold. A fail-severity threshold not held is a failure, also when its figure is
//! unavailable; a warn-severity one passes with the warning in `<system-out>`, as it does not
//! fail the run. So `failures` > 0 exactly when the gate exits 1, `errors` > 0 when it exits 2.
use anyhow::Result;
use msgbench_crds::benchmark_run::ThresholdResult;
use quick_xml::events::{BytesDecl, BytesText, Event};
use quick_xml::Writer;
use std::io;

use crate::gate::{judge, Fetched, Observed, RunState};
use crate::thresholds;

/// A test case's result: passed (with optional output), a failure or an error.
enum CaseResult {
    Pass(Option<String>),
    Failure { kind: String, message: String },
    Error { kind: String, message: String },
}

struct Case {
    name: String,
    result: CaseResult,
}

/// The JUnit document for the gate's runs (`deadline_passed` as given to `gate::decide`).
pub fn render(runs: &[Observed], deadline_passed: bool) -> Result<String> {
    let suites: Vec<(&str, Vec<Case>)> = runs
        .iter()
        .map(|o| (o.name.as_str(), cases(o, deadline_passed)))
        .collect();
    let all = suites.iter().flat_map(|(_, c)| c);
    let (tests, failures, errors) = counts(all);
    let mut w = Writer::new_with_indent(Vec::new(), b' ', 2);
    w.write_event(Event::Decl(BytesDecl::new("1.0", Some("UTF-8"), None)))?;
    w.create_element("testsuites")
        .with_attributes([
            ("name", "kubectl msgbench gate"),
            ("tests", tests.to_string().as_str()),
            ("failures", failures.to_string().as_str()),
            ("errors", errors.to_string().as_str()),
        ])
        .write_inner_content(|w| {
            for (name, cases) in &suites {
                suite(w, name, cases)?;
            }
            Ok(())
        })?;
    let mut xml = String::from_utf8(w.into_inner())?;
    xml.push('\n');
    Ok(xml)
}

fn counts<'a>(cases: impl Iterator<Item = &'a Case>) -> (usize, usize, usize) {
    cases.fold((0, 0, 0), |(t, f, e), c| match c.result {
        CaseResult::Pass(_) => (t + 1, f, e),
        CaseResult::Failure { .. } => (t + 1, f + 1, e),
        CaseResult::Error { .. } => (t + 1, f, e + 1),
    })
}

fn suite(w: &mut Writer<Vec<u8>>, name: &str, cases: &[Case]) -> io::Result<()> {
    let (tests, failures, errors) = counts(cases.iter());
    let name = xml_safe(name);
    w.create_element("testsuite")
        .with_attributes([
            ("name", name.as_str()),
            ("tests", tests.to_string().as_str()),
            ("failures", failures.to_string().as_str()),
            ("errors", errors.to_string().as_str()),
            ("skipped", "0"),
        ])
        .write_inner_content(|w| {
            for c in cases {
                case(w, &name, c)?;
            }
            Ok(())
        })?;
    Ok(())
}

fn case(w: &mut Writer<Vec<u8>>, suite: &str, c: &Case) -> io::Result<()> {
    let name = xml_safe(&c.name);
    let el = w
        .create_element("testcase")
        .with_attributes([("classname", suite), ("name", name.as_str())]);
    let (tag, kind, message) = match &c.result {
        CaseResult::Pass(None) => {
            el.write_empty()?;
            return Ok(());
        }
        CaseResult::Pass(Some(out)) => {
            el.write_inner_content(|w| {
                let text = BytesText::new(&xml_safe(out)).into_owned();
                w.create_element("system-out").write_text_content(text)?;
                Ok(())
            })?;
            return Ok(());
        }
        CaseResult::Failure { kind, message } => ("failure", kind, message),
        CaseResult::Error { kind, message } => ("error", kind, message),
    };
    let message = xml_safe(message);
    el.write_inner_content(|w| {
        w.create_element(tag)
            .with_attributes([("type", kind.as_str()), ("message", message.as_str())])
            .write_text_content(BytesText::new(&message))?;
        Ok(())
    })?;
    Ok(())
}

/// The run's completion test case, then one per threshold in status order.
fn cases(o: &Observed, deadline_passed: bool) -> Vec<Case> {
    let state = judge(&o.fetched);
    let mut out = vec![Case {
        name: "completion".into(),
        result: completion(&state, deadline_passed),
    }];
    if let Fetched::Found(run) = &o.fetched {
        out.extend(run.status.thresholds.iter().map(threshold));
    }
    out
}

fn completion(state: &RunState, deadline_passed: bool) -> CaseResult {
    let error = |kind: &str, message: String| CaseResult::Error {
        kind: kind.into(),
        message,
    };
    match state {
        RunState::Passed { message } => CaseResult::Pass(message.clone()),
        RunState::Failed { reason, message } => CaseResult::Failure {
            kind: reason.clone(),
            message: match message {
                Some(m) => format!("{reason}: {m}"),
                None => reason.clone(),
            },
        },
        RunState::Running { detail } if deadline_passed => error(
            "Timeout",
            format!("not finished at the deadline ({detail})"),
        ),
        RunState::Running { detail } => error(
            "NotFinished",
            format!("not finished when the gate stopped ({detail})"),
        ),
        RunState::Missing(m) => error("Missing", m.clone()),
        RunState::Error { message, .. } => error("Unreadable", message.clone()),
    }
}

fn threshold(t: &ThresholdResult) -> Case {
    let figures = thresholds::observed_vs_limit(t);
    let result = if thresholds::breaks_run(t) {
        CaseResult::Failure {
            kind: "ThresholdNotMet".into(),
            message: figures,
        }
    } else if thresholds::warns(t) {
        CaseResult::Pass(Some(format!(
            "warning (severity warn): not held: {figures}"
        )))
    } else {
        CaseResult::Pass(Some(format!("held: {figures}")))
    };
    Case {
        name: thresholds::name(t),
        result,
    }
}

/// Text XML 1.0 can carry: control characters other than tab, newline and carriage return
/// cannot be written even escaped, so they become U+FFFD (a status from a file may hold any).
pub fn xml_safe(s: &str) -> String {
    s.chars()
        .map(|c| match c {
            '\t' | '\n' | '\r' => c,
            '\u{0}'..='\u{1f}' | '\u{fffe}' | '\u{ffff}' => '\u{fffd}',
            _ => c,
        })
        .collect()
}
