//! msgbench operator, the client half of the controllers (the pure half is
//! `msgbench_operator_core`): `server` reconciles the server kinds (JetStreamCluster, MqttBroker,
//! PubSubServer), `benchmark_run` runs BenchmarkRuns, `access` is what the operator may do on the
//! API server and how it reaches pods, `runtime` is the process around them (context, leader
//! election, metrics).
#![forbid(unsafe_code)]

pub mod access;
pub mod benchmark_run;
pub mod runtime;
pub mod server;
