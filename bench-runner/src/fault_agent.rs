//! The fault agent (`bench-runner fault-agent`): a container in a server pod that shares the
//! pod's process namespace and, when the operator asks, sends the server process a signal. A
//! `crash` is SIGKILL: no signal handler, no preStop hook, no lame duck mode; the kubelet then
//! restarts the container in place. A `pause` is SIGSTOP, and SIGCONT after its duration, sent
//! by the agent itself whatever happens to the operator. It runs as the server's user, so it
//! needs no capability.
//!
//! Only credentials the operator signed for this server object are obeyed
//! (`runner_api::control_auth`); each fault is done at most once (idempotent by key) and never
//! after the time the operator gives.
use axum::extract::State;
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use runner_api::control_auth::ControlVerifier;
use runner_api::fault_agent::{AgentAction, FaultReport, FaultRequest, MAX_PAUSE_MS};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

/// Reports kept for repeated requests; a run records at most 60 faults.
const REPORTS_KEPT: usize = 256;

pub struct FaultAgent {
    /// The server process's name (`/proc/<pid>/comm`, at most 15 characters).
    process: String,
    proc_root: PathBuf,
    auth: Option<ControlVerifier>,
    done: Mutex<BTreeMap<String, FaultReport>>,
}

impl FaultAgent {
    /// `auth: None` (tests only) obeys anyone.
    pub fn new(process: &str, proc_root: &Path, auth: Option<ControlVerifier>) -> Arc<Self> {
        Arc::new(Self {
            process: process.chars().take(15).collect(),
            proc_root: proc_root.into(),
            auth,
            done: Mutex::default(),
        })
    }
}

pub fn router(agent: Arc<FaultAgent>) -> Router {
    Router::new()
        .route("/ready", get(|| async { "ready\n" }))
        .route("/faults", post(fault))
        .with_state(agent)
}

fn unix_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

fn refuse(code: StatusCode, why: String) -> Response {
    tracing::warn!(%code, %why, "fault request refused");
    (code, format!("{why}\n")).into_response()
}

async fn fault(
    State(a): State<Arc<FaultAgent>>,
    headers: HeaderMap,
    Json(req): Json<FaultRequest>,
) -> Response {
    if let Some(auth) = &a.auth {
        let presented = headers
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "));
        match presented.map(|p| auth.check(p, unix_ms() / 1000)) {
            Some(Ok(())) => {}
            Some(Err(e)) => return refuse(StatusCode::FORBIDDEN, e.to_string()),
            None => return refuse(StatusCode::UNAUTHORIZED, "no credential".into()),
        }
    }
    // Held across the check and the signal: a repeated request waits and gets this report.
    let mut done = a.done.lock().unwrap_or_else(|p| p.into_inner());
    if let Some(r) = done.get(&req.key) {
        return Json(r.clone()).into_response();
    }
    let now = unix_ms();
    if now > req.not_after_unix_ms {
        let late = now - req.not_after_unix_ms;
        return refuse(
            StatusCode::CONFLICT,
            format!("not done: {late} ms past its last moment"),
        );
    }
    let pid = match find_process(&a.proc_root, &a.process) {
        Ok(pid) => pid,
        Err(e) => return refuse(StatusCode::NOT_FOUND, e),
    };
    use rustix::process::Signal;
    let (signal, name, pause_ms) = match req.action {
        AgentAction::Crash => (Signal::KILL, "SIGKILL", None),
        AgentAction::Pause => match req.pause_ms {
            Some(ms @ 1..=MAX_PAUSE_MS) => (Signal::STOP, "SIGSTOP", Some(ms)),
            _ => {
                let why = format!("pause needs pauseMs between 1 and {MAX_PAUSE_MS}");
                return refuse(StatusCode::UNPROCESSABLE_ENTITY, why);
            }
        },
    };
    if let Err(e) = send(pid, signal) {
        return refuse(
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("{name} to {} (pid {pid}): {e}", a.process),
        );
    }
    if let Some(ms) = pause_ms {
        tokio::spawn(resume_after(pid, ms, a.process.clone()));
    }
    let report = FaultReport {
        key: req.key.clone(),
        action: req.action,
        signal: name.into(),
        process: a.process.clone(),
        pid,
        sent_unix_ms: now,
        resume_unix_ms: pause_ms.map(|ms| now + ms),
    };
    tracing::info!(key = %report.key, pid, process = %a.process, signal = name, "signal sent");
    if done.len() >= REPORTS_KEPT {
        done.pop_first();
    }
    done.insert(req.key, report.clone());
    Json(report).into_response()
}

/// SIGCONT once the pause is over (the agent's own timer: a paused server is never left behind
/// because the operator went away).
async fn resume_after(pid: i32, ms: u64, process: String) {
    tokio::time::sleep(std::time::Duration::from_millis(ms)).await;
    match send(pid, rustix::process::Signal::CONT) {
        Ok(()) => tracing::info!(pid, %process, "SIGCONT sent"),
        Err(e) => tracing::error!(pid, %process, error = %e, "SIGCONT failed"),
    }
}

fn send(pid: i32, signal: rustix::process::Signal) -> Result<(), String> {
    let pid = rustix::process::Pid::from_raw(pid).ok_or("pid 0")?;
    rustix::process::kill_process(pid, signal).map_err(|e| e.to_string())
}

/// The one process named `name` under `proc_root` (not this agent). Two of them is an error:
/// the agent never guesses which one to kill.
pub fn find_process(proc_root: &Path, name: &str) -> Result<i32, String> {
    let me = std::process::id() as i32;
    let entries =
        std::fs::read_dir(proc_root).map_err(|e| format!("{}: {e}", proc_root.display()))?;
    let found: Vec<i32> = entries
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter(|&pid| pid != me)
        .filter(|pid| {
            std::fs::read_to_string(proc_root.join(pid.to_string()).join("comm"))
                .is_ok_and(|c| c.trim_end() == name)
        })
        .collect();
    match found[..] {
        [pid] => Ok(pid),
        [] => Err(format!(
            "no process named {name:?} in this pod (is the server running? the pod must share \
             its process namespace)"
        )),
        _ => Err(format!(
            "{} processes named {name:?}: {found:?}",
            found.len()
        )),
    }
}

/// Serves the agent on `listen` until the process ends.
pub async fn serve(listen: std::net::SocketAddr, agent: Arc<FaultAgent>) -> anyhow::Result<()> {
    let listener = tokio::net::TcpListener::bind(listen).await?;
    tracing::info!(addr = %listener.local_addr()?, process = %agent.process, auth = agent.auth.is_some(), "fault agent listening");
    axum::serve(listener, router(agent)).await?;
    Ok(())
}
