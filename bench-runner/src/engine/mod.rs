//! Runs a workload: connects subscribers and publishers, waits at the start gate, drives each
//! publisher on its open-loop schedule, drains, and assembles the result.
use crate::clock;
use crate::drain_counts::DrainCounts;
use crate::drivers::{self, Driver, Outgoing, Publisher};
use crate::options::RunOptions;
use crate::payload::Header;
use crate::plan::{self, Length, PlanPhase, Ramp, Schedule};
use crate::recorder::{self, ReceiveRecorder, Senders, Shared, TaskStats};
use crate::{acks, connect, connections, cpu, progress};
use msgbench_crds::workload::{Protocol, Workload};
use runner_api::coarse::CoarseLatency;
use runner_api::result::{
    self, Delivery, Generator, PublishStall, RunnerResult, SegmentStats, TimelinePoint,
    SATURATION_CPU, SATURATION_LAG_P99_US,
};
use runner_api::target::TargetUrl;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::watch;

/// Due messages built and handed to the driver per call (open loop).
const BATCH: usize = 128;

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
    let names: Vec<String> = phases.iter().map(|p| p.name.clone()).collect();
    let delivery = driver.delivery();
    let new_stats = || -> Shared {
        let mut t = TaskStats::new(&names, w.topics, delivery, u64::MAX);
        t.live = opts.live.clone();
        Arc::new(Mutex::new(t))
    };
    let (stop_tx, stop_rx) = watch::channel(false);
    let mut all_stats: Vec<Shared> = Vec::new();
    // Sequence trackers only for this run's runners and the workload's publishers.
    let senders = Senders {
        runners: opts.runners.max(opts.runner_id),
        publishers: u16::try_from(plan::max_publishers(&phases)).unwrap_or(u16::MAX),
    };

    // Subscribers first, so nothing published is missed.
    let wildcard = match w.protocol {
        Protocol::Mqtt => w.mqtt.as_ref().is_some_and(|m| m.wildcard),
        Protocol::Socketio => w.socketio.as_ref().is_some_and(|s| s.all_room),
        _ => false,
    };
    let mut sub_tasks = Vec::new();
    for i in 0..w.subscribers {
        let topics = if wildcard {
            (0..w.topics).collect()
        } else {
            vec![i % w.topics]
        };
        let st = new_stats();
        all_stats.push(st.clone());
        let h = window
            .retry(|| {
                let rec = ReceiveRecorder::new(opts.runner_id, opts.run_tag, senders, st.clone());
                driver.subscribe(i, topics.clone(), rec, stop_rx.clone())
            })
            .await
            .map_err(|e| e.context(format!("subscriber {i}")))?;
        sub_tasks.push(h);
    }
    let mut publishers: Vec<(Box<dyn Publisher>, Shared)> = Vec::new();
    for i in 0..plan::max_publishers(&phases) {
        let st = new_stats();
        all_stats.push(st.clone());
        let p = window
            .retry(|| {
                let rec = ReceiveRecorder::new(opts.runner_id, opts.run_tag, senders, st.clone());
                driver.publisher(i, st.clone(), rec, stop_rx.clone())
            })
            .await
            .map_err(|e| e.context(format!("publisher {i}")))?;
        publishers.push((p, st));
    }

    if let Some(g) = &opts.gate {
        g.observe(&all_stats);
        g.wait().await?;
    }
    let cpu0 = cpu::process_cpu_seconds().unwrap_or(0.0);
    let start_us = clock::now_us() + 20_000;
    let measured_origin = start_us + u64::from(w.warmup_seconds) * 1_000_000;
    for s in &all_stats {
        s.lock().expect("stats lock").timeline_origin_us = measured_origin;
    }
    // socketio `rest`: REST endpoints sampled over the measured publishing, reported apart.
    let rest_probe = w
        .socketio
        .as_ref()
        .and_then(|o| o.rest.as_ref())
        .filter(|_| w.protocol == Protocol::Socketio)
        .map(|o| drivers::socketio::rest_probe::RestProbe::start(target, o, measured_origin))
        .transpose()?;

    // Stages past a broken threshold are not started (index of the last allowed phase).
    let allowed = Arc::new(AtomicUsize::new(usize::MAX));
    let breaking = Arc::new(Mutex::new(None::<String>));
    let evaluator = w
        .stages
        .as_ref()
        .and_then(|s| s.stop_when.clone())
        .map(|stop_when| {
            let (phases, stats, allowed, breaking) = (
                phases.clone(),
                all_stats.clone(),
                allowed.clone(),
                breaking.clone(),
            );
            tokio::spawn(async move {
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
                    let mut p = collect_phase(&stats, k);
                    p.finalize();
                    let low = stop_when
                        .delivered_ratio_below
                        .is_some_and(|r| p.summary.delivered_ratio < r);
                    let slow = stop_when
                        .p99_micros_above
                        .is_some_and(|l| p.summary.latency.as_ref().is_some_and(|s| s.p99_us > l));
                    if low || slow {
                        allowed.store(k, Ordering::SeqCst);
                        *breaking.lock().expect("lock") = Some(ph.name.clone());
                        break;
                    }
                }
            })
        });

    let bar = progress::ConsoleProgress::new(opts.progress, &phases, w, all_stats.clone());
    let mut tasks = Vec::new();
    for (i, (p, st)) in publishers.into_iter().enumerate() {
        let ctx = PubCtx {
            idx: i as u32,
            runner: opts.runner_id,
            run_tag: opts.run_tag,
            topic: i as u32 % w.topics,
            phases: phases.clone(),
            start_us,
            allowed: allowed.clone(),
            closed_batch: w
                .publish_batch
                .map_or(driver.closed_loop_batch(), u64::from),
            burst: u64::from(w.publish_batch.unwrap_or(1)),
        };
        st.lock().expect("stats lock").acks.stream = Some((ctx.idx as u16, ctx.topic));
        tasks.push(tokio::spawn(publish_all(ctx, p, st)));
    }
    // Publishers stay connected until the drain is over: round-trip replies arrive on them.
    let mut connected = Vec::with_capacity(tasks.len());
    for t in tasks {
        connected.push(t.await?);
    }
    let rest = match rest_probe {
        Some(p) => p.finish().await,
        None => Vec::new(),
    };
    drain(
        &all_stats,
        delivery,
        Duration::from_secs(u64::from(w.drain_seconds)),
    )
    .await;
    let _ = stop_tx.send(true);
    for t in sub_tasks {
        let _ = tokio::time::timeout(Duration::from_secs(5), t).await;
    }
    drop(connected);
    if let Some(e) = evaluator {
        e.abort();
    }
    drop(bar);
    let wall = (clock::now_us() - start_us) as f64 / 1e6;
    let cpu_s = cpu::process_cpu_seconds().unwrap_or(0.0) - cpu0;

    let last_kept = allowed.load(Ordering::SeqCst);
    let mut per_phase: Vec<SegmentStats> = (0..phases.len())
        .map(|k| collect_phase(&all_stats, k))
        .collect();
    per_phase.truncate(last_kept.saturating_add(1).min(phases.len()));
    for (p, ph) in per_phase.iter_mut().zip(phases.iter()) {
        p.rate_per_publisher = ph.rate;
        p.publishers = ph.publishers;
        p.ramp_to = match ph.ramp {
            Some(Ramp::Rate(v) | Ramp::Publishers(v)) => Some(v),
            None => None,
        };
    }
    if driver.publish_acks() {
        ack_figures(&mut per_phase, &all_stats, opts.runner_id);
    }
    let timeline = collect_timeline(&all_stats);
    let warmup = (w.warmup_seconds > 0).then(|| per_phase[0].clone());
    let body = &per_phase[1..];
    let sessions: Vec<SegmentStats> = body
        .iter()
        .zip(&phases[1..])
        .filter(|(_, ph)| ph.is_session)
        .map(|(p, _)| p.clone())
        .collect();
    let stages: Vec<SegmentStats> = body
        .iter()
        .zip(&phases[1..])
        .filter(|(_, ph)| ph.is_stage)
        .map(|(p, _)| p.clone())
        .collect();
    let measured = result::aggregate_measured(body);

    let cpus = cpu::available_cpus();
    let mut generator = Generator {
        closed_loop: phases.iter().skip(1).any(|p| p.rate.is_none()),
        cpu_seconds: (cpu_s * 1000.0).round() / 1000.0,
        wall_seconds: (wall * 1000.0).round() / 1000.0,
        cpus,
        ..Default::default()
    };
    saturation(&mut generator, &per_phase, opts.runner_id);
    let mut r = RunnerResult {
        format: result::FORMAT.into(),
        target: target.raw.clone(),
        runner_ids: vec![opts.runner_id],
        workload: (**w).clone(),
        generator,
        warmup,
        measured,
        sessions,
        stages,
        breaking_stage: breaking.lock().expect("lock").clone(),
        connections: None,
        timeline,
        rest,
    };
    r.finalize();
    Ok(r)
}

/// Flags a generator that could not keep its schedule: high send lag, messages it never got to
/// send, or its CPU used up.
fn saturation(g: &mut Generator, phases: &[SegmentStats], runner: u16) {
    let mut lag = runner_api::histo::Histo::default();
    let (mut scheduled, mut published) = (0, 0);
    for p in phases {
        lag.add(&p.send_lag);
        if p.rate_per_publisher.is_some() {
            scheduled += p.scheduled;
            published += p.published;
        }
    }
    let mut reasons = Vec::new();
    if !g.closed_loop && !lag.is_empty() && lag.0.value_at_quantile(0.99) > SATURATION_LAG_P99_US {
        reasons.push(format!(
            "runner {runner}: send lag p99 {} µs > {} µs",
            lag.0.value_at_quantile(0.99),
            SATURATION_LAG_P99_US
        ));
    }
    if published < scheduled {
        reasons.push(format!(
            "runner {runner}: sent {published} of {scheduled} scheduled messages"
        ));
    }
    if g.wall_seconds > 0.0 && g.cpu_seconds / g.wall_seconds / g.cpus > SATURATION_CPU {
        reasons.push(format!(
            "runner {runner}: CPU {:.0}% of {} CPUs",
            100.0 * g.cpu_seconds / g.wall_seconds / g.cpus,
            g.cpus
        ));
    }
    g.saturated = !reasons.is_empty();
    g.reasons = reasons;
}

fn collect_phase(stats: &[Shared], k: usize) -> SegmentStats {
    let mut out: Option<SegmentStats> = None;
    let (mut first_send, mut last_recv) = (u64::MAX, 0);
    for s in stats {
        let s = s.lock().expect("stats lock");
        if let Some(t) = s.phase_start_us[k] {
            first_send = first_send.min(t);
        }
        last_recv = last_recv.max(s.last_recv_us[k]);
        match &mut out {
            None => out = Some(s.phases[k].clone()),
            Some(o) => {
                let pubs = o.publishers;
                o.add(&s.phases[k]);
                o.publishers = pubs;
            }
        }
    }
    let mut out = out.unwrap_or_default();
    if last_recv > first_send {
        out.delivery_seconds = (last_recv - first_send) as f64 / 1e6;
    }
    out
}

/// `lostAcked` and the publish stall of each phase, from all of this runner's tasks at once
/// (after the drain, so a message still missing is lost).
fn ack_figures(per_phase: &mut [SegmentStats], stats: &[Shared], runner: u16) {
    let guards: Vec<_> = stats
        .iter()
        .map(|s| s.lock().expect("stats lock"))
        .collect();
    let tasks: Vec<&TaskStats> = guards.iter().map(|g| &**g).collect();
    for (k, p) in per_phase.iter_mut().enumerate() {
        // Every driver with publish acks fans out (each JetStream subscriber has its own
        // consumer; no MQTT shared subscriptions).
        let lost = recorder::lost_acked_in_phase(&tasks, k, runner, acks::Expect::Every);
        p.lost_acked = Some(lost.messages);
        p.lost_acked_deliveries = Some(lost.deliveries);
        let stall = tasks
            .iter()
            .filter_map(|t| t.acks.longest_stall(k))
            .map(|(micros, start_us)| PublishStall {
                micros,
                started_unix_ms: clock::unix_ms(start_us),
            })
            .fold(PublishStall::default(), PublishStall::longest);
        p.publish_stall = Some(stall);
    }
}

fn collect_timeline(stats: &[Shared]) -> Vec<TimelinePoint> {
    let mut per = result::PerSecond::default();
    for s in stats {
        let s = s.lock().expect("stats lock");
        add_into(&mut per.published, &s.timeline_published);
        add_into(&mut per.received, &s.timeline_received);
        add_into(&mut per.acked, &s.timeline_acked);
        add_into(&mut per.duplicates, &s.timeline_duplicates);
        add_into(&mut per.out_of_order, &s.timeline_out_of_order);
        if per.latency.len() < s.timeline_latency.len() {
            per.latency
                .resize(s.timeline_latency.len(), CoarseLatency::default());
        }
        for (a, b) in per.latency.iter_mut().zip(&s.timeline_latency) {
            a.add(b);
        }
    }
    result::timeline_points(&per)
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

pub(crate) fn add_into(a: &mut Vec<u64>, b: &[u64]) {
    if a.len() < b.len() {
        a.resize(b.len(), 0);
    }
    for (x, y) in a.iter_mut().zip(b) {
        *x = x.saturating_add(*y);
    }
}

struct PubCtx {
    idx: u32,
    runner: u16,
    run_tag: u16,
    topic: u32,
    phases: Arc<Vec<PlanPhase>>,
    start_us: u64,
    allowed: Arc<AtomicUsize>,
    closed_batch: u64,
    /// Open loop: messages released together (`publishBatch`).
    burst: u64,
}

async fn publish_all(ctx: PubCtx, mut p: Box<dyn Publisher>, st: Shared) -> Box<dyn Publisher> {
    let mut seq = 0u64;
    let mut last_phase = None;
    for (k, ph) in ctx.phases.iter().enumerate() {
        if k > ctx.allowed.load(Ordering::SeqCst) {
            break;
        }
        let (phase_start, end, total, sched) = match ph.length {
            Length::Timed { seconds: 0, .. } => continue,
            Length::Timed { start_us, seconds } => {
                // Ramped connections: this publisher joins when the linear count reaches it.
                let Some(join) = ph.join_offset_us(ctx.idx, seconds) else {
                    continue;
                };
                let s = ctx.start_us + start_us + join;
                let end = ctx.start_us + start_us + u64::from(seconds) * 1_000_000;
                if s >= end {
                    continue;
                }
                tokio::time::sleep_until(clock::instant_at(s).into()).await;
                let sched = ph.rate.map(|r| match ph.ramp {
                    Some(Ramp::Rate(to)) => Schedule {
                        from: r,
                        to,
                        seconds,
                    },
                    _ => Schedule::constant(r),
                });
                let total = sched.map(|x| match ph.ramp {
                    Some(Ramp::Rate(_)) => x.total(seconds),
                    _ => (end - s) * u64::from(x.from) / 1_000_000,
                });
                (s, Some(end), total, sched)
            }
            Length::Count {
                messages,
                not_before_us,
                ..
            } => {
                if ctx.idx >= ph.publishers {
                    continue;
                }
                tokio::time::sleep_until(clock::instant_at(ctx.start_us + not_before_us).into())
                    .await;
                (
                    clock::now_us(),
                    None,
                    Some(messages),
                    ph.rate.map(Schedule::constant),
                )
            }
        };
        st.lock().expect("stats lock").phase_start_us[k].get_or_insert(phase_start);
        send_phase(
            &ctx,
            k,
            sched,
            phase_start,
            end,
            total,
            &mut seq,
            p.as_mut(),
            &st,
        )
        .await;
        last_phase = Some((k, phase_start));
        if let Length::Count {
            pause_after_seconds,
            ..
        } = ph.length
        {
            tokio::time::sleep(Duration::from_secs(u64::from(pause_after_seconds))).await;
        }
    }
    // The flush belongs to the last phase's publish time (what the server had to take in).
    p.finish().await;
    // Acks still missing now never come: a stall still open ends here.
    st.lock().expect("stats lock").acks.finish(clock::now_us());
    if let Some((k, s)) = last_phase {
        let took = (clock::now_us() - s) as f64 / 1e6;
        let mut g = st.lock().expect("stats lock");
        let ph = &mut g.phases[k];
        ph.publish_seconds = ph.publish_seconds.max(took);
    }
    p
}

/// `due` messages are due: release up to the end of the burst the last one belongs to.
fn burst_end(due: u64, burst: u64) -> u64 {
    due.div_ceil(burst) * burst
}

#[allow(clippy::too_many_arguments)]
async fn send_phase(
    ctx: &PubCtx,
    k: usize,
    sched: Option<Schedule>,
    phase_start: u64,
    end: Option<u64>,
    total: Option<u64>,
    seq: &mut u64,
    p: &mut dyn Publisher,
    st: &Shared,
) {
    // A burst is never split across two sends.
    let cap = BATCH.max(ctx.burst as usize);
    let mut batch: Vec<Outgoing> = Vec::with_capacity(cap);
    let mut lags: Vec<u64> = Vec::with_capacity(cap);
    let mut i = 0u64;
    // Open loop: a publisher that falls far behind stops at the end plus this grace and
    // reports the rest as unsent instead of running on.
    let grace = end
        .map(|e| (e - phase_start) / 10)
        .unwrap_or(0)
        .max(1_000_000);
    let header = |seq: u64, intended_us: u64| Header {
        run: ctx.run_tag,
        runner: ctx.runner,
        phase: k as u8,
        publisher: ctx.idx as u16,
        seq,
        intended_us,
    };
    loop {
        if k > ctx.allowed.load(Ordering::Relaxed) {
            break;
        }
        let now = clock::now_us();
        batch.clear();
        lags.clear();
        match (sched, total) {
            (Some(sc), Some(total)) => {
                if i >= total || end.is_some_and(|e| now > e + grace) {
                    break;
                }
                let due = burst_end(sc.due(now.saturating_sub(phase_start)), ctx.burst).min(total);
                if due <= i {
                    let next = phase_start + sc.at_us(i);
                    tokio::time::sleep_until(clock::instant_at(next).into()).await;
                    continue;
                }
                while i < due && batch.len() < cap {
                    // Every message of a burst is due when its first one is.
                    let intended = phase_start + sc.at_us(i - i % ctx.burst);
                    lags.push(now.saturating_sub(intended));
                    batch.push(Outgoing {
                        topic: ctx.topic,
                        header: header(*seq, intended),
                    });
                    i += 1;
                    *seq += 1;
                }
            }
            // Closed loop: as fast as the client takes them; intended = actual send time.
            (None, total) => {
                if total.is_some_and(|t| i >= t) || end.is_some_and(|e| now >= e) {
                    break;
                }
                // Larger batches mean fewer writes (loopback takes ~18× more small messages
                // per second when they share a write); the driver says how many fit.
                let n = total.map_or(ctx.closed_batch, |t| (t - i).min(ctx.closed_batch));
                for _ in 0..n {
                    batch.push(Outgoing {
                        topic: ctx.topic,
                        header: header(*seq, now),
                    });
                    i += 1;
                    *seq += 1;
                }
            }
            (Some(_), None) => unreachable!("rated phases always have a count"),
        }
        let sent = p.send_batch(&batch).await as u64;
        tracing::trace!(topic = ctx.topic, sent, "batch sent");
        let after = clock::now_us();
        let mut g = st.lock().expect("stats lock");
        g.count_published(after, sent);
        let s = &mut g.phases[k];
        s.published += sent;
        s.published_by_topic[ctx.topic as usize] += sent;
        for &l in &lags {
            s.send_lag.record(l);
        }
        s.publish_seconds = s.publish_seconds.max((after - phase_start) as f64 / 1e6);
        if let Some(live) = &g.live {
            live.sent(sent);
            live.lags_us(&lags);
        }
    }
    let mut g = st.lock().expect("stats lock");
    g.phases[k].scheduled += match (sched, total) {
        (Some(_), Some(t)) => t,
        _ => i,
    };
}
