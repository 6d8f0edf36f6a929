//! The BenchmarkRun core: `decide` maps (run, status, `model::Observed`) to the next status,
//! the effects the operator carries out, and when to look again. Every module here is pure; the
//! operator's `benchmark_run` holds the client half (observe, act, the controller).
//! May: compute from its arguments. May not: read a clock, the network, files or the API
//! server (the crate links no client or runtime; `make lint` checks).
pub mod build;
pub mod compare;
pub mod conditions;
pub mod decide;
pub mod endpoint_readiness;
pub mod faults;
#[cfg(test)]
mod figures_tests;
pub mod identity;
pub mod model;
pub mod paired;
pub mod results;
pub mod retention;
pub mod runner_access;
pub mod runner_failure;
pub mod runner_pods;
pub mod runner_records;
pub mod server_restarts;
pub mod server_usage;
pub mod shared_names;
pub mod stats;
#[cfg(any(test, feature = "status-fixtures"))]
#[cfg_attr(not(test), allow(dead_code))]
pub mod status_size;
pub mod stop_runners;
pub mod stop_when;
pub mod stream_sweep;
pub mod target_auth;
pub mod target_lock;
pub mod timing;
pub mod variant_results;
pub mod variants;
