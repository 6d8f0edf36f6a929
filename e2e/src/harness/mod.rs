//! What every test stands on: its own namespace (created, deleted after a pass, kept with a
//! diagnostics dump after a failure), the msgbench kinds as the API server serves them, waits
//! with deadlines, and servers, runs and secrets read back. May touch: the API server only (a
//! test's namespaces and the objects in them, the operator Deployment's scale) and the
//! diagnostics under `$MSGBENCH_CACHE/e2e-artifacts`; never the host.
mod context;

pub mod certs;
pub mod diagnostics;
pub mod history;
pub mod kinds;
pub mod manifests;
pub mod nats_auth;
pub mod runs;
pub mod secrets;
pub mod servers;
pub mod wait;

pub use context::*;
