//! msgbench operator: one controller per server kind (JetStreamCluster, MqttBroker,
//! PubSubServer), each a validate -> build -> apply -> status pipeline.
#![forbid(unsafe_code)]

pub mod apply;
pub mod benchmark_run;
pub mod context;
pub mod control_key;
pub mod controllers;
pub mod error;
pub mod http_server;
pub mod leader;
pub mod merge_budget;
pub mod metrics;
pub mod pod_http;
pub mod rbac;
pub mod reconciler;
pub mod subset;
pub mod varz;
// The pure modules live in the core crate (no client, no runtime); their old paths stay.
pub use msgbench_operator_core::server::{
    jetstream, kind as server_kind, mqtt, pubsub, status, validate,
};
pub use msgbench_operator_core::{
    fault_agent_pod, meta, node_loss, operands, placement, pod_observer, quantity, security,
    server_pod, status_text, tuning,
};
