//! What a messaging run's records add up to: each phase's segment (with ack figures where
//! the server acknowledges publishes), the timeline, whether the generator kept up, and the
//! runner's result.
use crate::clock;
use crate::kept::{self, ReadBack};
use crate::options::RunOptions;
use crate::plan::{PlanPhase, Ramp};
use crate::recorder::{self, add_into, Shared, TaskStats};
use crate::{acks, cpu};
use msgbench_crds::workload::Workload;
use runner_api::coarse::CoarseLatency;
use runner_api::result::{
    self, Generator, PublishStall, RunnerResult, SegmentStats, TimelinePoint, SATURATION_CPU,
    SATURATION_LAG_P99_US,
};
use runner_api::target::TargetUrl;

/// What a finished messaging run left to add up.
pub(super) struct Ran<'a> {
    pub phases: &'a [PlanPhase],
    pub stats: &'a [Shared],
    /// Index of the last phase that ran (a stage broke `stopWhen`: none after it).
    pub last_kept: usize,
    pub breaking_stage: Option<String>,
    /// Whether the server acknowledged each publish (`Driver::publish_acks`).
    pub publish_acks: bool,
    /// The stream read back after the drain (`ackedNotKept`); `None`: nothing to read back.
    pub kept: Option<crate::kept::ReadBack>,
    pub rest: Vec<result::RestLatency>,
}

/// Seconds the run took, on the wall clock and of this process's CPU.
pub(super) struct Took {
    pub wall: f64,
    pub cpu: f64,
}

pub(super) fn result(
    w: &Workload,
    target: &TargetUrl,
    opts: &RunOptions,
    ran: Ran<'_>,
    took: Took,
) -> RunnerResult {
    let per_phase = segments(&ran, opts.runner_id);
    let timeline = collect_timeline(ran.stats);
    let warmup = (w.warmup_seconds > 0).then(|| per_phase[0].clone());
    let body = &per_phase[1..];
    let of_kind = |kind: fn(&PlanPhase) -> bool| -> Vec<SegmentStats> {
        (body.iter().zip(&ran.phases[1..]))
            .filter(|(_, ph)| kind(ph))
            .map(|(p, _)| p.clone())
            .collect()
    };
    let sessions = of_kind(|ph| ph.is_session);
    let stages = of_kind(|ph| ph.is_stage);
    let measured = result::aggregate_measured(body);
    let mut generator = Generator {
        closed_loop: ran.phases.iter().skip(1).any(|p| p.rate.is_none()),
        cpu_seconds: (took.cpu * 1000.0).round() / 1000.0,
        wall_seconds: (took.wall * 1000.0).round() / 1000.0,
        cpus: cpu::available_cpus(),
        ..Default::default()
    };
    saturation(&mut generator, &per_phase, opts.runner_id);
    let mut r = RunnerResult {
        format: result::FORMAT.into(),
        target: target.raw.clone(),
        runner_ids: vec![opts.runner_id],
        workload: w.clone(),
        generator,
        warmup,
        measured,
        sessions,
        stages,
        breaking_stage: ran.breaking_stage,
        connections: None,
        timeline,
        rest: ran.rest,
    };
    r.finalize();
    r
}

/// Each phase that ran, with the plan's rate, publishers and ramp.
fn segments(ran: &Ran<'_>, runner: u16) -> Vec<SegmentStats> {
    let mut per_phase: Vec<SegmentStats> = (0..ran.phases.len())
        .map(|k| collect_phase(ran.stats, k))
        .collect();
    per_phase.truncate(ran.last_kept.saturating_add(1).min(ran.phases.len()));
    for (p, ph) in per_phase.iter_mut().zip(ran.phases.iter()) {
        p.rate_per_publisher = ph.rate;
        p.publishers = ph.publishers;
        p.ramp_to = match ph.ramp {
            Some(Ramp::Rate(v) | Ramp::Publishers(v)) => Some(v),
            None => None,
        };
    }
    if ran.publish_acks {
        ack_figures(&mut per_phase, ran.stats, runner);
    }
    if let Some(kept) = &ran.kept {
        kept_figures(&mut per_phase, ran.stats, runner, kept);
    }
    per_phase
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

pub(super) fn collect_phase(stats: &[Shared], k: usize) -> SegmentStats {
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
    with_tasks(stats, |tasks| ack_figures_of(per_phase, tasks, runner));
}

/// Runs `f` over every task's stats, all locked at once.
fn with_tasks(stats: &[Shared], f: impl FnOnce(&[&TaskStats])) {
    let guards: Vec<_> = stats
        .iter()
        .map(|s| s.lock().expect("stats lock"))
        .collect();
    let tasks: Vec<&TaskStats> = guards.iter().map(|g| &**g).collect();
    f(&tasks);
}

fn ack_figures_of(per_phase: &mut [SegmentStats], tasks: &[&TaskStats], runner: u16) {
    for (k, p) in per_phase.iter_mut().enumerate() {
        // Every driver with publish acks fans out (each JetStream subscriber has its own
        // consumer; no MQTT shared subscriptions).
        let lost = recorder::lost_acked_in_phase(tasks, k, runner, acks::Expect::Every);
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

/// `ackedNotKept` of each phase from the read-back, or why it is unavailable.
fn kept_figures(per_phase: &mut [SegmentStats], stats: &[Shared], runner: u16, kept: &ReadBack) {
    with_tasks(stats, |tasks| {
        kept_figures_of(per_phase, tasks, runner, kept)
    });
}

fn kept_figures_of(
    per_phase: &mut [SegmentStats],
    tasks: &[&TaskStats],
    runner: u16,
    kept: &ReadBack,
) {
    for (k, p) in per_phase.iter_mut().enumerate() {
        match kept {
            Ok(kept) => {
                p.acked_not_kept = Some(kept::acked_not_kept_in_phase(tasks, k, kept));
                p.acked_not_kept_from = Some(kept.from);
            }
            Err(why) => p.acked_not_kept_unavailable = Some(format!("runner {runner}: {why}")),
        }
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
