//! `kubectl msgbench export`: the raw figures as JSON or YAML (status as written) or CSV (one
//! row of headline figures per variant). Floats are written with Rust's `{}`, which reads back as the
//! identical f64; a figure that is not defined is an empty cell, never 0.
use anyhow::Result;
use serde_json::{json, Map, Value};

use crate::run_view::{Run, Series};

pub const CSV_HEADER: [&str; 20] = [
    "variant",
    "target",
    "trials",
    "deliveryRate",
    "receiveRate",
    "publishRate",
    "published",
    "received",
    "expected",
    "deliveredRatio",
    "errors",
    "duplicates",
    "outOfOrder",
    "p50Ms",
    "p90Ms",
    "p95Ms",
    "p99Ms",
    "p999Ms",
    "maxMs",
    "generatorSaturated",
];

/// The run's result figures from status, nulls left out.
pub fn to_json(run: &Run) -> Result<String> {
    Ok(serde_json::to_string_pretty(&to_value(run))? + "\n")
}

/// What [`to_json`] prints, as a value (several runs print as a list of these).
pub fn to_value(run: &Run) -> Value {
    let s = &run.status;
    let all = json!({
        "name": run.name,
        "phase": s.phase,
        "targetName": s.target_name.as_deref().map(crate::run_view::redact),
        "headline": s.headline,
        "result": s.result,
        "trials": s.trials,
        "statistics": s.statistics,
        "comparison": s.comparison,
        "schedule": s.schedule,
        "variants": s.variants,
        "variantComparison": s.variant_comparison,
        "verdict": s.verdict,
    });
    let kept: Map<String, Value> = match all {
        Value::Object(m) => m
            .into_iter()
            .filter(|(_, v)| !v.is_null() && v.as_array().is_none_or(|a| !a.is_empty()))
            .collect(),
        _ => unreachable!("json! of an object"),
    };
    Value::Object(kept)
}

pub fn to_csv(run: &Run) -> Result<String> {
    let mut w = csv::Writer::from_writer(vec![]);
    w.write_record(CSV_HEADER)?;
    for s in run.series() {
        w.write_record(csv_row(&s))?;
    }
    Ok(String::from_utf8(w.into_inner()?)?)
}

/// Several runs in one table: [`CSV_HEADER`] after a `run` column naming each row's run.
pub fn to_csv_many(runs: &[Run]) -> Result<String> {
    let mut w = csv::Writer::from_writer(vec![]);
    w.write_record(std::iter::once("run").chain(CSV_HEADER))?;
    for run in runs {
        for s in run.series() {
            w.write_record(std::iter::once(run.name.clone()).chain(csv_row(&s)))?;
        }
    }
    Ok(String::from_utf8(w.into_inner()?)?)
}

fn csv_row(s: &Series) -> Vec<String> {
    let f = |v: f64| format!("{v}");
    let opt = |v: Option<f64>| v.map_or(String::new(), f);
    // A merged result holds at least one trial even where status lists none (a runner file).
    let trials = s.trials.len().max(usize::from(s.result.is_some()));
    let mut row = vec![s.name.to_string(), s.target.clone(), trials.to_string()];
    let Some(r) = s.result else {
        row.resize(CSV_HEADER.len(), String::new());
        return row;
    };
    let l = r.latency.as_ref();
    row.extend([
        opt(r.delivery_rate),
        f(r.receive_rate),
        f(r.publish_rate),
        r.published.to_string(),
        r.received.to_string(),
        r.expected.to_string(),
        f(r.delivered_ratio),
        r.errors.to_string(),
        r.duplicates.to_string(),
        r.out_of_order.to_string(),
        opt(l.map(|l| l.p50_ms)),
        opt(l.map(|l| l.p90_ms)),
        opt(l.map(|l| l.p95_ms)),
        opt(l.map(|l| l.p99_ms)),
        opt(l.map(|l| l.p999_ms)),
        opt(l.map(|l| l.max_ms)),
        r.generator_saturated.to_string(),
    ]);
    row
}
