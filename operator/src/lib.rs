//! msgbench operator: one controller per server kind (JetStreamCluster, MqttBroker,
//! PubSubServer), each a validate -> build -> apply -> status pipeline.
#![forbid(unsafe_code)]

pub mod apply;
pub mod benchmark_run;
pub mod context;
pub mod control_key;
pub mod controllers;
pub mod error;
pub mod fault_agent_pod;
pub mod http_server;
pub mod jetstream;
pub mod leader;
pub mod merge_budget;
pub mod meta;
pub mod metrics;
pub mod mqtt;
pub mod node_loss;
pub mod operands;
pub mod placement;
pub mod pod_http;
pub mod pod_observer;
pub mod pubsub;
pub mod quantity;
pub mod rbac;
pub mod reconciler;
pub mod security;
pub mod server_kind;
pub mod server_pod;
pub mod status;
pub mod status_text;
pub mod subset;
pub mod tuning;
pub mod validate;
pub mod varz;
