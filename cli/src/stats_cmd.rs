//! `kubectl msgbench stats paired`: the operator's paired statistics (operator-core
//! `run::results::paired`) for the bench scripts' tables (bench/paired.py), so both use one
//! implementation. Input: a JSON list of comparisons `{"ours": [..], "theirs": [..]}`, the
//! lists aligned by repeat, a number or null each. Output: one JSON object per comparison, in
//! order, one a line, at full precision (the status rounds to 3 decimals; the tables print
//! small values to two significant digits).
use anyhow::{Context, Result};
use msgbench_operator_core::run::results::paired::{
    difference_unrounded, ratio_unrounded, Unrounded,
};
use serde::{Deserialize, Serialize};

#[derive(Clone, Copy, Debug, clap::ValueEnum)]
pub enum Kind {
    /// ours ÷ theirs: geometric mean, 95 % Student-t interval on the logs. A repeat where
    /// either is null or ≤ 0 is skipped (no ratio exists).
    Ratio,
    /// ours − theirs: mean, 95 % Student-t interval. A repeat where either is null is skipped.
    Difference,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Comparison {
    pub ours: Vec<Option<f64>>,
    pub theirs: Vec<Option<f64>>,
}

/// One comparison's result; null where undefined: everything without a repeat, the interval
/// below 2 repeats.
#[derive(Debug, PartialEq, Serialize)]
pub struct Paired {
    pub n: usize,
    pub estimate: Option<f64>,
    pub low: Option<f64>,
    pub high: Option<f64>,
    pub min: Option<f64>,
    pub max: Option<f64>,
}

impl From<Option<Unrounded>> for Paired {
    fn from(u: Option<Unrounded>) -> Self {
        Paired {
            n: u.as_ref().map_or(0, |u| u.n),
            estimate: u.as_ref().map(|u| u.estimate),
            low: u.as_ref().and_then(|u| u.ci95.map(|c| c.0)),
            high: u.as_ref().and_then(|u| u.ci95.map(|c| c.1)),
            min: u.as_ref().map(|u| u.min),
            max: u.as_ref().map(|u| u.max),
        }
    }
}

/// Repeats as zip pairs them (a longer list's tail is ignored), those with both values.
pub fn paired(kind: Kind, c: &Comparison) -> Paired {
    let (theirs, ours): (Vec<f64>, Vec<f64>) = c
        .theirs
        .iter()
        .zip(&c.ours)
        .filter_map(|(t, o)| Some(((*t)?, (*o)?)))
        .unzip();
    // operator-core's baseline is theirs, its variant ours.
    match kind {
        Kind::Ratio => ratio_unrounded(&theirs, &ours),
        Kind::Difference => difference_unrounded(&theirs, &ours),
    }
    .into()
}

/// The command: `input` (stdin's JSON) → output lines.
pub fn run(kind: Kind, input: &str) -> Result<String> {
    let comparisons: Vec<Comparison> = serde_json::from_str(input)
        .context("reading stdin: want a JSON list of {\"ours\": [..], \"theirs\": [..]}")?;
    let mut out = String::new();
    for c in &comparisons {
        out += &serde_json::to_string(&paired(kind, c))?;
        out.push('\n');
    }
    Ok(out)
}
