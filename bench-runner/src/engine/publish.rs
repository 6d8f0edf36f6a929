//! One publisher's part of a run: each phase it takes part in, on its open-loop schedule (or
//! closed loop, as fast as the client takes messages), recorded into its task's stats.
use crate::clock;
use crate::drivers::{Outgoing, Publisher};
use crate::payload::Header;
use crate::plan::{Length, PlanPhase, Ramp, Schedule};
use crate::recorder::Shared;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// Due messages built and handed to the driver per call (open loop).
const BATCH: usize = 128;

pub(super) struct PubCtx {
    pub idx: u32,
    pub runner: u16,
    pub run_tag: u16,
    pub topic: u32,
    pub phases: Arc<Vec<PlanPhase>>,
    pub start_us: u64,
    pub allowed: Arc<AtomicUsize>,
    pub closed_batch: u64,
    /// Open loop: messages released together (`publishBatch`).
    pub burst: u64,
}

impl PubCtx {
    fn header(&self, k: usize, seq: u64, intended_us: u64) -> Header {
        Header {
            run: self.run_tag,
            runner: self.runner,
            phase: k as u8,
            publisher: self.idx as u16,
            seq,
            intended_us,
        }
    }
}

/// This publisher's part of a phase: when it starts and ends, how many messages, on what
/// schedule (`None`: closed loop).
#[derive(Clone, Copy)]
struct PhaseWindow {
    start: u64,
    end: Option<u64>,
    total: Option<u64>,
    sched: Option<Schedule>,
}

pub(super) async fn publish_all(
    ctx: PubCtx,
    mut p: Box<dyn Publisher>,
    st: Shared,
) -> Box<dyn Publisher> {
    let mut seq = 0u64;
    let mut last_phase = None;
    for (k, ph) in ctx.phases.iter().enumerate() {
        if k > ctx.allowed.load(Ordering::SeqCst) {
            break;
        }
        let Some(window) = join_phase(&ctx, ph).await else {
            continue;
        };
        st.lock().expect("stats lock").phase_start_us[k].get_or_insert(window.start);
        send_phase(&ctx, k, window, &mut seq, p.as_mut(), &st).await;
        last_phase = Some((k, window.start));
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

/// Waits until this publisher's part of `ph` starts; `None` when it has no part in it.
async fn join_phase(ctx: &PubCtx, ph: &PlanPhase) -> Option<PhaseWindow> {
    match ph.length {
        Length::Timed { seconds: 0, .. } => None,
        Length::Timed { start_us, seconds } => {
            // Ramped connections: this publisher joins when the linear count reaches it.
            let join = ph.join_offset_us(ctx.idx, seconds)?;
            let s = ctx.start_us + start_us + join;
            let end = ctx.start_us + start_us + u64::from(seconds) * 1_000_000;
            if s >= end {
                return None;
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
            Some(PhaseWindow {
                start: s,
                end: Some(end),
                total,
                sched,
            })
        }
        Length::Count {
            messages,
            not_before_us,
            ..
        } => {
            if ctx.idx >= ph.publishers {
                return None;
            }
            tokio::time::sleep_until(clock::instant_at(ctx.start_us + not_before_us).into()).await;
            Some(PhaseWindow {
                start: clock::now_us(),
                end: None,
                total: Some(messages),
                sched: ph.rate.map(Schedule::constant),
            })
        }
    }
}

/// `due` messages are due: release up to the end of the burst the last one belongs to.
fn burst_end(due: u64, burst: u64) -> u64 {
    due.div_ceil(burst) * burst
}

/// The messages of one send, with the send lag of each (open loop).
struct Batch {
    messages: Vec<Outgoing>,
    lags: Vec<u64>,
    cap: usize,
    /// Messages of this phase built so far.
    built: u64,
}

/// What a publisher does next in a phase.
enum Step {
    Send,
    SleepUntil(u64),
    Done,
}

impl Batch {
    fn push(&mut self, ctx: &PubCtx, k: usize, seq: &mut u64, intended: u64, lag: Option<u64>) {
        self.lags.extend(lag);
        self.messages.push(Outgoing {
            topic: ctx.topic,
            header: ctx.header(k, *seq, intended),
        });
        self.built += 1;
        *seq += 1;
    }

    /// Fills the batch with what is due at `now`.
    fn fill(&mut self, ctx: &PubCtx, k: usize, w: &PhaseWindow, now: u64, seq: &mut u64) -> Step {
        self.messages.clear();
        self.lags.clear();
        // Open loop: a publisher that falls far behind stops at the end plus this grace and
        // reports the rest as unsent instead of running on.
        let grace = w.end.map_or(0, |e| (e - w.start) / 10).max(1_000_000);
        match (w.sched, w.total) {
            (Some(sc), Some(total)) => {
                if self.built >= total || w.end.is_some_and(|e| now > e + grace) {
                    return Step::Done;
                }
                let due = burst_end(sc.due(now.saturating_sub(w.start)), ctx.burst).min(total);
                if due <= self.built {
                    return Step::SleepUntil(w.start + sc.at_us(self.built));
                }
                while self.built < due && self.messages.len() < self.cap {
                    // Every message of a burst is due when its first one is.
                    let intended = w.start + sc.at_us(self.built - self.built % ctx.burst);
                    self.push(ctx, k, seq, intended, Some(now.saturating_sub(intended)));
                }
            }
            // Closed loop: as fast as the client takes them; intended = actual send time.
            (None, total) => {
                if total.is_some_and(|t| self.built >= t) || w.end.is_some_and(|e| now >= e) {
                    return Step::Done;
                }
                // Larger batches mean fewer writes (loopback takes ~18× more small messages
                // per second when they share a write); the driver says how many fit.
                let n = total.map_or(ctx.closed_batch, |t| (t - self.built).min(ctx.closed_batch));
                for _ in 0..n {
                    self.push(ctx, k, seq, now, None);
                }
            }
            (Some(_), None) => unreachable!("rated phases always have a count"),
        }
        Step::Send
    }
}

async fn send_phase(
    ctx: &PubCtx,
    k: usize,
    w: PhaseWindow,
    seq: &mut u64,
    p: &mut dyn Publisher,
    st: &Shared,
) {
    // A burst is never split across two sends.
    let cap = BATCH.max(ctx.burst as usize);
    let mut batch = Batch {
        messages: Vec::with_capacity(cap),
        lags: Vec::with_capacity(cap),
        cap,
        built: 0,
    };
    while k <= ctx.allowed.load(Ordering::Relaxed) {
        match batch.fill(ctx, k, &w, clock::now_us(), seq) {
            Step::Done => break,
            Step::SleepUntil(next) => {
                tokio::time::sleep_until(clock::instant_at(next).into()).await;
                continue;
            }
            Step::Send => {}
        }
        let sent = p.send_batch(&batch.messages).await as u64;
        tracing::trace!(topic = ctx.topic, sent, "batch sent");
        record_sent(st, k, ctx.topic, w.start, sent, &batch.lags);
    }
    let mut g = st.lock().expect("stats lock");
    g.phases[k].scheduled += match (w.sched, w.total) {
        (Some(_), Some(t)) => t,
        _ => batch.built,
    };
}

fn record_sent(st: &Shared, k: usize, topic: u32, phase_start: u64, sent: u64, lags: &[u64]) {
    let after = clock::now_us();
    let mut g = st.lock().expect("stats lock");
    g.count_published(after, sent);
    let s = &mut g.phases[k];
    s.published += sent;
    s.published_by_topic[topic as usize] += sent;
    for &l in lags {
        s.send_lag.record(l);
    }
    s.publish_seconds = s.publish_seconds.max((after - phase_start) as f64 / 1e6);
    if let Some(live) = &g.live {
        live.sent(sent);
        live.lags_us(lags);
    }
}
