//! The contract between the msgbench operator and bench-runner: what the operator's ConfigMap
//! tells a runner, the bodies of the runner's control endpoint, the result record with its
//! exact merge, the framed log fallback, the termination message and the target URL as both
//! sides read it. Anything here is wire format: change it only compatibly.
#![forbid(unsafe_code)]

pub mod agent;
pub mod coarse;
pub mod control_auth;
pub mod fault_agent;
pub mod histo;
pub mod kept;
pub mod result;
pub mod result_frames;
pub mod status_form;
pub mod target;
pub mod target_access;
pub mod termination;
#[cfg(any(test, feature = "testing"))]
pub mod testing;
