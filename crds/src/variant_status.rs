//! Status of a run with `spec.variants`: the recorded schedule, each variant's result and the
//! paired comparison against the baseline variant.
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::benchmark_run_status::{Headline, RunResult, TrialFigures, TrialStatistics};

/// One round: every variant once, in this order.
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ScheduledRound {
    /// Round number, 1-based.
    pub round: i32,
    /// Variant names in the order they ran.
    #[schemars(length(max = 6))]
    pub order: Vec<String>,
}

/// One variant's outcome.
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct VariantResult {
    /// Variant name.
    pub name: String,
    /// `<Kind>/<name>` of its server or its endpoint URL.
    pub target: String,
    /// Its headline figures (mean over rounds).
    pub headline: Headline,
    /// Merged over runners and rounds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<RunResult>,
    /// Its figures per round (`trial` = round, `position` = place in the round's order).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 20))]
    pub trials: Vec<TrialFigures>,
    /// Mean and 95 % interval over rounds (2 or more rounds).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub statistics: Option<TrialStatistics>,
}

/// Every variant against the baseline variant.
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct VariantComparison {
    /// The baseline variant.
    pub baseline: String,
    /// Rounds paired (every round ran every variant).
    pub rounds: i32,
    /// How the figures were computed.
    pub method: String,
    /// One row per (variant, figure).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 40))]
    pub figures: Vec<PairedFigure>,
}

/// One figure of one variant against the baseline, from per-round pairs.
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct PairedFigure {
    /// The variant compared.
    pub variant: String,
    /// `deliveryRate`, `receiveRate`, `publishRate`, `p50Ms` or `p99Ms`.
    pub figure: String,
    /// Baseline's mean over rounds.
    pub baseline: f64,
    /// This variant's mean over rounds.
    pub current: f64,
    /// variant ÷ baseline: geometric mean of the per-round ratios, with its 95 % interval.
    pub ratio: PairedEstimate,
    /// variant − baseline: mean of the per-round differences, with its 95 % interval.
    pub difference: PairedEstimate,
    /// From the interval: Better or Worse when it excludes "no change" (ratio 1, difference 0),
    /// NoSignificantDifference otherwise, InsufficientRounds with fewer than 2 rounds.
    pub verdict: ComparisonVerdict,
}

/// A paired estimate; the interval is absent with fewer than 2 rounds.
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct PairedEstimate {
    /// Point estimate.
    pub estimate: f64,
    /// Lower bound of the 95 % interval (Student t over rounds).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ci95_low: Option<f64>,
    /// Upper bound of the 95 % interval.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ci95_high: Option<f64>,
}

/// What a paired comparison says.
#[derive(Clone, Copy, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq, Eq)]
pub enum ComparisonVerdict {
    /// Higher throughput or lower latency, beyond the noise.
    Better,
    /// Lower throughput or higher latency, beyond the noise.
    Worse,
    /// The interval includes "no change".
    NoSignificantDifference,
    /// Fewer than 2 rounds: no interval.
    #[default]
    InsufficientRounds,
}
