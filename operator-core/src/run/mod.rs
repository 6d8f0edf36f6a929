//! The BenchmarkRun core: `decide` maps (run, status, `model::Observed`) to the next status,
//! the effects the operator carries out, and when to look again. Every module here is pure; the
//! operator's `benchmark_run` holds the client half (observe, act, the controller).
//! May: compute from its arguments. May not: read a clock, the network, files or the API
//! server (the crate links no client or runtime; `make lint` checks).
pub mod conditions;
pub mod decide;
pub mod faults;
pub mod identity;
pub mod model;
pub mod results;
pub mod retention;
pub mod runners;
pub mod target;
pub mod timing;
pub mod variants;
