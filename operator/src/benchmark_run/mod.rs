//! BenchmarkRun controller: resolve the target, start an Indexed Job of bench-runner agents,
//! release them together at a start barrier, collect their results over an authenticated
//! control endpoint (or checksummed frames in the pod logs), merge
//! exactly, and write results, verdict, trial statistics and the baseline comparison to status.
pub mod act;
mod act_faults;
pub mod build;
pub mod compare;
pub mod conditions;
pub mod controller;
pub mod decide;
pub mod endpoints;
pub mod fault_by_agent;
pub mod fault_effect;
pub mod fault_inject;
pub mod fault_restart;
pub mod faults;
#[cfg(test)]
mod figures_tests;
pub mod gather;
pub mod identity;
pub mod metrics;
pub mod observe;
pub mod paired;
pub mod reconcile;
pub mod results;
pub mod runner_access;
pub mod runner_failure;
pub mod runner_http;
pub mod runner_pods;
pub mod server_usage;
pub mod stats;
pub mod stop_runners;
pub mod target;
pub mod target_auth;
pub mod target_lock;
pub mod timing;
pub mod variant_results;
pub mod variants;
