//! msgbench operator: one controller per server kind (JetStreamCluster, MqttBroker,
//! PubSubServer), each a validate -> build -> apply -> status pipeline.
#![forbid(unsafe_code)]

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
pub mod server;
