//! bench-runner: an open-loop load generator for NATS, JetStream, MQTT, Socket.IO and WebSocket
//! whose latency is measured from the intended send time into HdrHistograms that merge exactly.
#![forbid(unsafe_code)]

pub mod acks;
pub mod agent;
pub mod clock;
pub mod connect;
pub mod connections;
pub mod control_check;
pub mod cpu;
mod drain_counts;
pub mod drivers;
pub mod engine;
pub mod fault_agent;
pub mod fault_net;
pub mod fault_power;
pub mod fault_process;
pub mod fault_state;
pub mod kept;
pub mod live_metrics;
pub mod net;
pub mod options;
pub mod payload;
pub mod plan;
pub mod progress;
pub mod recorder;
pub mod refusal;
pub mod report;
pub mod stream_sweep;
pub mod termination;
pub mod tls;

pub use engine::run;
pub use options::{ClientPath, RunOptions, SharedSetup, StartGate};
