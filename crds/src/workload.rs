//! The workload: what a bench-runner does. Shared by `BenchmarkRun.spec.workload` and the
//! runner's standalone config file, so one type means one set of rules.
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Placeholder until the bench-runner issue fills it in.
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Workload {
    /// Payload size in bytes.
    pub payload_bytes: Option<u32>,
}
