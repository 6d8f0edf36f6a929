//! Server CPU and memory during a BenchmarkRun, sampled by the operator from each server's own
//! monitoring endpoint (nats `/varz`, pubsub-server `/health`). Sampling state lives here, in
//! status, so an operator restart continues the same accumulation instead of starting over.
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Most server pods summarized.
pub const MAX_SERVER_PODS: usize = 16;

/// Resource use of the target's server pods from the barrier release to the end of the run
/// (warm-up and settle pauses between trials included).
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ServerUsage {
    /// Mean CPU cores of all server pods together (sum of the pods' time-weighted means).
    pub cpu_cores_mean: f64,
    /// Peak CPU cores of all server pods together at one sampling instant.
    pub cpu_cores_max: f64,
    /// Peak resident memory of all server pods together at one sampling instant, bytes.
    pub memory_bytes_max: u64,
    /// Resident memory of all server pods before the barrier released the runners, bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_bytes_baseline: Option<u64>,
    /// (peak − baseline memory) / connections opened, for connection workloads, bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_bytes_per_connection: Option<f64>,
    /// Sampling instants that reached at least one pod.
    #[serde(default)]
    pub samples: u32,
    /// Where the figures come from, e.g. `nats /varz`, `pubsub-server /health`, or `none`.
    pub source: String,
    /// Why there are no figures (e.g. mosquitto has no HTTP monitoring endpoint).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unavailable: Option<String>,
    /// One row per server pod.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 16))]
    pub pods: Vec<PodUsage>,
}

/// One server pod's resource use; the last three fields are the sampler's running state.
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct PodUsage {
    /// Pod name.
    pub pod: String,
    /// Samples taken while the load ran.
    pub samples: u32,
    /// Time-weighted mean CPU cores.
    pub cpu_cores_mean: f64,
    /// Highest CPU cores in one sample.
    pub cpu_cores_max: f64,
    /// Resident memory before the barrier released the runners, bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_bytes_baseline: Option<u64>,
    /// Highest resident memory, bytes.
    pub memory_bytes_max: u64,
    /// Client connections before the barrier release, as the server counts them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub connections_baseline: Option<u64>,
    /// Most client connections seen, as the server counts them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub connections_max: Option<u64>,
    /// CPU core-seconds accumulated over `sampledSeconds`.
    #[serde(default)]
    pub cpu_core_seconds: f64,
    /// Seconds covered by the CPU samples.
    #[serde(default)]
    pub sampled_seconds: f64,
    /// Time of the last sample, ms since the epoch.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_sample_ms: Option<i64>,
    /// Process CPU seconds at the last sample, when the server reports a counter.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_cpu_seconds: Option<f64>,
}
