//! `kubectl msgbench compare A B`: two separate runs' headline figures side by side.
use anyhow::{bail, Result};
use msgbench_crds::benchmark_run::RunResult;
use std::fmt::Write as _;

use crate::run_view::Run;

/// Why the ratio of two runs is weaker than a paired comparison; printed with every table.
pub const CAVEAT: &str = "Two separate runs: A and B did not run interleaved, so whatever else \
the machine did between them lands in B/A. On a noisy machine the ratio is indicative only; \
for a paired comparison with a 95 % interval, run both as spec.variants of one BenchmarkRun.";

pub fn render(a: &Run, b: &Run) -> Result<String> {
    let mut out = format!(
        "A: {} ({})\nB: {} ({})\n\n",
        a.name, a.origin, b.name, b.origin
    );
    for (name, ra, rb) in pairs(a, b)? {
        let _ = writeln!(out, "{name}");
        out.push_str(&table(ra, rb));
        out.push('\n');
    }
    out.push_str(CAVEAT);
    out.push('\n');
    Ok(out)
}

type Pair<'a> = (String, Option<&'a RunResult>, Option<&'a RunResult>);

/// Per variant when both runs have the same variants; otherwise the runs' own results.
fn pairs<'a>(a: &'a Run, b: &'a Run) -> Result<Vec<Pair<'a>>> {
    let names = |r: &Run| {
        r.status
            .variants
            .iter()
            .map(|v| v.name.clone())
            .collect::<Vec<_>>()
    };
    let (na, nb) = (names(a), names(b));
    if !na.is_empty() && na == nb {
        let pairs = (a.status.variants.iter().zip(&b.status.variants))
            .map(|(va, vb)| {
                (
                    format!("variant {}", va.name),
                    va.result.as_ref(),
                    vb.result.as_ref(),
                )
            })
            .collect();
        return Ok(pairs);
    }
    let run_result = |r: &'a Run| match (&r.status.result, r.has_variants()) {
        (Some(res), _) => Ok(res),
        (None, true) => bail!(
            "{} has variants ({}) the other run does not share and no run-level result",
            r.name,
            names(r).join(", ")
        ),
        (None, false) => bail!("{} has no results yet (phase {})", r.name, r.phase()),
    };
    Ok(vec![(
        "run".into(),
        Some(run_result(a)?),
        Some(run_result(b)?),
    )])
}

type Figure = (&'static str, fn(&RunResult) -> Option<f64>);

const FIGURES: [Figure; 10] = [
    ("deliveryRate (msg/s)", |r| r.delivery_rate),
    ("receiveRate (msg/s)", |r| Some(r.receive_rate)),
    ("publishRate (msg/s)", |r| Some(r.publish_rate)),
    ("deliveredRatio", |r| Some(r.delivered_ratio)),
    ("errors", |r| Some(r.errors as f64)),
    ("p50 (ms)", |r| r.latency.as_ref().map(|l| l.p50_ms)),
    ("p90 (ms)", |r| r.latency.as_ref().map(|l| l.p90_ms)),
    ("p99 (ms)", |r| r.latency.as_ref().map(|l| l.p99_ms)),
    ("p99.9 (ms)", |r| r.latency.as_ref().map(|l| l.p999_ms)),
    ("max (ms)", |r| r.latency.as_ref().map(|l| l.max_ms)),
];

fn table(a: Option<&RunResult>, b: Option<&RunResult>) -> String {
    let mut out = format!("  {:<22}{:>16}{:>16}{:>14}\n", "figure", "A", "B", "B/A");
    for (label, get) in FIGURES {
        let (va, vb) = (a.and_then(get), b.and_then(get));
        let show = |v: Option<f64>| v.map_or("unavailable".into(), |v| format!("{v}"));
        let ratio = match (va, vb) {
            (Some(x), Some(y)) if x != 0.0 => format!("{:.3}", y / x),
            (Some(_), Some(_)) => "n/a (A is 0)".into(),
            _ => "n/a".into(),
        };
        let _ = writeln!(
            out,
            "  {label:<22}{:>16}{:>16}{ratio:>14}",
            show(va),
            show(vb)
        );
    }
    out
}
