//! The report's fault section: what each series lost and how long it stalled, then every fault
//! execution with its effect on delivery. Absent figures say why, never 0.
use msgbench_crds::benchmark_run::{FaultRecord, RunResult};

use crate::html::{Cell, Doc, Page};
use crate::run_view::{Run, Series};

pub fn faults(page: &mut Page, run: &Run) {
    if run.status.faults.is_empty() {
        return;
    }
    page.heading("Faults");
    let series = run.series();
    let rows: Vec<Vec<Cell>> = series.iter().map(cost_row).collect();
    let head = [
        "series",
        "acked, never delivered",
        "acked, not kept",
        "longest publish stall",
        "faults recovered",
        "longest recovery",
        "p99 peak after a fault",
    ];
    page.table("fault-costs", &head, &rows);
    let rows: Vec<Vec<Cell>> = run.status.faults.iter().map(execution_row).collect();
    let head = [
        "trial",
        "variant",
        "pod",
        "at (s into the measured phase)",
        "delivery before (msg/s)",
        "lowest after",
        "back to 95 %",
        "p99 before / peak",
        "duplicates / out of order until the next fault",
        "its trial: acked, never delivered / longest publish stall",
    ];
    page.table("faults", &head, &rows);
}

fn cost_row(s: &Series) -> Vec<Cell> {
    let r: Option<&RunResult> = s.result;
    let no_acks = "the server does not acknowledge publishes here";
    let lost = r.and_then(|r| r.lost_acked);
    let stall = r.and_then(|r| r.publish_stall_ms);
    let f = r.and_then(|r| r.faults.as_ref());
    vec![
        Cell::text(s.name),
        lost.map_or(Cell::unavailable(no_acks), |n| Cell::text(&n.to_string())),
        r.map_or(Cell::unavailable("no result"), kept_cell),
        stall.map_or(Cell::unavailable(no_acks), |ms| {
            Cell::text(&format!("{ms:.1} ms"))
        }),
        f.map_or(Cell::unavailable("no fault carried out"), |f| {
            Cell::text(&format!("{} of {}", f.recovered, f.executed))
        }),
        f.and_then(|f| f.longest_recovery_seconds)
            .map_or(Cell::unavailable("none recovered"), |s| {
                Cell::text(&format!("{s} s"))
            }),
        f.and_then(|f| f.p99_peak_ms)
            .map_or(Cell::unavailable("no deliveries after a fault"), |ms| {
                Cell::text(&format!("{ms} ms"))
            }),
    ]
}

/// `ackedNotKept`, saying when the stream was gone, or why it is unavailable.
pub fn kept_cell(r: &RunResult) -> Cell {
    use msgbench_crds::benchmark_run::AckedNotKeptFrom::StreamGone;
    match (r.acked_not_kept, &r.acked_not_kept_unavailable) {
        (Some(n), _) if r.acked_not_kept_from == Some(StreamGone) => {
            Cell::text(&format!("{n} (stream gone)"))
        }
        (Some(n), _) => Cell::text(&n.to_string()),
        (None, Some(why)) => Cell::unavailable(why),
        (None, None) => Cell::unavailable(crate::thresholds::why_unavailable(
            msgbench_crds::benchmark_run::Metric::AckedNotKept,
        )),
    }
}

fn execution_row(f: &FaultRecord) -> Vec<Cell> {
    let Some(pod) = f.pod.as_deref() else {
        return vec![
            Cell::text(&f.trial.to_string()),
            Cell::text(f.variant.as_deref().unwrap_or("-")),
            Cell::unavailable(f.message.as_deref().unwrap_or("not carried out")),
        ];
    };
    let e = f.effect.as_ref();
    let at = f
        .offset_seconds
        .map_or(Cell::unavailable("not recorded"), |s| {
            Cell::text(&format!("{s}"))
        });
    let Some(e) = e else {
        return vec![
            Cell::text(&f.trial.to_string()),
            Cell::text(f.variant.as_deref().unwrap_or("-")),
            Cell::text(pod),
            at,
            Cell::unavailable("the trial's timeline was not read"),
        ];
    };
    let p99 = |v: Option<f64>| v.map_or("–".to_string(), |ms| format!("{ms} ms"));
    vec![
        Cell::text(&f.trial.to_string()),
        Cell::text(f.variant.as_deref().unwrap_or("-")),
        Cell::text(pod),
        at,
        Cell::text(&format!("{}", e.before_receive_rate)),
        Cell::text(&format!("{}", e.lowest_receive_rate)),
        // The full reason (`recovery`) is in status; a table cell keeps it short.
        e.recovery_seconds
            .map_or(Cell::unavailable("not back in the measured phase"), |s| {
                Cell::text(&format!("{s} s"))
            }),
        Cell::text(&format!(
            "{} / {}",
            p99(e.p99_before_ms),
            p99(e.p99_peak_ms)
        )),
        Cell::text(&format!("{} / {}", e.duplicates, e.out_of_order)),
        match (e.trial_lost_acked, e.trial_publish_stall_ms) {
            (Some(lost), Some(ms)) => Cell::text(&format!("{lost} / {ms} ms")),
            _ => Cell::unavailable("publishes are not acknowledged here"),
        },
    ]
}
