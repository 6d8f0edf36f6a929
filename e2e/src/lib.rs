//! End-to-end harness for msgbench: a kube client from the contract kubeconfig, the chart installed
//! before the tests (`cluster::chart`), one fresh namespace per test, condition waits with timeouts, and a diagnostics dump
//! (events, pod descriptions, logs — also the operator's) whenever a test fails.
//!
//! Run with `make e2e` (cluster up, images, then the one test binary, `tests/e2e`, through
//! cargo-nextest: e2e/README.md, "The suite").
//! Environment: what the Makefile exports from `e2e/contract.env` (`cluster::exported`);
//! `KUBECONFIG` (else the contract's `CLUSTER_KUBECONFIG`);
//! `MSGBENCH_E2E_SKIP_INSTALL=1` tests an operator that is already running (e.g. `cargo run` on the
//! host); `MSGBENCH_E2E_OPERATOR_TAG=<tag>` installs another operator image tag. A failed test keeps
//! its namespace and writes its diagnostics to `$MSGBENCH_CACHE/e2e-artifacts/<namespace>/`.
#![forbid(unsafe_code)]

pub mod cluster;
pub mod fixtures;
pub mod harness;
pub mod probes;

// The flat paths the tests import (`msgbench_e2e::kinds`, `msgbench_e2e::wait`, ...) stay, so
// the folders cost the tests (and branches changing them) no import churn.
pub use cluster::{chart, node, nodes, operator_lease, registry};
pub use fixtures::scenarios;
pub use harness::{
    certs, diagnostics, history, kinds, manifests, nats_auth, runs, secrets, servers, wait,
};
pub use probes::{cpu_hog, fault_watch, kstatus, natsprobe, partition, probe, procfs, toolbox};

pub use harness::{run, TestContext};
