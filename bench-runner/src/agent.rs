//! `bench-runner agent`: the in-cluster runner. Connects everything, reports ready on
//! `GET /ready`, waits for one common `POST /start {"startAtUnixMs": …}` from the operator (the
//! start barrier), runs the trials back to back with a settle pause, and prints each trial's
//! result as ONE log line prefixed with [`RESULT_PREFIX`]. Needs no Kubernetes API access: the
//! operator reads the lines from the pod log.
use crate::engine::{self, RunOptions, SharedSetup, StartGate};
use crate::recorder::Shared;
use crate::termination::BarrierTimedOut;
use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::{get, post};
use axum::{Json, Router};
use futures::future::BoxFuture;
use msgbench_crds::workload::Workload;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use tokio::sync::watch;

/// Prefix of the log line carrying one trial's result (the operator greps for it).
pub const RESULT_PREFIX: &str = "MSGBENCH-RESULT ";
/// Version of the result line envelope.
pub const LINE_FORMAT: &str = "msgbench.dev/runner-line/v1";
/// Port of `/ready`, `/start` and `/progress`.
pub const AGENT_PORT: u16 = 9090;

/// What the operator's ConfigMap gives every runner of a run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AgentConfig {
    /// Target URL, e.g. `nats://js3.bench.svc:4222`.
    pub target: String,
    pub workload: Workload,
    #[serde(default = "one")]
    pub trials: u32,
    #[serde(default)]
    pub settle_seconds: u32,
    /// Seconds to wait for `/start` once connected before giving up (exit non-zero).
    pub barrier_timeout_seconds: u32,
    /// Seconds to keep retrying a target that refuses or does not resolve yet, before the
    /// start gate (then exit with reason TargetUnreachable).
    #[serde(default = "default_connect_timeout")]
    pub connect_timeout_seconds: u32,
    /// With variants: every trial in execution order (rounds × variants, each round's order
    /// chosen by the operator). Empty: `trials` runs of `workload` against `target`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub schedule: Vec<ScheduledTrial>,
    /// Every trial after the first also waits for its own `POST /start {trial}` (after the
    /// settle pause), so several runners start each trial together instead of drifting apart.
    #[serde(default)]
    pub trial_barrier: bool,
}

/// One trial of a variants run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ScheduledTrial {
    /// 1-based round.
    pub round: u32,
    pub variant: String,
    pub target: String,
    pub workload: Workload,
}

impl AgentConfig {
    /// The trials to run, in order: the schedule, or `trials` repeats of the one workload.
    pub fn plan(&self) -> Vec<ScheduledTrial> {
        if !self.schedule.is_empty() {
            return self.schedule.clone();
        }
        (1..=self.trials)
            .map(|round| ScheduledTrial {
                round,
                variant: String::new(),
                target: self.target.clone(),
                workload: self.workload.clone(),
            })
            .collect()
    }
}

fn one() -> u32 {
    1
}

fn default_connect_timeout() -> u32 {
    crate::connect::DEFAULT_CONNECT_TIMEOUT.as_secs() as u32
}

/// The body of `POST /start`.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StartRequest {
    /// Common start (wall clock, ms since the epoch); a time in the past starts at once.
    pub start_at_unix_ms: u64,
    /// The trial it releases (1-based; later trials only with `trialBarrier`).
    #[serde(default = "one")]
    pub trial: u32,
}

/// `GET /progress`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AgentProgress {
    pub ready: bool,
    pub started: bool,
    /// Current trial, 1-based (0 before the first).
    pub trial: u32,
    pub published: u64,
    pub received: u64,
    /// The trial this agent waits at the barrier for; 0 while not waiting.
    #[serde(default)]
    pub waiting_for: u32,
}

/// One result line: a trial's result of one runner.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ResultLine {
    pub format: String,
    pub runner_id: u16,
    /// 1-based position in the run (with variants: in the schedule).
    pub trial: u32,
    /// With variants: the variant and its round.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub variant: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub round: Option<u32>,
    /// Wall clock when the trial's load started, ms since the epoch.
    pub started_unix_ms: u64,
    pub result: crate::RunResult,
}

impl ResultLine {
    pub fn to_line(&self) -> anyhow::Result<String> {
        Ok(format!("{RESULT_PREFIX}{}", serde_json::to_string(self)?))
    }

    /// Every result line in a log, in order; lines without the prefix are skipped, a prefixed
    /// line that does not parse is an error.
    pub fn parse_log(log: &str) -> anyhow::Result<Vec<ResultLine>> {
        log.lines()
            .filter_map(|l| l.trim_end().strip_prefix(RESULT_PREFIX))
            .map(|json| {
                let r: ResultLine = serde_json::from_str(json)
                    .map_err(|e| anyhow::anyhow!("result line does not parse: {e}"))?;
                anyhow::ensure!(
                    r.format == LINE_FORMAT,
                    "result line format {:?}, expected {LINE_FORMAT}",
                    r.format
                );
                Ok(r)
            })
            .collect()
    }
}

/// Shared between the HTTP handlers, the gate and the trial loop.
/// Start times released so far, by trial.
type Releases = BTreeMap<u32, u64>;

#[derive(Default)]
pub struct AgentState {
    ready: AtomicBool,
    trial: AtomicU32,
    waiting_for: AtomicU32,
    start: Mutex<Option<watch::Sender<Releases>>>,
    start_rx: Mutex<Option<watch::Receiver<Releases>>>,
    stats: Arc<Mutex<Vec<Shared>>>,
}

impl AgentState {
    pub fn new() -> Arc<Self> {
        let (tx, rx) = watch::channel(Releases::new());
        Arc::new(AgentState {
            start: Mutex::new(Some(tx)),
            start_rx: Mutex::new(Some(rx)),
            ..Default::default()
        })
    }

    fn progress(&self) -> AgentProgress {
        let (mut published, mut received) = (0, 0);
        for s in self.stats.lock().expect("stats").iter() {
            let s = s.lock().expect("task stats");
            published += s.phases.iter().map(|p| p.published).sum::<u64>();
            received += s.phases.iter().map(|p| p.received).sum::<u64>();
        }
        AgentProgress {
            ready: self.ready.load(Ordering::SeqCst),
            started: self.started_at().is_some(),
            trial: self.trial.load(Ordering::SeqCst),
            published,
            received,
            waiting_for: self.waiting_for.load(Ordering::SeqCst),
        }
    }

    fn started_at(&self) -> Option<u64> {
        self.start_rx
            .lock()
            .expect("start")
            .as_ref()
            .and_then(|r| r.borrow().get(&1).copied())
    }

    /// Releases `trial`'s barrier; a second `/start` for it keeps the first time (idempotent
    /// for an operator that resends after a restart).
    fn release(&self, trial: u32, at_ms: u64) -> u64 {
        let guard = self.start.lock().expect("start");
        let tx = guard.as_ref().expect("sender lives as long as the state");
        let mut kept = at_ms;
        tx.send_if_modified(|v| match v.get(&trial) {
            Some(first) => {
                kept = *first;
                false
            }
            None => {
                v.insert(trial, at_ms);
                true
            }
        });
        kept
    }
}

pub fn router(state: Arc<AgentState>) -> Router {
    Router::new()
        .route("/ready", get(ready))
        .route("/start", post(start))
        .route("/progress", get(progress))
        .with_state(state)
}

async fn ready(State(s): State<Arc<AgentState>>) -> (StatusCode, &'static str) {
    if s.ready.load(Ordering::SeqCst) {
        (StatusCode::OK, "ready\n")
    } else {
        (StatusCode::SERVICE_UNAVAILABLE, "connecting\n")
    }
}

async fn start(
    State(s): State<Arc<AgentState>>,
    Json(req): Json<StartRequest>,
) -> (StatusCode, Json<StartRequest>) {
    let at = s.release(req.trial.max(1), req.start_at_unix_ms);
    (
        StatusCode::OK,
        Json(StartRequest {
            start_at_unix_ms: at,
            trial: req.trial.max(1),
        }),
    )
}

async fn progress(State(s): State<Arc<AgentState>>) -> Json<AgentProgress> {
    Json(s.progress())
}

/// Trial 1 waits for `/start` (bounded), later trials for the settle pause and, with the
/// trial barrier, for their own `/start`.
struct AgentGate {
    state: Arc<AgentState>,
    barrier_timeout: Duration,
    settle: Duration,
    trial: u32,
    barrier: bool,
    /// When the gate let the load start (ms since the epoch).
    released_ms: Arc<Mutex<u64>>,
}

impl StartGate for AgentGate {
    fn observe(&self, stats: &[Shared]) {
        *self.state.stats.lock().expect("stats") = stats.to_vec();
    }

    fn wait(&self) -> BoxFuture<'_, anyhow::Result<()>> {
        Box::pin(async move {
            self.state.ready.store(true, Ordering::SeqCst);
            let first = self.trial == 1;
            if !first {
                tokio::time::sleep(self.settle).await;
                if !self.barrier {
                    *self.released_ms.lock().expect("released") = since_epoch().as_millis() as u64;
                    return Ok(());
                }
            }
            let trial = self.trial;
            self.state.waiting_for.store(trial, Ordering::SeqCst);
            let mut rx = self
                .state
                .start_rx
                .lock()
                .expect("start")
                .clone()
                .expect("receiver");
            let at = tokio::time::timeout(
                self.barrier_timeout,
                rx.wait_for(|v| v.contains_key(&trial)),
            )
            .await
            .map_err(|_| {
                anyhow::Error::new(BarrierTimedOut(format!(
                    "start barrier timed out (trial {trial}): connected and ready, but no POST \
                     /start arrived within {}s (barrierTimeoutSeconds)",
                    self.barrier_timeout.as_secs()
                )))
            })?
            .map_err(|_| anyhow::anyhow!("start barrier closed"))?[&trial];
            self.state.waiting_for.store(0, Ordering::SeqCst);
            let wait = Duration::from_millis(at).saturating_sub(since_epoch());
            tokio::time::sleep(wait).await;
            *self.released_ms.lock().expect("released") = at.max(since_epoch().as_millis() as u64);
            Ok(())
        })
    }
}

fn variant_label(t: &ScheduledTrial) -> String {
    if t.variant.is_empty() {
        String::new()
    } else {
        format!(" (variant {}, round {})", t.variant, t.round)
    }
}

fn since_epoch() -> Duration {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default()
}

/// Runs every trial and hands each trial's result line to `emit` (stdout in the binary).
pub async fn run(
    cfg: AgentConfig,
    runner_id: u16,
    state: Arc<AgentState>,
    emit: &mut (dyn FnMut(&ResultLine) -> anyhow::Result<()> + Send),
) -> anyhow::Result<()> {
    anyhow::ensure!(
        (1..=20).contains(&cfg.trials),
        "trials: must be between 1 and 20, got {}",
        cfg.trials
    );
    let plan = cfg.plan();
    anyhow::ensure!(
        plan.len() <= 120,
        "schedule: at most 120 trials (20 rounds x 6 variants), got {}",
        plan.len()
    );
    for t in &plan {
        engine::validate(&t.workload).map_err(|e| e.context(variant_label(t)))?;
    }
    for (i, planned) in plan.into_iter().enumerate() {
        let trial = i as u32 + 1;
        state.trial.store(trial, Ordering::SeqCst);
        let released_ms = Arc::new(Mutex::new(0u64));
        let gate = AgentGate {
            state: state.clone(),
            barrier_timeout: Duration::from_secs(u64::from(cfg.barrier_timeout_seconds)),
            settle: Duration::from_secs(u64::from(cfg.settle_seconds)),
            trial,
            barrier: cfg.trial_barrier,
            released_ms: released_ms.clone(),
        };
        // Runner 1 (Job index 0) sets up shared server state for this trial; the others wait.
        let token = format!("trial-{trial}");
        let setup = if runner_id == 1 {
            SharedSetup::Leader { token }
        } else {
            SharedSetup::Follower {
                token,
                wait: Duration::from_secs(u64::from(cfg.barrier_timeout_seconds)),
            }
        };
        let opts = RunOptions {
            runner_id,
            progress: false,
            gate: Some(Arc::new(gate)),
            setup,
            connect_timeout: Duration::from_secs(u64::from(cfg.connect_timeout_seconds)),
        };
        let label = variant_label(&planned);
        let result = engine::run(planned.workload, &planned.target, opts)
            .await
            .map_err(|e| e.context(format!("trial {trial}{label}")))?;
        let started_ms = *released_ms.lock().expect("released");
        let line = ResultLine {
            format: LINE_FORMAT.into(),
            runner_id,
            trial,
            variant: (!planned.variant.is_empty()).then(|| planned.variant.clone()),
            round: (!planned.variant.is_empty()).then_some(planned.round),
            started_unix_ms: started_ms,
            result,
        };
        emit(&line)?;
    }
    Ok(())
}

/// Serves the agent endpoints on `addr` until the process exits; returns the bound address.
pub async fn serve(
    addr: std::net::SocketAddr,
    state: Arc<AgentState>,
) -> anyhow::Result<std::net::SocketAddr> {
    let listener = tokio::net::TcpListener::bind(addr).await?;
    let bound = listener.local_addr()?;
    tracing::info!(addr = %bound, "agent listening");
    tokio::spawn(async move {
        if let Err(e) = axum::serve(listener, router(state)).await {
            tracing::error!(error = %e, "agent HTTP server stopped");
        }
    });
    Ok(bound)
}

#[cfg(test)]
mod tests {
    use super::AgentConfig;

    /// A config written before `connectTimeoutSeconds` existed still parses, with the default.
    #[test]
    fn an_older_config_gets_the_default_connect_window() {
        let cfg: AgentConfig = serde_norway::from_str(
            "target: nats://x:4222\nworkload: {protocol: nats, durationSeconds: 1}\nbarrierTimeoutSeconds: 60\n",
        )
        .unwrap();
        assert_eq!(cfg.connect_timeout_seconds, 30);
    }
}
