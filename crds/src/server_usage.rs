//! Server CPU and memory during a BenchmarkRun, sampled by the operator from each server's own
//! monitoring endpoint (nats `/varz`, pubsub-server `/health`, mosquitto `$SYS`). Sampling state lives here, in
//! status, so an operator restart continues the same accumulation instead of starting over.
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Most server pods summarized.
pub const MAX_SERVER_PODS: usize = 16;
/// Most (connections, memory) points kept for the memory-per-connection fit; beyond it every
/// other point is dropped and only every other later sample is kept (even thinning).
pub const MAX_MEMORY_POINTS: usize = 64;

/// Resource use of the target's server pods from the barrier release to the end of the run
/// (warm-up and settle pauses between trials included).
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ServerUsage {
    /// Mean CPU cores of all server pods together (sum of the pods' time-weighted means).
    /// Absent when the server reports no CPU (`cpuUnavailable` says why) or no interval was
    /// sampled yet.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_cores_mean: Option<f64>,
    /// Peak CPU cores of all server pods together at one sampling instant.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_cores_max: Option<f64>,
    /// Why there is no CPU figure (e.g. mosquitto's `$SYS` tree has none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_unavailable: Option<String>,
    /// Peak resident memory of all server pods together at one sampling instant, bytes
    /// (mosquitto: heap bytes in use, from `$SYS/broker/heap/current`). Absent when no server
    /// was sampled (`unavailable` says why): never a 0 standing for "unknown".
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_bytes_max: Option<u64>,
    /// Resident memory of all server pods before the barrier released the runners, bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_bytes_baseline: Option<u64>,
    /// Memory per connection, for connection workloads, bytes: the slope of a least-squares
    /// fit of all server pods' memory on their connection count. Absent when
    /// `memoryPerConnectionFit.unavailable` says why.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_bytes_per_connection: Option<f64>,
    /// How `memoryBytesPerConnection` was fitted (quality, points), or why it is unavailable.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_per_connection_fit: Option<MemoryFit>,
    /// (connections, memory) of all server pods together at sampling instants while the
    /// connection count rose or held, oldest first; the fit's input.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 64))]
    pub memory_points: Vec<MemoryPoint>,
    /// Sampler state: a sample becomes a point when its number is a multiple of this (doubles
    /// each time the points are thinned).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_point_stride: Option<u32>,
    /// Sampling instants that reached at least one pod.
    #[serde(default)]
    pub samples: u32,
    /// Where the figures come from, e.g. `nats /varz`, `pubsub-server /health`, or `none`.
    pub source: String,
    /// Why there are no figures (e.g. mosquitto has no HTTP monitoring endpoint).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unavailable: Option<String>,
    /// One row per server pod (an endpoint target: per monitoring URL, named by its host and
    /// port).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 16))]
    pub pods: Vec<PodUsage>,
    /// Servers that did not answer a sample, with the latest error (the first 4 servers to
    /// fail): their figures leave out those samples, and a server that never answered has no
    /// row in `pods`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 4))]
    pub read_errors: Vec<ServerReadError>,
}

/// Most servers listed in `readErrors`.
pub const MAX_READ_ERRORS: usize = 4;
/// Longest error kept in a [`ServerReadError`], bytes.
pub const MAX_READ_ERROR: usize = 128;
/// Longest server version kept, bytes (nats reports e.g. `2.10.22`).
pub const MAX_SERVER_VERSION: usize = 32;

/// A server whose monitoring endpoint did not answer one or more samples.
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ServerReadError {
    /// Pod name, or an endpoint's monitoring host and port.
    pub pod: String,
    /// Samples it did not answer.
    pub failures: u32,
    /// The latest error, e.g. `no answer within 2s` or `answered 404 Not Found` (an
    /// endpoint's server was read at `http://<pod>/varz`).
    pub error: String,
    /// Time of the latest failure, ms since the epoch (the sampling schedule counts it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_failed_ms: Option<i64>,
}

/// One server pod's resource use; the last three fields are the sampler's running state.
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct PodUsage {
    /// Pod name, or an endpoint's monitoring host and port.
    pub pod: String,
    /// The server's version as it reports it (nats `/varz` `version`), at its latest sample.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// Samples taken while the load ran.
    pub samples: u32,
    /// Time-weighted mean CPU cores (absent when the server reports no CPU).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_cores_mean: Option<f64>,
    /// Highest CPU cores in one sample.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_cores_max: Option<f64>,
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

/// All server pods' connections (as the servers count them) and resident memory at one
/// sampling instant.
#[derive(Clone, Copy, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct MemoryPoint {
    /// Client connections, summed over the server pods.
    pub connections: u64,
    /// Resident memory, summed over the server pods, bytes.
    pub memory_bytes: u64,
}

/// Ordinary least-squares fit of memory on connections. The slope is reported only when it
/// is positive, its 95 % interval excludes 0, the points span at least 3 connection levels and
/// R² reaches the threshold; otherwise `unavailable` says which failed.
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct MemoryFit {
    /// Points fitted.
    pub points: u32,
    /// Distinct connection counts among the points.
    pub levels: u32,
    /// Fitted bytes per connection (also when rejected, to show why), bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slope: Option<f64>,
    /// Standard error of the slope, bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slope_std_error: Option<f64>,
    /// 95 % interval of the slope (Student t, points − 2 degrees of freedom), bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ci95_low: Option<f64>,
    /// Upper end of that interval, bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ci95_high: Option<f64>,
    /// Share of the memory's variance the fit explains (0–1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub r_squared: Option<f64>,
    /// Fitted memory at zero connections, bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub intercept_bytes: Option<f64>,
    /// Least R² accepted.
    pub min_r_squared: f64,
    /// Why the slope is not reported as memory per connection.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unavailable: Option<String>,
}
