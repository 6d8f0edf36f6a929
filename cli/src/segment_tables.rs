//! The report's rows of a segmented workload: warm-up, sessions and stages (a soak as
//! one-minute stages is its per-minute table), one table per series. A figure a row lacks
//! says why, never 0.
use msgbench_crds::benchmark_run::{LatencySummary, Metric, SegmentResult};

use crate::html::{Cell, Doc, Page};
use crate::run_view::{Run, Series};
use crate::thresholds;

pub fn segments(page: &mut Page, run: &Run) {
    let series = run.series();
    let with_rows: Vec<&Series> = series
        .iter()
        .filter(|s| {
            s.result
                .is_some_and(|r| !r.sessions.is_empty() || !r.stages.is_empty())
        })
        .collect();
    if with_rows.is_empty() {
        return;
    }
    page.heading("Sessions and stages");
    for s in with_rows {
        let r = s.result.expect("filtered above");
        let rows: Vec<Vec<Cell>> = (r.warmup.iter())
            .chain(&r.sessions)
            .chain(&r.stages)
            .map(row)
            .collect();
        if run.has_variants() {
            page.note(&format!("{}:", s.name));
        }
        page.table("segments", &HEAD, &rows);
    }
}

const HEAD: [&str; 14] = [
    "row",
    "offered",
    "published",
    "received",
    "publish /s",
    "delivery /s",
    "receive /s",
    "mean",
    "stddev",
    "p50",
    "p99",
    "max",
    "publish ack p99",
    "generator",
];

fn ms(v: f64) -> Cell {
    Cell::text(&format!("{v} ms"))
}

fn row(g: &SegmentResult) -> Vec<Cell> {
    let mut row = vec![
        Cell::text(&g.name),
        g.offered
            .map_or(Cell::text("-"), |o| Cell::text(&format!("{o}"))),
        Cell::text(&g.published.to_string()),
        Cell::text(&g.received.to_string()),
        Cell::text(&format!("{}", g.publish_rate)),
        g.delivery_rate.map_or_else(
            || Cell::unavailable(thresholds::why_unavailable(Metric::DeliveryRate)),
            |d| Cell::text(&format!("{d}")),
        ),
        Cell::text(&format!("{}", g.receive_rate)),
    ];
    match &g.latency {
        Some(LatencySummary {
            mean_ms,
            stddev_ms,
            p50_ms,
            p99_ms,
            max_ms,
            ..
        }) => row.extend([*mean_ms, *stddev_ms, *p50_ms, *p99_ms, *max_ms].map(ms)),
        None => row.extend((0..5).map(|_| Cell::unavailable("no deliveries"))),
    }
    row.push(
        g.publish_ack_latency
            .as_ref()
            .map_or(Cell::unavailable("no publish acks"), |l| ms(l.p99_ms)),
    );
    row.push(Cell::text(if g.generator_saturated {
        "saturated"
    } else {
        "ok"
    }));
    row
}
