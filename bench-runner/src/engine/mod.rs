//! Runs a workload: connects subscribers and publishers, waits at the start gate, drives each
//! publisher on its open-loop schedule, drains, and assembles the result.
mod figures;
mod publish;

use crate::clock;
use crate::drain_counts::DrainCounts;
use crate::drivers::{self, Driver, Publisher};
use crate::options::RunOptions;
use crate::plan::{self, Length, PlanPhase};
use crate::recorder::{ReceiveRecorder, Senders, Shared, TaskStats};
use crate::{connect, connections, cpu, progress};
use figures::{Ran, Took};
use msgbench_crds::workload::{Protocol, Workload};
use publish::{publish_all, PubCtx};
use runner_api::result::{Delivery, RunnerResult};
use runner_api::target::TargetUrl;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::watch;
use tokio::task::JoinHandle;

/// Checks a workload and returns every rule it breaks, one per line.
pub fn validate(w: &Workload) -> anyhow::Result<()> {
    let mut lines: Vec<String> = w
        .violations()
        .iter()
        .chain(&plan::violations(w))
        .map(|v| format!("  {v}"))
        .collect();
    if lines.is_empty() {
        return Ok(());
    }
    // A rule both lists check is said once.
    let mut seen = std::collections::HashSet::new();
    lines.retain(|l| seen.insert(l.clone()));
    anyhow::bail!("invalid workload:\n{}", lines.join("\n"))
}

/// A standalone workload file (YAML or JSON), checked as admission would check it.
pub fn parse_workload(text: &str) -> anyhow::Result<Workload> {
    let w: Workload = serde_norway::from_str(text)?;
    validate(&w)?;
    Ok(w)
}

pub async fn run(w: Workload, target: &str, opts: RunOptions) -> anyhow::Result<RunnerResult> {
    validate(&w)?;
    let mut target = TargetUrl::parse(target).map_err(|e| anyhow::anyhow!("--target {e}"))?;
    target.auth = opts.credentials.clone();
    opts.tls.apply(&mut target);
    target.token_placement = opts.token_placement.clone();
    let w = Arc::new(w);
    let driver = drivers::for_workload(&w, &target, &opts)?;
    let _ = clock::base();
    let window = connect::ConnectWindow::new(&target.raw, opts.connect_timeout);
    if w.connections.is_some() {
        // Connecting is what a connection workload measures: before the gate, only wait until
        // the target accepts one connection, and close it again.
        let probe = window.retry(|| driver.connect_idle(u32::MAX)).await?;
        drop(probe);
        return connections::run(w, target, driver, opts).await;
    }
    window.retry(|| driver.prepare()).await?;
    let out = run_messaging(&w, &target, driver.clone(), &opts, &window).await;
    // A server a fault restarted may still be coming back: wait for it like before the start.
    let cleanup_window = connect::ConnectWindow::new(&target.raw, opts.connect_timeout);
    let cleaned = cleanup_window.retry(|| driver.cleanup()).await;
    let out = out?;
    cleaned?;
    Ok(out)
}

async fn run_messaging(
    w: &Arc<Workload>,
    target: &TargetUrl,
    driver: Arc<dyn Driver>,
    opts: &RunOptions,
    window: &connect::ConnectWindow,
) -> anyhow::Result<RunnerResult> {
    let phases = Arc::new(plan::phases(w));
    let (stop_tx, stop_rx) = watch::channel(false);
    let clients = connect_clients(w, &phases, &driver, opts, window, &stop_rx).await?;
    if let Some(g) = &opts.gate {
        g.observe(&clients.stats);
        g.wait().await?;
    }
    let cpu0 = cpu::process_cpu_seconds().unwrap_or(0.0);
    let start_us = clock::now_us() + 20_000;
    let measured_origin = start_us + u64::from(w.warmup_seconds) * 1_000_000;
    for s in &clients.stats {
        s.lock().expect("stats lock").timeline_origin_us = measured_origin;
    }
    // socketio `rest`: REST endpoints sampled over the measured publishing, reported apart.
    let rest_probe = (w.socketio.as_ref())
        .and_then(|o| o.rest.as_ref())
        .filter(|_| w.protocol == Protocol::Socketio)
        .map(|o| drivers::socketio::rest_probe::RestProbe::start(target, o, measured_origin))
        .transpose()?;
    let stop = StageStop::new();
    let evaluator = stop.watch(w, &phases, &clients.stats, start_us);
    let bar = progress::ConsoleProgress::new(opts.progress, &phases, w, clients.stats.clone());
    let tasks = start_publishers(
        w,
        &phases,
        &driver,
        opts,
        clients.publishers,
        start_us,
        &stop,
    );
    // Publishers stay connected until the drain is over: round-trip replies arrive on them.
    let mut connected = Vec::with_capacity(tasks.len());
    for t in tasks {
        connected.push(t.await?);
    }
    let rest = match rest_probe {
        Some(p) => p.finish().await,
        None => Vec::new(),
    };
    let drain_limit = Duration::from_secs(u64::from(w.drain_seconds));
    drain(&clients.stats, driver.delivery(), drain_limit).await;
    let _ = stop_tx.send(true);
    for t in clients.subscribers {
        let _ = tokio::time::timeout(Duration::from_secs(5), t).await;
    }
    drop(connected);
    if let Some(e) = evaluator {
        e.abort();
    }
    drop(bar);
    let took = Took {
        wall: (clock::now_us() - start_us) as f64 / 1e6,
        cpu: cpu::process_cpu_seconds().unwrap_or(0.0) - cpu0,
    };
    // After the figures' clock: the read-back is not part of the run's load.
    let kept = read_back(&driver, &clients.stats, opts).await;
    let ran = Ran {
        phases: &phases,
        stats: &clients.stats,
        last_kept: stop.allowed.load(Ordering::SeqCst),
        breaking_stage: stop.breaking.lock().expect("lock").clone(),
        publish_acks: driver.publish_acks(),
        kept,
        rest,
    };
    Ok(figures::result(w, target, opts, ran, took))
}

/// What the server still holds of this runner's messages (`ackedNotKept`), read back once
/// the drain is over and the subscribers have stopped.
async fn read_back(
    driver: &Arc<dyn Driver>,
    stats: &[Shared],
    opts: &RunOptions,
) -> Option<crate::kept::ReadBack> {
    let scope = {
        let guards: Vec<_> = stats
            .iter()
            .map(|s| s.lock().expect("stats lock"))
            .collect();
        let tasks: Vec<&TaskStats> = guards.iter().map(|g| &**g).collect();
        crate::kept::ReadScope::of(&tasks, opts.runner_id, opts.run_tag)
    };
    let t0 = std::time::Instant::now();
    let kept = driver.read_back(scope).await;
    if let Some(k) = &kept {
        let (found, from) = match k {
            Ok(k) => (k.found(), format!("{:?}", k.from)),
            Err(e) => (0, e.clone()),
        };
        let ms = t0.elapsed().as_millis() as u64;
        tracing::info!(found, ms, outcome = %from, "read the stream back");
    }
    kept
}

/// A messaging run's clients, and the stats each of them records into.
struct Clients {
    subscribers: Vec<JoinHandle<()>>,
    publishers: Vec<(Box<dyn Publisher>, Shared)>,
    stats: Vec<Shared>,
}

/// Connects the subscribers first, so nothing published is missed, then the publishers.
async fn connect_clients(
    w: &Workload,
    phases: &[PlanPhase],
    driver: &Arc<dyn Driver>,
    opts: &RunOptions,
    window: &connect::ConnectWindow,
    stop_rx: &watch::Receiver<bool>,
) -> anyhow::Result<Clients> {
    let names: Vec<String> = phases.iter().map(|p| p.name.clone()).collect();
    let delivery = driver.delivery();
    let new_stats = || -> Shared {
        let mut t = TaskStats::new(&names, w.topics, delivery, u64::MAX);
        t.live = opts.live.clone();
        Arc::new(Mutex::new(t))
    };
    // Sequence trackers only for this run's runners and the workload's publishers.
    let senders = Senders {
        runners: opts.runners.max(opts.runner_id),
        publishers: u16::try_from(plan::max_publishers(phases)).unwrap_or(u16::MAX),
    };
    let recorder =
        |st: &Shared| ReceiveRecorder::new(opts.runner_id, opts.run_tag, senders, st.clone());
    let wildcard = match w.protocol {
        Protocol::Mqtt => w.mqtt.as_ref().is_some_and(|m| m.wildcard),
        Protocol::Socketio => w.socketio.as_ref().is_some_and(|s| s.all_room),
        _ => false,
    };
    let mut c = Clients {
        subscribers: Vec::new(),
        publishers: Vec::new(),
        stats: Vec::new(),
    };
    for i in 0..w.subscribers {
        let topics: Vec<u32> = match wildcard {
            true => (0..w.topics).collect(),
            false => vec![i % w.topics],
        };
        let st = new_stats();
        c.stats.push(st.clone());
        let h = window
            .retry(|| driver.subscribe(i, topics.clone(), recorder(&st), stop_rx.clone()))
            .await
            .map_err(|e| e.context(format!("subscriber {i}")))?;
        c.subscribers.push(h);
    }
    for i in 0..plan::max_publishers(phases) {
        let st = new_stats();
        c.stats.push(st.clone());
        let p = window
            .retry(|| driver.publisher(i, st.clone(), recorder(&st), stop_rx.clone()))
            .await
            .map_err(|e| e.context(format!("publisher {i}")))?;
        c.publishers.push((p, st));
    }
    Ok(c)
}

/// `stopWhen` of a staged workload: stages past a broken threshold are not started.
struct StageStop {
    /// Index of the last phase allowed to start (all, until a stage breaks a threshold).
    allowed: Arc<AtomicUsize>,
    /// The stage that broke it.
    breaking: Arc<Mutex<Option<String>>>,
}

impl StageStop {
    fn new() -> Self {
        StageStop {
            allowed: Arc::new(AtomicUsize::new(usize::MAX)),
            breaking: Arc::default(),
        }
    }

    /// Checks each stage just after its end (the task to abort when the run is over).
    fn watch(
        &self,
        w: &Workload,
        phases: &Arc<Vec<PlanPhase>>,
        stats: &[Shared],
        start_us: u64,
    ) -> Option<JoinHandle<()>> {
        let stop_when = w.stages.as_ref().and_then(|s| s.stop_when.clone())?;
        let (phases, stats) = (phases.clone(), stats.to_vec());
        let (allowed, breaking) = (self.allowed.clone(), self.breaking.clone());
        Some(tokio::spawn(async move {
            for (k, ph) in phases.iter().enumerate().filter(|(_, p)| p.is_stage) {
                let Length::Timed {
                    start_us: off,
                    seconds,
                } = ph.length
                else {
                    continue;
                };
                let end = start_us + off + u64::from(seconds) * 1_000_000;
                tokio::time::sleep_until(clock::instant_at(end + 200_000).into()).await;
                let mut p = figures::collect_phase(&stats, k);
                p.finalize();
                let low = (stop_when.delivered_ratio_below)
                    .is_some_and(|r| p.summary.delivered_ratio < r);
                let slow = (stop_when.p99_micros_above)
                    .is_some_and(|l| p.summary.latency.as_ref().is_some_and(|s| s.p99_us > l));
                if low || slow {
                    allowed.store(k, Ordering::SeqCst);
                    *breaking.lock().expect("lock") = Some(ph.name.clone());
                    break;
                }
            }
        }))
    }
}

fn start_publishers(
    w: &Workload,
    phases: &Arc<Vec<PlanPhase>>,
    driver: &Arc<dyn Driver>,
    opts: &RunOptions,
    publishers: Vec<(Box<dyn Publisher>, Shared)>,
    start_us: u64,
    stop: &StageStop,
) -> Vec<JoinHandle<Box<dyn Publisher>>> {
    let mut tasks = Vec::new();
    for (i, (p, st)) in publishers.into_iter().enumerate() {
        let ctx = PubCtx {
            idx: i as u32,
            runner: opts.runner_id,
            run_tag: opts.run_tag,
            topic: i as u32 % w.topics,
            phases: phases.clone(),
            start_us,
            allowed: stop.allowed.clone(),
            closed_batch: (w.publish_batch).map_or(driver.closed_loop_batch(), u64::from),
            burst: u64::from(w.publish_batch.unwrap_or(1)),
        };
        st.lock().expect("stats lock").acks.stream = Some((ctx.idx as u16, ctx.topic));
        tasks.push(tokio::spawn(publish_all(ctx, p, st)));
    }
    tasks
}

/// Quiet time after this runner's own messages have all arrived, for other runners' last
/// messages still in flight.
const DRAIN_QUIET: Duration = Duration::from_millis(150);

/// Waits until every message this runner sent has reached this runner's subscribers and
/// nothing more arrived for `DRAIN_QUIET`, or the drain time is up (messages still missing then
/// count as not delivered).
async fn drain(stats: &[Shared], delivery: Delivery, limit: Duration) {
    let deadline = tokio::time::Instant::now() + limit;
    let (mut last_total, mut quiet_since) = (u64::MAX, tokio::time::Instant::now());
    loop {
        let counts = {
            let guards: Vec<_> = stats
                .iter()
                .map(|s| s.lock().expect("stats lock"))
                .collect();
            let tasks: Vec<&TaskStats> = guards.iter().map(|g| &**g).collect();
            DrainCounts::of(&tasks, delivery)
        };
        let now = tokio::time::Instant::now();
        if counts.received != last_total {
            (last_total, quiet_since) = (counts.received, now);
        }
        let own_done = counts.own_unique >= counts.expected;
        if (own_done && now - quiet_since >= DRAIN_QUIET) || now >= deadline {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}
