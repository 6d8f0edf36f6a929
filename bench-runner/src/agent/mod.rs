//! `bench-runner agent`: the in-cluster runner. Connects everything, reports ready on
//! `GET /ready`, waits for one common `POST /start {"startAtUnixMs": …}` from the operator (the
//! start barrier), runs the trials back to back with a settle pause, and keeps each trial's
//! result for the operator to fetch (`GET /results`) until it confirms (`POST /results/ack`)
//! or a bounded hold ends. A `POST /stop {afterTrial}` (the run's `stopWhen` decided) ends the
//! plan after that trial: the agent then holds the records it has, as if that were the plan. Each record also goes to stdout as checksummed frames
//! ([`runner_api::result_frames`]), the fallback when the endpoint could not be read. Needs no
//! Kubernetes API access.
mod access;
mod http;

pub use http::{router, serve};

use crate::engine;
use crate::live_metrics::LiveMetrics;
use crate::options::{RunOptions, SharedSetup, StartGate};
use crate::recorder::Shared;
use crate::termination::BarrierTimedOut;
use futures::future::BoxFuture;
use msgbench_crds::workload::Workload;
use runner_api::agent::{
    AgentConfig, AgentProgress, AgentResults, RawJson, RawResultLine, ResultLine, ScheduledTrial,
    LINE_FORMAT,
};
use runner_api::control_auth::ControlVerifier;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use tokio::sync::watch;

/// Shared between the HTTP handlers, the gate and the trial loop.
/// Start times released so far, by trial.
type Releases = BTreeMap<u32, u64>;

pub struct AgentState {
    ready: AtomicBool,
    trial: AtomicU32,
    waiting_for: AtomicU32,
    start: Mutex<Option<watch::Sender<Releases>>>,
    start_rx: Mutex<Option<watch::Receiver<Releases>>>,
    stats: Arc<Mutex<Vec<Shared>>>,
    /// Checks the operator's credentials: there is no open agent.
    auth: ControlVerifier,
    runner_id: AtomicU32,
    planned: AtomicU32,
    finished: AtomicBool,
    /// Kept as JSON text: a decoded record holds three 139 KB histograms per phase (14 MB with
    /// 32 stages), and every trial's is kept until the operator confirms.
    records: Mutex<Vec<RawResultLine>>,
    /// Set when the operator confirmed it stored every record.
    acked: watch::Sender<bool>,
    /// The last trial to run after a `POST /stop`; 0: the whole plan.
    stop_after: watch::Sender<u32>,
    /// What `/metrics` serves while the trials run (see [`crate::live_metrics`]).
    live: Arc<LiveMetrics>,
}

impl AgentState {
    /// An agent whose control endpoint requires a credential `auth` accepts (see [`http`]).
    pub fn new(auth: ControlVerifier) -> Arc<Self> {
        let (tx, rx) = watch::channel(Releases::new());
        Arc::new(AgentState {
            ready: AtomicBool::default(),
            trial: AtomicU32::default(),
            waiting_for: AtomicU32::default(),
            start: Mutex::new(Some(tx)),
            start_rx: Mutex::new(Some(rx)),
            stats: Arc::default(),
            auth,
            runner_id: AtomicU32::default(),
            planned: AtomicU32::default(),
            finished: AtomicBool::default(),
            records: Mutex::default(),
            acked: watch::Sender::default(),
            stop_after: watch::Sender::default(),
            live: Arc::default(),
        })
    }

    /// The live series every trial records into, for the metrics server.
    pub fn live(&self) -> Arc<LiveMetrics> {
        self.live.clone()
    }

    fn results(&self) -> AgentResults<RawJson> {
        AgentResults {
            runner_id: self.runner_id.load(Ordering::SeqCst) as u16,
            trials: self.planned.load(Ordering::SeqCst),
            finished: self.finished.load(Ordering::SeqCst),
            records: self.records.lock().expect("records").clone(),
        }
    }

    /// The operator stored `records` records: true (and the hold ends) when that is all of them.
    fn acknowledge(&self, records: u32) -> bool {
        let all =
            self.finished.load(Ordering::SeqCst) && records == self.planned.load(Ordering::SeqCst);
        if all {
            self.acked.send_replace(true);
        }
        all
    }

    /// After the last trial: wait until the operator confirmed it has every record, at most
    /// `hold`. True when it did.
    pub async fn hold_results(&self, hold: Duration) -> bool {
        let mut rx = self.acked.subscribe();
        tokio::time::timeout(hold, rx.wait_for(|a| *a))
            .await
            .is_ok_and(|r| r.is_ok())
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
            finished: self.finished.load(Ordering::SeqCst),
            stopped_after: *self.stop_after.borrow(),
            trial_start_unix_ms: self
                .start_of(self.trial.load(Ordering::SeqCst))
                .unwrap_or(0),
        }
    }

    /// The start kept for `trial`, once released.
    fn start_of(&self, trial: u32) -> Option<u64> {
        self.start_rx
            .lock()
            .expect("start")
            .as_ref()
            .and_then(|r| r.borrow().get(&trial).copied())
    }

    fn started_at(&self) -> Option<u64> {
        self.start_of(1)
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

    /// Keeps `after` as the last trial to run (the first stop kept, like a start). `Err` with
    /// the latest trial released when one after `after` already was: it cannot be undone.
    fn stop(&self, after: u32) -> Result<u32, u32> {
        // Under the start lock, so no release slips in between the check and the stop.
        let _guard = self.start.lock().expect("start");
        let released = self
            .start_rx
            .lock()
            .expect("start")
            .as_ref()
            .and_then(|r| r.borrow().keys().next_back().copied());
        let kept = *self.stop_after.borrow();
        if kept > 0 {
            return Ok(kept);
        }
        if let Some(t) = released.filter(|t| *t > after) {
            return Err(t);
        }
        self.stop_after.send_replace(after);
        Ok(after)
    }

    /// A stop that ends the plan before `trial`.
    fn stops_before(&self, trial: u32) -> Option<u32> {
        let after = *self.stop_after.borrow();
        (after > 0 && after < trial).then_some(after)
    }
}

/// The operator ended the plan after `0` (`POST /stop`): not a failure, the trials so far are
/// the run's.
#[derive(Debug)]
pub struct StopRequested(pub u32);

impl std::fmt::Display for StopRequested {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "stopped after trial {} (POST /stop)", self.0)
    }
}

impl std::error::Error for StopRequested {}

/// Trial 1 waits for `/start` (bounded), later trials for the settle pause and, with the
/// trial barrier, for their own `/start` or a `/stop` that ends the plan before them.
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
                if let Some(after) = self.state.stops_before(self.trial) {
                    return Err(StopRequested(after).into());
                }
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
            let mut stop_rx = self.state.stop_after.subscribe();
            let released = async {
                let v = rx.wait_for(|v| v.contains_key(&trial)).await;
                v.map(|v| v[&trial])
                    .map_err(|_| anyhow::anyhow!("start barrier closed"))
            };
            // A stop ends the wait as surely as a start; it wins when both are there.
            let stopped = stop_rx.wait_for(|s| *s > 0 && *s < trial);
            let waited = tokio::time::timeout(self.barrier_timeout, async {
                tokio::select! {
                    biased;
                    s = stopped => Err(match s {
                        Ok(s) => StopRequested(*s).into(),
                        Err(_) => anyhow::anyhow!("stop channel closed"),
                    }),
                    at = released => at,
                }
            })
            .await
            .map_err(|_| {
                anyhow::Error::new(BarrierTimedOut(format!(
                    "start barrier timed out (trial {trial}): connected and ready, but no POST \
                     /start arrived within {}s (barrierTimeoutSeconds)",
                    self.barrier_timeout.as_secs()
                )))
            })?;
            self.state.waiting_for.store(0, Ordering::SeqCst);
            let at = waited?;
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
    let plan = checked_plan(&cfg, runner_id)?;
    state
        .runner_id
        .store(u32::from(runner_id), Ordering::SeqCst);
    state.planned.store(plan.len() as u32, Ordering::SeqCst);
    for (i, planned) in plan.into_iter().enumerate() {
        let trial = i as u32 + 1;
        state.trial.store(trial, Ordering::SeqCst);
        let released_ms = Arc::new(Mutex::new(0u64));
        let (workload, opts) = trial_options(
            &cfg,
            runner_id,
            &state,
            trial,
            &planned,
            released_ms.clone(),
        )?;
        let label = variant_label(&planned);
        let live = opts.live.clone();
        let mut result = match engine::run(workload, &planned.target, opts).await {
            Ok(r) => r,
            Err(e) if e.downcast_ref::<StopRequested>().is_some() => {
                tracing::info!(trial, "{e}: this trial and the rest of the plan do not run");
                state.planned.store(trial - 1, Ordering::SeqCst);
                break;
            }
            Err(e) => return Err(e.context(format!("trial {trial}{label}"))),
        };
        if let Some(l) = &live {
            l.finished(); // a finished trial is behind no schedule
        }
        // The result reports the workload as specified: the trial's own names are wire detail,
        // and trials merge only when their workloads are equal.
        result.workload = planned.workload.clone();
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
        // The runner's own account, on the diagnostics stream, to check what the operator merged.
        tracing::info!(
            trial,
            published = line.result.measured.published,
            received = line.result.measured.received,
            "trial finished"
        );
        emit(&line)?;
        let raw = RawResultLine::from_line(&line)?;
        drop(line);
        state.records.lock().expect("records").push(raw);
    }
    state.finished.store(true, Ordering::SeqCst);
    Ok(())
}

/// The config's trials, refused as a whole when the config or any trial's workload is invalid.
fn checked_plan(cfg: &AgentConfig, runner_id: u16) -> anyhow::Result<Vec<ScheduledTrial>> {
    anyhow::ensure!(
        (1..=20).contains(&cfg.trials),
        "trials: must be between 1 and 20, got {}",
        cfg.trials
    );
    anyhow::ensure!(
        (1..=crate::payload::MAX_RUNNER).contains(&runner_id),
        "runner id must be between 1 and {}, got {runner_id}",
        crate::payload::MAX_RUNNER
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
    Ok(plan)
}

/// Trial `trial`'s workload (isolated from other trials' when the config says so) and how to
/// run it: behind the trial barrier, runner 1 setting up the shared server state.
fn trial_options(
    cfg: &AgentConfig,
    runner_id: u16,
    state: &Arc<AgentState>,
    trial: u32,
    planned: &ScheduledTrial,
    released_ms: Arc<Mutex<u64>>,
) -> anyhow::Result<(Workload, RunOptions)> {
    let gate = AgentGate {
        state: state.clone(),
        barrier_timeout: Duration::from_secs(u64::from(cfg.barrier_timeout_seconds)),
        settle: Duration::from_secs(u64::from(cfg.settle_seconds)),
        trial,
        barrier: cfg.trial_barrier,
        released_ms,
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
    let mut workload = planned.workload.clone();
    let run_tag = match &cfg.isolation {
        Some(iso) => {
            iso.apply(&mut workload, trial);
            iso.tag_of(trial)
        }
        None => 0,
    };
    let opts = RunOptions {
        runner_id,
        runners: match cfg.runners {
            0 => crate::payload::MAX_RUNNER,
            n => u16::try_from(n).unwrap_or(u16::MAX),
        },
        run_tag,
        progress: false,
        gate: Some(Arc::new(gate)),
        setup,
        connect_timeout: Duration::from_secs(u64::from(cfg.connect_timeout_seconds)),
        credentials: access::credentials_for(cfg, &planned.target)?,
        tls: access::tls_for(cfg, &planned.target),
        token_placement: access::token_placement_for(cfg, &planned.target)?,
        live: Some(state.live.trial(trial, &planned.variant, planned.round)),
        client: Default::default(),
    };
    Ok((workload, opts))
}
