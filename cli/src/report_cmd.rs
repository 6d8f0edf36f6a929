//! `kubectl msgbench report`: the run's charts and tables as one HTML file.
use anyhow::Result;
use msgbench_crds::benchmark_run::{Phase, TimelineSample};

use crate::html::Page;
use crate::paired_rows::ratio_rows;
use crate::plots::{self, colour, Line};
use crate::run_view::{self, Run, Series};
use crate::tables;

pub fn render(run: &Run) -> Result<String> {
    let title = format!("msgbench report: {}", run.name);
    let mut page = Page::new(&title);
    header(&mut page, run);
    let series = run.series();
    page.heading("Latency distribution");
    percentiles(&mut page, &series)?;
    page.heading("Over time");
    timelines(&mut page, &series)?;
    if run.has_variants() {
        page.heading("Paired comparison");
        ratios(&mut page, run)?;
    }
    if !run.status.thresholds.is_empty() {
        page.heading("Thresholds");
        crate::thresholds::table(&mut page, run);
    }
    page.heading("Figures");
    tables::figures(&mut page, run);
    crate::segment_tables::segments(&mut page, run);
    crate::fault_tables::faults(&mut page, run);
    Ok(page.finish(&title))
}

/// `Passed (reason)` or `Failed (reason)`: the terminal phase says which, the verdict why.
fn verdict(run: &Run) -> Option<String> {
    let reason = &run.status.verdict.as_ref()?.reason;
    let word = match run.status.phase? {
        Phase::Succeeded => "Passed",
        Phase::Failed => "Failed",
        _ => return None,
    };
    Some(format!("{word} ({reason})"))
}

fn header(page: &mut Page, run: &Run) {
    let s = &run.status;
    page.meta("Run", &format!("{} ({})", run.name, run.origin));
    page.meta("Phase", &run.phase());
    if let Some(v) = verdict(run) {
        page.meta("Verdict", &v);
    }
    if !run.has_variants() {
        page.meta("Target", &run.series()[0].target);
    }
    if let Some(w) = &run.workload {
        page.meta("Workload", w);
    }
    if !s.schedule.is_empty() {
        let order: Vec<String> = (s.schedule.iter())
            .map(|r| format!("{}: {}", r.round, r.order.join(" ")))
            .collect();
        page.meta("Order per round", &order.join(" | "));
    }
}

fn names(lines: &[Line]) -> Vec<String> {
    lines.iter().map(|l| l.name.clone()).collect()
}

fn percentiles(page: &mut Page, series: &[Series]) -> Result<()> {
    let mut lines = vec![];
    for (i, s) in series.iter().enumerate() {
        let Some(h) = s.result.and_then(|r| r.histogram.as_deref()) else {
            page.note(&format!(
                "{}: no merged histogram in status: no curve",
                s.name
            ));
            continue;
        };
        let curve = run_view::percentile_curve(h)?;
        lines.push(Line {
            name: s.name.to_string(),
            colour: colour(i, 0),
            segments: vec![curve],
        });
    }
    let curves: Vec<_> = lines
        .iter()
        .map(|l| (l.name.clone(), l.segments[0].clone()))
        .collect();
    let decades = run_view::percentile_decades(&curves);
    let svg = plots::percentile_chart(&lines, decades)?;
    let caption = format!(
        "Each line is one merged histogram (all runners, trials or rounds), read at steps of {} decades of 1/(1−q) up to the level one sample reaches.",
        run_view::PERCENTILE_STEP
    );
    page.chart("latency-percentiles", &names(&lines), &svg, &caption);
    Ok(())
}

fn timelines(page: &mut Page, series: &[Series]) -> Result<()> {
    if series.iter().all(|s| timeline(s).is_empty()) {
        page.note("No timeline in status (written by operators from this version on).");
        return Ok(());
    }
    let line = |i: usize, s: &Series, segments| Line {
        name: s.name.to_string(),
        colour: colour(i, 0),
        segments,
    };
    let rates: Vec<Line> = (series.iter().enumerate())
        .map(|(i, s)| line(i, s, vec![run_view::receive_rates(timeline(s))]))
        .collect();
    let svg = plots::timeline_chart("Throughput per second", "received msg/s", &rates)?;
    page.chart("throughput-timeline", &names(&rates), &svg,
        "Deliveries per second of the measured phase, all subscribers; with several rounds, the mean over rounds. A point is a window: one second, or the mean of several (its `seconds`) for a run past 10 minutes or a run with variants, which share the status's 600 points (six variants of a 10-minute run: 6-second windows), plotted at the window's first second. Points after publishing stopped are the drain: the deliveries still arriving then, so the line falls there.");
    let p99: Vec<Line> = (series.iter().enumerate())
        .map(|(i, s)| line(i, s, run_view::p99_segments(timeline(s))))
        .collect();
    let svg = plots::timeline_chart("p99 latency per second", "p99 latency (ms)", &p99)?;
    page.chart("p99-timeline", &names(&p99), &svg,
        "p99 of each window's deliveries (one second, or several as in the chart above) from a coarse histogram merged over runners, rounds and the window's seconds (within 6 %). A gap: no deliveries in that window, so no p99.");
    Ok(())
}

fn timeline<'a>(s: &Series<'a>) -> &'a [TimelineSample] {
    s.result.map_or(&[][..], |r| &r.timeline[..])
}

fn ratios(page: &mut Page, run: &Run) -> Result<()> {
    let rows = ratio_rows(&run.status);
    if rows.is_empty() {
        page.note("No paired comparison in status.");
        return Ok(());
    }
    let index = |name: &str| {
        run.status
            .variants
            .iter()
            .position(|v| v.name == name)
            .unwrap_or(0)
    };
    let colours: Vec<_> = (rows.iter().enumerate())
        .map(|(k, r)| colour(index(&r.figure.variant), k as u8))
        .collect();
    let svg = plots::ratio_chart(&rows, &colours)?;
    let labels: Vec<String> = rows.iter().map(|r| r.label()).collect();
    page.chart("paired-ratios", &labels, &svg,
        "Each round's ratio against the baseline variant's same round; the estimate is the geometric mean of the rounds' ratios, the bar its 95 % interval (Student t over rounds). Throughput above 1 and latency below 1 are better.");
    Ok(())
}

/// The report's header and tables (no charts) as GitHub-flavoured Markdown: `-o md`.
pub fn render_markdown(run: &Run) -> String {
    let mut md = crate::markdown::Markdown::new();
    md.title(2, &format!("msgbench report: {}", run.name));
    md.field("Run", &format!("{} ({})", run.name, run.origin));
    md.field("Phase", &run.phase());
    if let Some(v) = verdict(run) {
        md.field("Verdict", &v);
    }
    if let Some(w) = &run.workload {
        md.field("Workload", w);
    }
    if !run.status.thresholds.is_empty() {
        md.title(3, "Thresholds");
        crate::thresholds::table(&mut md, run);
    }
    md.title(3, "Figures");
    tables::figures(&mut md, run);
    md.finish()
}
