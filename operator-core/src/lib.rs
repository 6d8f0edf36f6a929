//! The operator's pure core. Everything here is a function of its arguments: no Kubernetes
//! client, no clock, no async runtime, no I/O (the crate does not link them; `make lint` checks).
//! The operator (`msgbench-operator`) observes, asks this crate what to do, and acts.
//!
//! - `run`: the BenchmarkRun state machine: `model` (what a pass read), `decide` (the next
//!   status and effects), the policies it applies and the children it builds.
//! - the rest: pod builders and readings shared with the server controllers (labels, operand
//!   defaults, placement, security contexts, tuning, quantities, plain status text).
#![forbid(unsafe_code)]
pub mod fault_policy;
pub mod meta;
pub mod node_loss;
pub mod operands;
pub mod placement;
pub mod pod_observer;
pub mod quantity;
pub mod run;
pub mod security;
pub mod server;
pub mod server_pod;
pub mod status_text;
pub mod tuning;
