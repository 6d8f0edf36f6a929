//! End-to-end harness for msgbench: a kube client from the contract kubeconfig, the chart installed
//! once per run, one fresh namespace per test, condition waits with timeouts, and a diagnostics dump
//! (events, pod descriptions, logs — also the operator's) whenever a test fails.
#![forbid(unsafe_code)]

pub mod chart;
pub mod cluster;
pub mod diagnostics;
pub mod harness;
pub mod kinds;
pub mod node;
pub mod probe;
pub mod procfs;
pub mod servers;
pub mod toolbox;
pub mod wait;

pub use harness::{run, TestContext};
