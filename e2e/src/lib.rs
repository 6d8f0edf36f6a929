//! End-to-end harness for msgbench: a kube client from the contract kubeconfig, the chart installed
//! once per run, one fresh namespace per test, condition waits with timeouts, and a diagnostics dump
//! (events, pod descriptions, logs — also the operator's) whenever a test fails.
//!
//! Run with `make e2e` (cluster up, images, then `cargo test -p msgbench-e2e -- --test-threads=1`).
//! Environment: `KUBECONFIG` (else `${MSGBENCH_CACHE:-~/.cache/msgbench}/kubeconfig-${CLUSTER:-local}`);
//! `MSGBENCH_E2E_SKIP_INSTALL=1` tests an operator that is already running (e.g. `cargo run` on the
//! host); `MSGBENCH_E2E_OPERATOR_TAG=<tag>` installs another operator image tag. A failed test keeps
//! its namespace and writes its diagnostics to `$MSGBENCH_CACHE/e2e-artifacts/<namespace>/`.
#![forbid(unsafe_code)]

pub mod chart;
pub mod cluster;
pub mod cpu_hog;
pub mod diagnostics;
pub mod fault_watch;
pub mod harness;
pub mod kinds;
pub mod natsprobe;
pub mod node;
pub mod nodes;
pub mod operator_lease;
pub mod partition;
pub mod probe;
pub mod procfs;
pub mod registry;
pub mod runs;
pub mod scenarios;
pub mod secrets;
pub mod servers;
pub mod toolbox;
pub mod wait;

pub use harness::{run, TestContext};
