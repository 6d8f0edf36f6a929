//! msgbench operator: one controller per server kind (JetStreamCluster, MqttBroker,
//! PubSubServer), each a validate -> build -> apply -> status pipeline.
#![forbid(unsafe_code)]

pub mod benchmark_run;
pub mod control_key;
pub mod pod_http;
pub mod rbac;
pub mod runtime;
pub mod server;
