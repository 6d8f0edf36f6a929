//! The traces a fault leaves that outlive the agent's memory, which `GET /faults/state`
//! (`fault_agent`) shows so the operator can confirm a fault whose report was lost (the agent
//! restarted after acting): the server process stopped now, and what this agent undid when it
//! started (a partition table, a stopped server: an earlier agent's fault whose timer died
//! with it).
use crate::fault_process::{find_process, send, stopped, unix_ms};
use std::path::Path;
use std::sync::Mutex;

/// What this agent undid at its start (unix ms, its clock).
#[derive(Clone, Copy, Debug, Default)]
pub struct Leftovers {
    pub partition_removed_unix_ms: Option<u64>,
    pub pause_resumed_unix_ms: Option<u64>,
}

/// Whether the server process `name` is stopped now; `None` when it cannot be told (no such
/// process, or its state unreadable).
pub fn server_stopped(proc_root: &Path, name: &str) -> Option<bool> {
    (find_process(proc_root, name).ok()).and_then(|pid| stopped(proc_root, pid))
}

/// At the agent's start: a server left stopped is an earlier agent's pause whose SIGCONT timer
/// died with it. It is resumed now (a pause never outlives its agent by more than a restart),
/// and the time kept as that pause's trace in `leftovers`.
pub fn resume_leftover(proc_root: &Path, name: &str, leftovers: &Mutex<Leftovers>) {
    let Ok(pid) = find_process(proc_root, name) else {
        return;
    };
    if stopped(proc_root, pid) != Some(true) {
        return;
    }
    match send(pid, rustix::process::Signal::CONT) {
        Ok(()) => {
            tracing::warn!(pid, process = %name, "resumed a server an earlier agent left stopped");
            let mut left = leftovers.lock().unwrap_or_else(|p| p.into_inner());
            left.pause_resumed_unix_ms = Some(unix_ms());
        }
        Err(e) => {
            tracing::error!(pid, process = %name, error = %e, "SIGCONT of a leftover pause failed")
        }
    }
}
