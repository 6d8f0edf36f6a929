//! `spec.stopWhen`: end a multi-round run once its answer is decisive, and `status.stop`, what
//! was decided. Not `workload.stages.stopWhen`, which ends a step or ramp load at a breaking stage
//! inside one trial; this one ends the run between rounds.
use kube::KubeSchema;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Stop before `trials` rounds once the 95 % interval is narrow enough. With `variants`: every
/// variant's paired ratio to the baseline variant on `figure` (the geometric mean of the
/// per-round ratios, as in `status.variantComparison`); without: the mean of `figure` over
/// trials. Checked when the runners wait for the next round, from round `minRounds` on;
/// `trials` becomes the most rounds that run.
#[derive(Clone, Debug, KubeSchema, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
#[x_kube(validation = Rule::new("self.intervalWithinPercent > 0.0").message("stopWhen.intervalWithinPercent: must be greater than 0 (and at most 100)").field_path(".intervalWithinPercent"))]
pub struct RunStopWhen {
    /// Stop once every interval lies within ±this percent of its estimate (its larger half
    /// width, as a percent of the estimate). Greater than 0, at most 100.
    #[schemars(range(min = 0.0, max = 100.0))]
    pub interval_within_percent: f64,
    /// The throughput figure whose interval decides.
    #[serde(default)]
    pub figure: StopFigure,
    /// Never stop before this many rounds (at least 2: one round has no interval; at most
    /// `trials`).
    #[serde(default = "default_min_rounds")]
    #[schemars(range(min = 2, max = 20))]
    pub min_rounds: i32,
}

fn default_min_rounds() -> i32 {
    3
}

/// A paired throughput figure (the names of `status.variantComparison.figures[].figure`).
#[derive(Clone, Copy, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub enum StopFigure {
    /// Unique deliveries/s over the end-to-end window (the headline).
    #[default]
    DeliveryRate,
    /// Received messages/s over the receive window.
    ReceiveRate,
    /// Published messages/s.
    PublishRate,
}

impl StopFigure {
    /// The name used in status and in `variantComparison`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::DeliveryRate => "deliveryRate",
            Self::ReceiveRate => "receiveRate",
            Self::PublishRate => "publishRate",
        }
    }
}

/// Why the run stopped taking rounds.
#[derive(Clone, Copy, Debug, Deserialize, Serialize, JsonSchema, PartialEq, Eq)]
pub enum StopReason {
    /// Every interval was within `intervalWithinPercent`: the run stopped there.
    IntervalReached,
    /// `trials` rounds ran and the interval was NOT within `intervalWithinPercent`.
    MaxRounds,
}

/// What `spec.stopWhen` decided. Written at each check (before the runners hear of a stop,
/// so a restarted operator acts on the same decision) and once more with the verdict.
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct StopStatus {
    /// Rounds the last check covered; once `reason` is set, the rounds that ran.
    pub rounds: i32,
    /// `spec.trials`: the most rounds that may run.
    pub max_rounds: i32,
    /// `spec.stopWhen.figure`.
    pub figure: StopFigure,
    /// `spec.stopWhen.intervalWithinPercent`.
    pub target_percent: f64,
    /// The widest interval at the last check, ± percent of its estimate (absent when no
    /// interval could be computed, e.g. a round without the figure).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interval_percent: Option<f64>,
    /// Unset while rounds continue.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<StopReason>,
    /// The check in words, e.g. `after 4 of 20 rounds: r2/r1 deliveryRate ±3.1 % (target ±5 %)`.
    #[schemars(length(max = 1024))]
    pub message: String,
}
