//! The client half of `spec.faults`: `observe` reads what `decide` needs to choose a pod and to
//! settle what was done (`pods`, `leader`, `evidence`), `act` carries out the faults whose pods
//! are recorded in status, by deletion or through the pod's fault agent (`agent`). The pure half
//! is `msgbench_operator_core::run::faults`.
pub mod act;
pub mod agent;
pub mod evidence;
pub mod leader;
pub mod observe;
pub mod pods;
