//! The report's tables: what `e2e/demo` prints, per variant or for the run. They write into a
//! [`Doc`], so the gate's Markdown summary reuses them (the paired comparison).
use msgbench_crds::benchmark_run::{Metric, PairedEstimate, RunResult, TrialFigures};

use crate::doc::{Cell, Doc};
use crate::run_view::{Run, Series};
use crate::thresholds;

pub fn figures(page: &mut dyn Doc, run: &Run) {
    let series = run.series();
    if run.has_variants() {
        variant_headlines(page, &series);
    }
    results(page, &series);
    for s in &series {
        if !s.trials.is_empty() {
            let what = if run.has_variants() {
                "rounds"
            } else {
                "trials"
            };
            page.note(&format!("{} {what}:", s.name));
            trials(page, s.trials);
        }
    }
    comparison(page, run);
    baseline(page, run);
}

/// A derived figure for reading (4 decimals at most); `export` keeps every digit.
pub(crate) fn short(v: f64) -> String {
    let s = format!("{v:.4}");
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

fn num(v: f64) -> Cell {
    Cell::text(&format!("{v}"))
}

fn ms(v: f64) -> Cell {
    Cell::text(&format!("{v} ms"))
}

/// The delivery rate, or why there is none.
fn delivery(v: Option<f64>) -> Cell {
    v.map_or_else(
        || Cell::unavailable(thresholds::why_unavailable(Metric::DeliveryRate)),
        num,
    )
}

fn variant_headlines(page: &mut dyn Doc, series: &[Series]) {
    let rows: Vec<Vec<Cell>> = series
        .iter()
        .map(|s| {
            let h = s.headline;
            let per_round: Vec<String> = (s.trials.iter())
                .map(|t| {
                    let rate = t.delivery_rate.map_or("-".into(), |d| d.to_string());
                    format!("{rate}/{}ms", t.p99_ms)
                })
                .collect();
            vec![
                Cell::text(s.name),
                Cell::text(&s.target),
                h.map_or(Cell::unavailable("no headline"), |h| {
                    delivery(h.delivery_rate)
                }),
                h.map_or(Cell::unavailable("no headline"), |h| num(h.receive_rate)),
                h.map_or(Cell::unavailable("no headline"), |h| Cell::text(&h.p99)),
                Cell::text(&per_round.join(" ")),
            ]
        })
        .collect();
    let head = [
        "variant",
        "target",
        "delivery rate (msg/s)",
        "receive rate (msg/s)",
        "p99",
        "per round (delivery msg/s / p99)",
    ];
    page.table("variants", &head, &rows);
}

/// Merged figures of each series: counts, rates and the merged histogram's percentiles.
fn results(page: &mut dyn Doc, series: &[Series]) {
    let head = [
        "series",
        "published",
        "received",
        "expected",
        "delivered",
        "errors",
        "dup",
        "out of order",
        "p50",
        "p90",
        "p99",
        "p99.9",
        "max",
        "generator",
    ];
    let rows: Vec<Vec<Cell>> = series
        .iter()
        .map(|s| result_row(s.name, s.result))
        .collect();
    page.table("results", &head, &rows);
}

fn result_row(name: &str, r: Option<&RunResult>) -> Vec<Cell> {
    let Some(r) = r else {
        return vec![
            Cell::text(name),
            Cell::unavailable("no merged result in status"),
        ];
    };
    let mut row = vec![
        Cell::text(name),
        num(r.published as f64),
        num(r.received as f64),
        num(r.expected as f64),
        num(r.delivered_ratio),
        num(r.errors as f64),
        num(r.duplicates as f64),
        num(r.out_of_order as f64),
    ];
    match &r.latency {
        Some(l) => row.extend([l.p50_ms, l.p90_ms, l.p99_ms, l.p999_ms, l.max_ms].map(ms)),
        None => row.push(Cell::unavailable("no deliveries measured: no latency")),
    }
    let g = if r.generator_saturated {
        "saturated"
    } else {
        "ok"
    };
    row.push(Cell::text(g));
    row
}

fn trials(page: &mut dyn Doc, trials: &[TrialFigures]) {
    let head = [
        "trial / round",
        "position",
        "delivery rate",
        "receive rate",
        "publish rate",
        "p50",
        "p99",
        "delivered",
        "generator",
    ];
    let rows: Vec<Vec<Cell>> = trials
        .iter()
        .map(|t| {
            vec![
                Cell::text(&t.trial.to_string()),
                Cell::text(&t.position.map_or("-".into(), |p| p.to_string())),
                delivery(t.delivery_rate),
                num(t.receive_rate),
                num(t.publish_rate),
                ms(t.p50_ms),
                ms(t.p99_ms),
                num(t.delivered_ratio),
                Cell::text(if t.generator_saturated {
                    "saturated"
                } else {
                    "ok"
                }),
            ]
        })
        .collect();
    page.table("trials", &head, &rows);
}

/// `estimate [low, high]`, or why the interval is missing.
fn estimate(e: &PairedEstimate) -> Cell {
    match (e.ci95_low, e.ci95_high) {
        (Some(l), Some(h)) => Cell::text(&format!(
            "{} [{}, {}]",
            short(e.estimate),
            short(l),
            short(h)
        )),
        _ => Cell::partly(&short(e.estimate), "interval needs 2 or more rounds"),
    }
}

/// The paired comparison of every variant against the baseline variant (also the gate's
/// summary table).
pub fn comparison(page: &mut dyn Doc, run: &Run) {
    let Some(vc) = &run.status.variant_comparison else {
        return;
    };
    page.note(&format!(
        "Against {} over {} paired rounds ({}):",
        vc.baseline, vc.rounds, vc.method
    ));
    let head = [
        "variant",
        "figure",
        "baseline → current",
        "ratio [95 %]",
        "difference [95 %]",
        "verdict",
    ];
    let rows: Vec<Vec<Cell>> = vc
        .figures
        .iter()
        .map(|f| {
            vec![
                Cell::text(&f.variant),
                Cell::text(&f.figure),
                Cell::text(&format!("{} → {}", short(f.baseline), short(f.current))),
                estimate(&f.ratio),
                estimate(&f.difference),
                Cell::text(&format!("{:?}", f.verdict)),
            ]
        })
        .collect();
    page.table("comparison", &head, &rows);
    if let Some(summary) = run
        .status
        .headline
        .as_ref()
        .and_then(|h| h.comparison.as_ref())
    {
        page.note(&format!("Summary: {summary}"));
    }
}

/// `spec.baselineRef`: this run against another run (Welch over trials).
fn baseline(page: &mut dyn Doc, run: &Run) {
    let Some(c) = &run.status.comparison else {
        return;
    };
    if let Some(reason) = &c.reason {
        page.note(&format!(
            "Against baseline run {}: no comparison ({reason})",
            c.baseline
        ));
        return;
    }
    page.note(&format!("Against baseline run {}:", c.baseline));
    let head = [
        "figure",
        "baseline → current",
        "ratio",
        "difference",
        "significance",
    ];
    let rows: Vec<Vec<Cell>> = (c.figures.iter())
        .map(|f| {
            let sig = if f.significant {
                "significant (95 %)"
            } else {
                "not significant"
            };
            vec![
                Cell::text(&f.figure),
                Cell::text(&format!("{} → {}", f.baseline, f.current)),
                num(f.ratio),
                num(f.difference),
                Cell::text(sig),
            ]
        })
        .collect();
    page.table("baseline", &head, &rows);
}
