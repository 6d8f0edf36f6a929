//! msgbench API types: group `msgbench.dev`, version `v1alpha1`. Types only, no client code.
#![forbid(unsafe_code)]
// kube's `printcolumn(type_ = ...)` repeats keys across columns by design; clippy reads them as duplicates.
#![allow(clippy::duplicated_attributes)]

pub mod benchmark_run;
mod benchmark_run_status;
pub mod common;
pub mod conditions;
pub mod endpoint;
mod fault;
pub mod jetstream_cluster;
pub mod mqtt_broker;
pub mod names;
pub mod pod_customization;
pub mod pubsub_server;
mod run_failure_reason;
pub mod server_usage;
mod stop_when;
mod variant;
mod variant_status;
pub mod workload;

pub use benchmark_run::{BenchmarkRun, BenchmarkRunSpec, BenchmarkRunStatus};
pub use common::{Placement, Resources, ServerStatus, Sysctl, Tuning};
pub use jetstream_cluster::{JetStreamCluster, JetStreamClusterSpec};
pub use mqtt_broker::{MqttBroker, MqttBrokerSpec};
pub use pod_customization::{PodCustomization, PullSecret};
pub use pubsub_server::{PubSubServer, PubSubServerSpec};
pub use run_failure_reason::{RunFailureReason, UnknownFailureReason};

/// API group of every msgbench kind.
pub const GROUP: &str = "msgbench.dev";
/// API version of every msgbench kind.
pub const VERSION: &str = "v1alpha1";
