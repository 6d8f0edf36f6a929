//! `spec.faults`, from plan to outcome, pure: which executions each trial gets and when they are
//! due (`policy`), which pod each hits (`policy::choose`, written to status before anything is
//! done to it), what the fault agent is asked and what its answers settle (`request`), what a
//! lost report leaves to evidence (`unknown`), a crashed server's restart (`restart`) and what
//! each fault did to delivery (`effect`). `agent_pod` is the agent container servers carry.
//! The operator's `benchmark_run::faults` reads the pods and carries the faults out.
pub mod agent_pod;
pub mod effect;
pub mod policy;
pub mod request;
pub mod restart;
pub mod settle;
pub mod unknown;
