//! `gate --summary FILE`: the gate's outcome as Markdown small enough for a pull-request
//! comment: the gate's lines, then per run its verdict, headline figures, thresholds and, with
//! variants, the paired comparison (the report's table). Nothing per second or per trial: the
//! HTML report has those.
use msgbench_crds::benchmark_run::{Metric, RunResult};

use crate::doc::{Cell, Doc};
use crate::gate::{judge, Fetched, GateOutcome, Observed, RunState, FAILED, PASSED};
use crate::markdown::Markdown;
use crate::run_view::{Run, Series};
use crate::tables::{self, short};
use crate::thresholds;

pub fn render(runs: &[Observed], outcome: &GateOutcome) -> String {
    let mut md = Markdown::new();
    let word = match outcome.code {
        Some(PASSED) => "passed".to_string(),
        Some(FAILED) => "failed".to_string(),
        Some(c) => format!("undecided (exit {c})"),
        None => "still waiting".to_string(),
    };
    md.title(2, &format!("msgbench gate: {word}"));
    md.list(&outcome.lines);
    for o in runs {
        let Fetched::Found(run) = &o.fetched else {
            continue; // its line says why there is nothing more to show
        };
        md.title(3, &o.name);
        md.field("Verdict", &verdict(&judge(&o.fetched)));
        if let Some(w) = &run.workload {
            md.field("Workload", w);
        }
        if run.status.result.is_some() || run.has_variants() {
            headlines(&mut md, run);
        }
        thresholds::table(&mut md, run);
        if run.status.variant_comparison.is_some() {
            tables::comparison(&mut md, run);
        }
    }
    md.finish()
}

fn verdict(state: &RunState) -> String {
    let with = |m: &Option<String>| m.as_ref().map_or(String::new(), |m| format!(": {m}"));
    match state {
        RunState::Passed { message } => format!("Passed{}", with(message)),
        RunState::Failed { reason, message } => format!("Failed ({reason}){}", with(message)),
        RunState::Running { detail } => format!("not finished ({detail})"),
        RunState::Missing(m) => format!("missing ({m})"),
        RunState::Error { message, .. } => format!("unreadable ({message})"),
    }
}

type Column = (&'static str, fn(&RunResult) -> Option<Cell>);

/// Figures every result has (latency only with deliveries, the delivery rate only with an
/// end-to-end window).
const ALWAYS: [Column; 7] = [
    ("delivery rate (msg/s)", |r| {
        Some(r.delivery_rate.map_or_else(
            || Cell::unavailable(thresholds::why_unavailable(Metric::DeliveryRate)),
            |d| Cell::text(&short(d)),
        ))
    }),
    ("receive rate (msg/s)", |r| {
        Some(Cell::text(&short(r.receive_rate)))
    }),
    ("p50", |r| latency(r, |l| l.p50_ms)),
    ("p99", |r| latency(r, |l| l.p99_ms)),
    ("p99.9", |r| latency(r, |l| l.p999_ms)),
    ("delivered", |r| Some(Cell::text(&short(r.delivered_ratio)))),
    ("errors", |r| Some(Cell::text(&r.errors.to_string()))),
];

/// Figures only some workloads have: a column only when some series has the figure.
const WHERE_PRESENT: [Column; 4] = [
    ("acked, never delivered", |r| {
        r.lost_acked.map(|n| Cell::text(&n.to_string()))
    }),
    ("acked, not kept", |r| {
        (r.acked_not_kept.is_some() || r.acked_not_kept_unavailable.is_some())
            .then(|| crate::fault_tables::kept_cell(r))
    }),
    ("longest publish stall", |r| {
        r.publish_stall_ms
            .map(|ms| Cell::text(&format!("{} ms", short(ms))))
    }),
    ("breaking stage", |r| {
        r.breaking_stage.as_deref().map(Cell::text)
    }),
];

fn latency(
    r: &RunResult,
    pick: fn(&msgbench_crds::benchmark_run::LatencySummary) -> f64,
) -> Option<Cell> {
    Some(match &r.latency {
        Some(l) => Cell::text(&format!("{} ms", short(pick(l)))),
        None => Cell::unavailable("no deliveries measured"),
    })
}

/// One row per series (variant, or the run): throughput, latency percentiles, delivery.
fn headlines(doc: &mut dyn Doc, run: &Run) {
    let series = run.series();
    let present: Vec<&Column> = (WHERE_PRESENT.iter())
        .filter(|(_, get)| series.iter().any(|s| s.result.and_then(get).is_some()))
        .collect();
    let columns: Vec<&Column> = ALWAYS.iter().chain(present).collect();
    let mut head = vec!["series"];
    head.extend(columns.iter().map(|c| c.0));
    let rows: Vec<Vec<Cell>> = series.iter().map(|s| row(s, &columns)).collect();
    doc.table("headlines", &head, &rows);
}

fn row(s: &Series, columns: &[&Column]) -> Vec<Cell> {
    let mut row = vec![Cell::text(s.name)];
    let Some(r) = s.result else {
        row.push(Cell::unavailable("no merged result in status"));
        return row;
    };
    let na = "not measured in this workload";
    row.extend(
        columns
            .iter()
            .map(|(_, get)| get(r).unwrap_or_else(|| Cell::unavailable(na))),
    );
    row
}
