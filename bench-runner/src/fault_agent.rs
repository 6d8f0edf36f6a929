//! The fault agent (`bench-runner fault-agent`): a container in a server pod that shares the
//! pod's process namespace and, when the operator asks, sends the server process a signal. A
//! `crash` is SIGKILL: no signal handler, no preStop hook, no lame duck mode; the kubelet then
//! restarts the container in place. A `pause` is SIGSTOP, and SIGCONT after its duration, sent
//! by the agent itself whatever happens to the operator. It runs as the server's user, so it
//! needs no capability. With network faults enabled it also runs `partition`s (`fault_net`):
//! then it runs as uid 0 with NET_ADMIN and KILL only. A `powerLoss` is asked of the lazy file
//! system the server runs under (`fault_power`), whose control socket only uid 0 may use; an
//! agent without that socket starts all the same and refuses power losses, one by one.
//!
//! Only credentials the operator signed for this server object are obeyed
//! (`runner_api::control_auth`); each fault is done at most once (idempotent by key, and a
//! `repeat` ask of a key this agent has no report of is refused: its reports live in memory, so
//! after a restart it cannot tell "never asked" from "done") and never after the time the
//! operator gives. `GET /faults/state` shows the traces a fault leaves (`fault_state`), so a
//! fault whose report was lost can be confirmed; same credential as `POST /faults`.
use crate::control_check::{refusal, ControlRequest};
use crate::fault_net::{self, Nft};
use crate::fault_power::{self, LazyFsControl};
use crate::fault_process::{find_process, send, unix_ms};
use crate::fault_state::{self, Leftovers};
use axum::extract::State;
use axum::http::{HeaderMap, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use runner_api::control_auth::ControlVerifier;
use runner_api::fault_agent::{
    AgentAction, AgentState, FaultReport, FaultRequest, PartitionFrom, RulesApplied, SignalSent,
    MAX_DURATION_MS,
};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

/// Reports kept for repeated requests; a run records at most 60 faults.
const REPORTS_KEPT: usize = 256;

pub struct FaultAgent {
    /// The server process's name (`/proc/<pid>/comm`, at most 15 characters).
    process: String,
    proc_root: PathBuf,
    auth: ControlVerifier,
    net: Option<NetFaults>,
    /// The lazy file system's control socket a power loss is asked of.
    lazyfs: LazyFsControl,
    /// An async lock: held across the whole request (a partition awaits `nft`).
    done: tokio::sync::Mutex<BTreeMap<String, FaultReport>>,
    /// Until when a partition is in place (one at a time: a second would be healed by the
    /// first one's timer).
    partitioned_until: Mutex<Option<u64>>,
    /// Why a partition could not be healed: the agent then exits non-zero (`serve_on`), so the
    /// container's restart runs `heal_leftover` instead of leaving the server cut off.
    unhealed: tokio::sync::watch::Sender<Option<String>>,
    /// When this agent started: reports of asks before it are lost.
    started_unix_ms: u64,
    /// What this agent undid at its start, left by an earlier agent (`fault_state`).
    leftovers: Mutex<Leftovers>,
}

/// What a `partition` needs: `nft`, and the server's ports.
#[derive(Clone, Debug)]
pub struct NetFaults {
    pub nft: Nft,
    /// The ports the server's peers connect to and from (JetStream: the route port).
    pub peer_ports: Vec<u16>,
    /// The ports clients connect to.
    pub client_ports: Vec<u16>,
}

impl NetFaults {
    fn ports(&self, from: PartitionFrom) -> Vec<u16> {
        match from {
            PartitionFrom::Peers => self.peer_ports.clone(),
            PartitionFrom::Clients => self.client_ports.clone(),
            PartitionFrom::Both => [&self.peer_ports[..], &self.client_ports[..]].concat(),
        }
    }
}

impl FaultAgent {
    /// Obeys only credentials `auth` accepts. `net: None`: partitions are refused. Power losses
    /// go to the production control socket (`LazyFsControl::default`).
    pub fn new(
        process: &str,
        proc_root: &Path,
        auth: ControlVerifier,
        net: Option<NetFaults>,
    ) -> Arc<Self> {
        Self::with_lazyfs(process, proc_root, auth, net, LazyFsControl::default())
    }

    /// The same, asking power losses of `lazyfs`.
    pub fn with_lazyfs(
        process: &str,
        proc_root: &Path,
        auth: ControlVerifier,
        net: Option<NetFaults>,
        lazyfs: LazyFsControl,
    ) -> Arc<Self> {
        Arc::new(Self {
            process: process.chars().take(15).collect(),
            proc_root: proc_root.into(),
            auth,
            net,
            lazyfs,
            done: tokio::sync::Mutex::default(),
            partitioned_until: Mutex::default(),
            unhealed: tokio::sync::watch::channel(None).0,
            started_unix_ms: unix_ms(),
            leftovers: Mutex::default(),
        })
    }

    /// Heals a partition a previous agent left behind (it was restarted mid-partition, so its
    /// timer is gone): a partition never outlives its agent by more than a restart.
    pub async fn heal_leftover(&self) -> Result<(), String> {
        let Some(net) = &self.net else { return Ok(()) };
        if net.nft.remove().await? {
            tracing::warn!(
                table = fault_net::TABLE,
                "removed a partition left by an earlier agent"
            );
            // The trace of a partition whose report went with that agent.
            self.leftovers
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .partition_removed_unix_ms = Some(unix_ms());
        }
        Ok(())
    }
}

pub fn router(agent: Arc<FaultAgent>) -> Router {
    Router::new()
        .route("/ready", get(|| async { "ready\n" }))
        .route("/faults", post(fault))
        .route("/faults/state", get(state))
        .with_state(agent)
}

/// `GET /faults/state`: the traces of faults now (`fault_state`).
async fn state(
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
    if let Some(r) = refusal(&a.auth, control, "this server") {
        return r;
    }
    let partition_table = match &a.net {
        None => None,
        Some(net) => match net.nft.present().await {
            Ok(present) => Some(present),
            Err(e) => return (StatusCode::INTERNAL_SERVER_ERROR, format!("{e}\n")).into_response(),
        },
    };
    let server_stopped = fault_state::server_stopped(&a.proc_root, &a.process);
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

fn refuse(code: StatusCode, why: String) -> Response {
    tracing::warn!(%code, %why, "fault request refused");
    (code, format!("{why}\n")).into_response()
}

async fn fault(
    State(a): State<Arc<FaultAgent>>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    Json(req): Json<FaultRequest>,
) -> Response {
    let control = ControlRequest {
        method: &method,
        uri: &uri,
        headers: &headers,
    };
    if let Some(r) = refusal(&a.auth, control, "this server") {
        return r;
    }
    // Held across the check and the signal: a repeated request waits and gets this report.
    let mut done = a.done.lock().await;
    if let Some(r) = done.get(&req.key) {
        return Json(r.clone()).into_response();
    }
    if req.repeat {
        // Asked before, maybe of an agent before this one: acting now could act twice.
        let why = format!(
            "no report for {}: an earlier ask may have been carried out by an agent before this \
             one (started at {} unix ms), whose reports are lost; nothing done",
            req.key, a.started_unix_ms
        );
        return refuse(StatusCode::GONE, why);
    }
    let now = unix_ms();
    if now > req.not_after_unix_ms {
        let late = now - req.not_after_unix_ms;
        return refuse(
            StatusCode::CONFLICT,
            format!("not done: {late} ms past its last moment"),
        );
    }
    let outcome = match req.action {
        AgentAction::Partition => partition(&a, &req, now).await,
        AgentAction::Crash | AgentAction::Pause => signal(&a, &req, now),
        AgentAction::PowerLoss => {
            fault_power::carry_out(&a.lazyfs, &a.proc_root, &a.process, &req).await
        }
    };
    let report = match outcome {
        Ok(r) => r,
        Err((code, why)) => return refuse(code, why),
    };
    if done.len() >= REPORTS_KEPT {
        done.pop_first();
    }
    done.insert(req.key, report.clone());
    Json(report).into_response()
}

type Refusal = (StatusCode, String);

fn duration(req: &FaultRequest) -> Result<u64, Refusal> {
    match req.duration_ms {
        Some(ms @ 1..=MAX_DURATION_MS) => Ok(ms),
        _ => Err((
            StatusCode::UNPROCESSABLE_ENTITY,
            format!(
                "{:?} needs durationMs between 1 and {MAX_DURATION_MS}",
                req.action
            ),
        )),
    }
}

/// `crash` (SIGKILL) or `pause` (SIGSTOP now, SIGCONT on the agent's own timer).
fn signal(a: &FaultAgent, req: &FaultRequest, now: u64) -> Result<FaultReport, Refusal> {
    use rustix::process::Signal;
    let pause_ms = match req.action {
        AgentAction::Pause => Some(duration(req)?),
        _ => None,
    };
    let pid = find_process(&a.proc_root, &a.process).map_err(|e| (StatusCode::NOT_FOUND, e))?;
    let (sig, name) = match pause_ms {
        Some(_) => (Signal::STOP, "SIGSTOP"),
        None => (Signal::KILL, "SIGKILL"),
    };
    send(pid, sig).map_err(|e| {
        let why = format!("{name} to {} (pid {pid}): {e}", a.process);
        (StatusCode::INTERNAL_SERVER_ERROR, why)
    })?;
    if let Some(ms) = pause_ms {
        tokio::spawn(resume_after(pid, ms, a.process.clone()));
    }
    tracing::info!(key = %req.key, pid, process = %a.process, signal = name, "signal sent");
    Ok(FaultReport {
        key: req.key.clone(),
        action: req.action,
        signal: Some(SignalSent {
            signal: name.into(),
            process: a.process.clone(),
            pid,
        }),
        partition: None,
        power_loss: None,
        at_unix_ms: now,
        until_unix_ms: pause_ms.map(|ms| now + ms),
    })
}

/// `partition`: the rules in place now, removed on the agent's own timer.
async fn partition(
    a: &Arc<FaultAgent>,
    req: &FaultRequest,
    now: u64,
) -> Result<FaultReport, Refusal> {
    let ms = duration(req)?;
    let Some(net) = &a.net else {
        let why = "this agent does not cut the network (spec.faultInjection.network is off)";
        return Err((StatusCode::UNPROCESSABLE_ENTITY, why.into()));
    };
    let from = req.partition_from.unwrap_or_default();
    let ports = net.ports(from);
    if ports.is_empty() {
        let which = match from {
            PartitionFrom::Peers => "peer",
            PartitionFrom::Clients => "client",
            PartitionFrom::Both => "peer or client",
        };
        let why = format!("the server has no {which} ports to cut");
        return Err((StatusCode::UNPROCESSABLE_ENTITY, why));
    }
    {
        let until = a
            .partitioned_until
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        if let Some(t) = until.filter(|&t| t > now) {
            let why = format!("a partition is in place until {t} (unix ms)");
            return Err((StatusCode::CONFLICT, why));
        }
    }
    let rules = fault_net::ruleset(&ports);
    net.nft
        .apply(&rules)
        .await
        .map_err(|e| (StatusCode::INTERNAL_SERVER_ERROR, e))?;
    let at = unix_ms();
    *a.partitioned_until
        .lock()
        .unwrap_or_else(|p| p.into_inner()) = Some(at + ms);
    tokio::spawn(heal_after(a.clone(), ms));
    tracing::info!(key = %req.key, ?ports, ms, "partition in place");
    Ok(FaultReport {
        key: req.key.clone(),
        action: req.action,
        signal: None,
        partition: Some(RulesApplied { ports, rules }),
        power_loss: None,
        at_unix_ms: at,
        until_unix_ms: Some(at + ms),
    })
}

/// Removes the partition once it is over (retried: a partition is never left behind).
async fn heal_after(a: Arc<FaultAgent>, ms: u64) {
    tokio::time::sleep(std::time::Duration::from_millis(ms)).await;
    let Some(net) = &a.net else { return };
    for attempt in 1.. {
        match net.nft.remove().await {
            Ok(_) => {
                tracing::info!(table = fault_net::TABLE, "partition healed");
                break;
            }
            Err(e) if attempt < 10 => {
                tracing::error!(error = %e, attempt, "healing the partition failed; retrying");
                tokio::time::sleep(std::time::Duration::from_millis(200)).await;
            }
            Err(e) => {
                tracing::error!(error = %e, "healing the partition failed 10 times; exiting so a restart heals it");
                a.unhealed.send_replace(Some(e));
                return;
            }
        }
    }
    *a.partitioned_until
        .lock()
        .unwrap_or_else(|p| p.into_inner()) = None;
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

/// Serves the agent on `listen` until the process ends.
pub async fn serve(listen: std::net::SocketAddr, agent: Arc<FaultAgent>) -> anyhow::Result<()> {
    serve_on(tokio::net::TcpListener::bind(listen).await?, agent).await
}

/// Serves the agent on `listener`; ends with an error once a partition could not be healed (the
/// process then exits non-zero and its restart removes the table: `heal_leftover`).
pub async fn serve_on(
    listener: tokio::net::TcpListener,
    agent: Arc<FaultAgent>,
) -> anyhow::Result<()> {
    agent.heal_leftover().await.map_err(anyhow::Error::msg)?;
    fault_state::resume_leftover(&agent.proc_root, &agent.process, &agent.leftovers);
    tracing::info!(addr = %listener.local_addr()?, process = %agent.process, net = agent.net.is_some(), lazyfs_control = %agent.lazyfs.socket.display(), "fault agent listening");
    let mut unhealed = agent.unhealed.subscribe();
    let fatal = async move {
        let _ = unhealed.wait_for(Option::is_some).await;
    };
    axum::serve(listener, router(agent.clone()))
        .with_graceful_shutdown(fatal)
        .await?;
    match agent.unhealed.borrow().clone() {
        Some(why) => anyhow::bail!("a partition could not be healed ({why}); exiting so the container's restart removes it"),
        None => Ok(()),
    }
}
