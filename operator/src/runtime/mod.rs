//! The process around the controllers: the shared context (client, recorder, readiness, the
//! results memory budget), what every controller's wiring shares (`watch`), leader election and
//! its terms (controllers started and stopped with leadership),
//! `/metrics` and health endpoints, the reconcile error type. It may talk to the API server (the
//! Lease, the watches); it holds no policy of a kind or a run: what to reconcile is `server`'s
//! and `benchmark_run`'s.
pub mod context;
pub mod error;
pub mod http_server;
pub mod leader;
pub mod merge_budget;
pub mod metrics;
pub mod terms;
pub mod watch;

/// Name used for SSA field ownership, events and logs. Here, not in `context`, because `access`
/// and `server` sign and apply with it, and `context` builds on them.
pub const CONTROLLER_NAME: &str = "msgbench-operator";

/// The wall clock: a reconcile pass reads it once, in observe (`Observed::now`).
pub fn now() -> k8s_openapi::apimachinery::pkg::apis::meta::v1::Time {
    k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(k8s_openapi::jiff::Timestamp::now())
}
