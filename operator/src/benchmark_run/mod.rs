//! BenchmarkRun controller: resolve the target, start an Indexed Job of bench-runner agents,
//! release them together at a start barrier, collect their results over an authenticated
//! control endpoint (or checksummed frames in the pod logs), merge
//! exactly, and write results, verdict, trial statistics and the baseline comparison to status.
//!
//! This folder is the client half: it may read and write the API server, runner and fault
//! agents and server pods. It may not decide: what a pass does next is
//! `msgbench_operator_core::run::decide`'s (observe fills `model::Observed`, act carries out
//! `Effect`s and reports `EffectOutcome`s, which `decide::settle` folds into status).
pub mod act;
pub mod controller;
pub mod events;
pub mod faults;
pub mod metrics;
pub mod observe;
pub mod reconcile;
pub mod retention;
pub mod runners;
pub mod target;
