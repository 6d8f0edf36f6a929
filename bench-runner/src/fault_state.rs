//! `GET /faults/state`: the traces a fault leaves that outlive the agent's memory, so the
//! operator can confirm a fault whose report was lost (the agent restarted after acting): its
//! nftables table in place now, the server process stopped now, and what this agent undid when
//! it started (a partition table, a stopped server: an earlier agent's fault whose timer died
//! with it). Same credential as `POST /faults`.
use crate::control_check::{refusal, ControlRequest};
use crate::fault_agent::{find_process, send, unix_ms, FaultAgent};
use axum::extract::State;
use axum::http::{HeaderMap, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::Json;
use runner_api::fault_agent::AgentState;
use std::path::Path;
use std::sync::Arc;

/// What this agent undid at its start (unix ms, its clock).
#[derive(Clone, Copy, Debug, Default)]
pub struct Leftovers {
    pub partition_removed_unix_ms: Option<u64>,
    pub pause_resumed_unix_ms: Option<u64>,
}

pub(crate) async fn state(
    State(a): State<Arc<FaultAgent>>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
) -> Response {
    let control = ControlRequest {
        method: &method,
        uri: &uri,
        headers: &headers,
    };
    if let Some(r) = refusal(a.auth_ref(), control, "this server") {
        return r;
    }
    let partition_table = match a.net() {
        None => None,
        Some(net) => match net.nft.present().await {
            Ok(present) => Some(present),
            Err(e) => return (StatusCode::INTERNAL_SERVER_ERROR, format!("{e}\n")).into_response(),
        },
    };
    let (name, root) = a.process();
    let server_stopped = (find_process(root, name).ok()).and_then(|pid| stopped(root, pid));
    let left = *a.leftovers.lock().unwrap_or_else(|p| p.into_inner());
    Json(AgentState {
        started_unix_ms: a.started_unix_ms,
        partition_table,
        leftover_partition_removed_unix_ms: left.partition_removed_unix_ms,
        server_stopped,
        leftover_pause_resumed_unix_ms: left.pause_resumed_unix_ms,
    })
    .into_response()
}

/// Whether `pid` is stopped by a signal (state `T` in `/proc/<pid>/stat`; the state follows the
/// command name, which may hold spaces and parentheses, so it is read after the last `) `).
pub fn stopped(proc_root: &Path, pid: i32) -> Option<bool> {
    let stat = std::fs::read_to_string(proc_root.join(pid.to_string()).join("stat")).ok()?;
    let state = stat.rsplit_once(") ")?.1.chars().next()?;
    Some(state == 'T')
}

/// At the agent's start: a server left stopped is an earlier agent's pause whose SIGCONT timer
/// died with it. It is resumed now (a pause never outlives its agent by more than a restart),
/// and the time kept as that pause's trace.
pub fn resume_leftover(a: &FaultAgent) {
    let (name, root) = a.process();
    let Ok(pid) = find_process(root, name) else {
        return;
    };
    if stopped(root, pid) != Some(true) {
        return;
    }
    match send(pid, rustix::process::Signal::CONT) {
        Ok(()) => {
            tracing::warn!(pid, process = %name, "resumed a server an earlier agent left stopped");
            let mut left = a.leftovers.lock().unwrap_or_else(|p| p.into_inner());
            left.pause_resumed_unix_ms = Some(unix_ms());
        }
        Err(e) => {
            tracing::error!(pid, process = %name, error = %e, "SIGCONT of a leftover pause failed")
        }
    }
}
