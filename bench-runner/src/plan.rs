//! Turns a workload into phases. Phase 0 is always warm-up (possibly empty); measured phases
//! follow, each with the header phase byte equal to its index.
use msgbench_crds::workload::{StageDimension, StageShape, Stages, Violation, Workload};

#[derive(Clone, Debug, PartialEq)]
pub enum Length {
    /// Runs for this long from its scheduled start (shared by all publishers).
    Timed { start_us: u64, seconds: u32 },
    /// Each publisher sends this many messages, starting no earlier than `not_before_us`
    /// (the end of warm-up), then pauses.
    Count {
        messages: u64,
        pause_after_seconds: u32,
        not_before_us: u64,
    },
}

/// One phase of the plan (warm-up, a session or a stage) as the engine schedules it; what it
/// measured goes into a [`runner_api::result::SegmentStats`].
#[derive(Clone, Debug, PartialEq)]
pub struct PlanPhase {
    pub name: String,
    pub length: Length,
    pub rate: Option<u32>,
    /// Publishers with index below this take part.
    pub publishers: u32,
    pub is_stage: bool,
    pub is_session: bool,
    /// Ramp: the value (`rate`, or `publishers`, by the stages' dimension) reached at the end
    /// of the phase, rising linearly from the start value.
    pub ramp: Option<Ramp>,
}

#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Ramp {
    /// Per-publisher rate rises linearly from `rate` to this.
    Rate(u32),
    /// Publishers join one by one: from `publishers` at the start to this at the end.
    Publishers(u32),
}

impl PlanPhase {
    /// Publisher `idx`'s start within the phase (µs after the phase start), or None when it
    /// takes no part. Ramped publishers join at the moment the linear count reaches them.
    pub fn join_offset_us(&self, idx: u32, seconds: u32) -> Option<u64> {
        match self.ramp {
            Some(Ramp::Publishers(to)) if idx >= self.publishers => {
                (idx < to).then(|| {
                    let span = u64::from(seconds) * 1_000_000;
                    // The count from..to reaches idx + 1 at (idx + 1 - from) / (to - from).
                    span * u64::from(idx + 1 - self.publishers) / u64::from(to - self.publishers)
                })
            }
            _ => (idx < self.publishers).then_some(0),
        }
    }

    /// Publishers that take part at some point of the phase.
    pub fn max_publishers(&self) -> u32 {
        match self.ramp {
            Some(Ramp::Publishers(to)) => to.max(self.publishers),
            _ => self.publishers,
        }
    }
}

/// When the messages of an open-loop phase are due: at a constant rate, or at a rate rising
/// linearly from `from` to `to` over `seconds` (message i is due when the integral of the
/// rate reaches i).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Schedule {
    pub from: u32,
    pub to: u32,
    pub seconds: u32,
}

impl Schedule {
    pub fn constant(rate: u32) -> Self {
        Schedule {
            from: rate,
            to: rate,
            seconds: 0,
        }
    }

    fn slope(&self) -> f64 {
        if self.seconds == 0 {
            0.0
        } else {
            (f64::from(self.to) - f64::from(self.from)) / f64::from(self.seconds)
        }
    }

    /// Messages due in the first `t_us` µs (message 0 is due at once).
    pub fn due(&self, t_us: u64) -> u64 {
        if self.seconds == 0 || self.from == self.to {
            return t_us * u64::from(self.from) / 1_000_000 + 1;
        }
        let t = t_us as f64 / 1e6;
        (f64::from(self.from) * t + self.slope() * t * t / 2.0).floor() as u64 + 1
    }

    /// When message `i` is due, µs after the phase start.
    pub fn at_us(&self, i: u64) -> u64 {
        if self.seconds == 0 || self.from == self.to {
            return i * 1_000_000 / u64::from(self.from);
        }
        // Solve from·t + slope·t²/2 = i for t ≥ 0 (stable form: no cancellation when slope
        // is small).
        let (a, k, n) = (f64::from(self.from), self.slope(), i as f64);
        let t = 2.0 * n / (a + (a * a + 2.0 * k * n).max(0.0).sqrt());
        (t * 1e6).round() as u64
    }

    /// Messages in `seconds` of this schedule.
    pub fn total(&self, seconds: u32) -> u64 {
        let s = u64::from(seconds);
        if self.seconds == 0 || self.from == self.to {
            return u64::from(self.from) * s;
        }
        ((f64::from(self.from) + f64::from(self.to)) / 2.0 * s as f64).round() as u64
    }
}

/// Phases of `w`, timed ones scheduled from offset 0 (the common start).
pub fn phases(w: &Workload) -> Vec<PlanPhase> {
    let first_rate = match &w.stages {
        Some(s) if s.dimension == StageDimension::Rate => Some(s.start),
        _ => w.rate_per_publisher,
    };
    let warmup = Length::Timed {
        start_us: 0,
        seconds: w.warmup_seconds,
    };
    let mut out = vec![plain("warmup".into(), warmup, first_rate, w.publishers)];
    let t = u64::from(w.warmup_seconds) * 1_000_000;
    if let Some(d) = w.duration_seconds {
        out.push(plain(
            "measured".into(),
            Length::Timed {
                start_us: t,
                seconds: d,
            },
            w.rate_per_publisher,
            w.publishers,
        ));
    } else if let Some(n) = w.messages_per_publisher {
        out.push(plain(
            "measured".into(),
            Length::Count {
                messages: n,
                pause_after_seconds: 0,
                not_before_us: t,
            },
            w.rate_per_publisher,
            w.publishers,
        ));
    } else if let Some(sessions) = &w.sessions {
        for (i, s) in sessions.iter().enumerate() {
            let mut p = plain(
                format!("session-{}", i + 1),
                Length::Count {
                    messages: s.messages,
                    pause_after_seconds: s.pause_after_seconds,
                    not_before_us: t,
                },
                w.rate_per_publisher,
                w.publishers,
            );
            p.is_session = true;
            out.push(p);
        }
    } else if let Some(st) = &w.stages {
        out.extend(stages(w, st, t));
    }
    out
}

/// A phase that is neither a session nor a stage.
fn plain(name: String, length: Length, rate: Option<u32>, publishers: u32) -> PlanPhase {
    PlanPhase {
        name,
        length,
        rate,
        publishers,
        is_stage: false,
        is_session: false,
        ramp: None,
    }
}

/// The stages, one after the other from `start_us`: each a step (or a ramp) up from the last.
fn stages(w: &Workload, st: &Stages, start_us: u64) -> Vec<PlanPhase> {
    let mut t = start_us;
    let mut out = Vec::new();
    for k in 0..st.count {
        let v = st.start.saturating_add(st.step.saturating_mul(k));
        let next = v.saturating_add(st.step);
        let (rate, pubs) = match st.dimension {
            StageDimension::Rate => (Some(v), w.publishers),
            StageDimension::Connections => (w.rate_per_publisher, v),
        };
        let ramp = (st.shape == StageShape::Ramp && st.step > 0).then_some(match st.dimension {
            StageDimension::Rate => Ramp::Rate(next),
            StageDimension::Connections => Ramp::Publishers(next),
        });
        let mut p = plain(
            format!("stage-{}", k + 1),
            Length::Timed {
                start_us: t,
                seconds: st.stage_seconds,
            },
            rate,
            pubs,
        );
        p.is_stage = true;
        p.ramp = ramp;
        out.push(p);
        t += u64::from(st.stage_seconds) * 1_000_000;
    }
    out
}

/// Rules the runner checks on top of [`Workload::violations`]: values its own arithmetic
/// cannot take (a connection rate of 0 divides by zero; a NaN ratio threshold compares false
/// with every ratio, so the breaking-point search would never stop).
pub fn violations(w: &Workload) -> Vec<Violation> {
    let mut v = Vec::new();
    let mut bad = |field: &str, rule: &str| {
        v.push(Violation {
            field: format!("workload.{field}"),
            rule: rule.into(),
        })
    };
    let mps = w.connections.as_ref().and_then(|c| c.max_per_second);
    if mps.is_some_and(|n| !(1..=1_000_000).contains(&n)) {
        bad(
            "connections.maxPerSecond",
            "must be between 1 and 1000000 (omit it for no limit)",
        );
    }
    if let Some(sw) = w.stages.as_ref().and_then(|s| s.stop_when.as_ref()) {
        // `contains` is false for NaN.
        if sw
            .delivered_ratio_below
            .is_some_and(|r| !(0.0..=1.0).contains(&r))
        {
            bad(
                "stages.stopWhen.deliveredRatioBelow",
                "must be a number between 0 and 1",
            );
        }
        if sw
            .p99_micros_above
            .is_some_and(|l| !(1..=60_000_000).contains(&l))
        {
            bad(
                "stages.stopWhen.p99MicrosAbove",
                "must be between 1 and 60000000",
            );
        }
    }
    v
}

/// Publisher connections needed (the most any phase uses).
pub fn max_publishers(phases: &[PlanPhase]) -> u32 {
    phases
        .iter()
        .map(PlanPhase::max_publishers)
        .max()
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stages_step_the_rate_on_a_shared_schedule() {
        let w: Workload = serde_norway::from_str(
            "protocol: nats\nwarmupSeconds: 2\nstages: {dimension: rate, start: 100, step: 50, count: 3, stageSeconds: 4}\n",
        )
        .unwrap();
        let p = phases(&w);
        assert_eq!(p.len(), 4);
        assert_eq!(p[0].rate, Some(100));
        assert_eq!(p[3].rate, Some(200));
        assert_eq!(
            p[3].length,
            Length::Timed {
                start_us: 10_000_000,
                seconds: 4
            }
        );
    }

    #[test]
    fn a_rate_ramp_schedules_the_integral_of_a_linear_rate() {
        // 100/s rising to 300/s over 2 s: 400 messages, the first second holding 150.
        let s = Schedule {
            from: 100,
            to: 300,
            seconds: 2,
        };
        assert_eq!(s.total(2), 400);
        assert_eq!(s.due(1_000_000), 151);
        assert_eq!(s.at_us(0), 0);
        assert_eq!(s.at_us(150), 1_000_000);
        assert_eq!(s.at_us(400), 2_000_000);
        // Intended times never go back and agree with `due`.
        let mut last = 0;
        for i in 0..400 {
            let t = s.at_us(i);
            assert!(t >= last);
            assert!(s.due(t + 1) > i, "message {i} due by {t} µs");
            last = t;
        }
        let c = Schedule::constant(1000);
        assert_eq!((c.at_us(10), c.due(10_000), c.total(3)), (10_000, 11, 3000));
    }

    #[test]
    fn ramped_stages_rise_to_the_next_stage_value() {
        let w: Workload = serde_norway::from_str(
            "protocol: nats\nratePerPublisher: 10\nstages: {dimension: connections, shape: ramp, start: 2, step: 4, count: 2, stageSeconds: 4}\n",
        )
        .unwrap();
        let p = phases(&w);
        assert_eq!(p[1].ramp, Some(Ramp::Publishers(6)));
        assert_eq!(p[2].ramp, Some(Ramp::Publishers(10)));
        assert_eq!(max_publishers(&p), 10);
        // Stage 1: publishers 0 and 1 from the start, 2..5 join at 1, 2, 3, 4 s... the last
        // one (index 5) when the count reaches 6, at the end: it never sends.
        let joins: Vec<Option<u64>> = (0..7).map(|i| p[1].join_offset_us(i, 4)).collect();
        assert_eq!(
            joins,
            [
                Some(0),
                Some(0),
                Some(1_000_000),
                Some(2_000_000),
                Some(3_000_000),
                Some(4_000_000),
                None
            ]
        );
        let w: Workload = serde_norway::from_str(
            "protocol: nats\nstages: {dimension: rate, shape: ramp, start: 100, step: 100, count: 3, stageSeconds: 2}\n",
        )
        .unwrap();
        let p = phases(&w);
        assert_eq!((p[3].rate, p[3].ramp), (Some(300), Some(Ramp::Rate(400))));
    }

    #[test]
    fn connection_stages_grow_publishers() {
        let w: Workload = serde_norway::from_str(
            "protocol: nats\nratePerPublisher: 10\nstages: {dimension: connections, start: 1, step: 2, count: 3, stageSeconds: 1}\n",
        )
        .unwrap();
        let p = phases(&w);
        assert_eq!(max_publishers(&p), 5);
        assert_eq!(p[2].publishers, 3);
    }

    fn rules_broken(yaml: &str) -> String {
        let w: Workload = serde_norway::from_str(yaml).unwrap();
        match crate::engine::validate(&w) {
            Ok(()) => String::new(),
            Err(e) => e.to_string(),
        }
    }

    #[test]
    fn a_connection_rate_of_zero_is_refused_by_name() {
        let e = rules_broken("protocol: nats\nconnections: {count: 10, maxPerSecond: 0}\n");
        assert!(
            e.contains("workload.connections.maxPerSecond: must be between 1 and 1000000"),
            "{e:?}"
        );
        let ok = rules_broken("protocol: nats\nconnections: {count: 10, maxPerSecond: 1}\n");
        assert_eq!(ok, "");
    }

    /// YAML can spell NaN (`.nan`): a NaN threshold compares false with every delivered ratio,
    /// so the breaking-point search would silently never stop.
    #[test]
    fn a_nan_or_out_of_range_ratio_threshold_is_refused() {
        for r in [".nan", ".inf", "-0.5", "1.5"] {
            let e = rules_broken(&format!(
                "protocol: nats\nstages: {{dimension: rate, start: 1, step: 1, count: 2, stageSeconds: 1, stopWhen: {{deliveredRatioBelow: {r}}}}}\n"
            ));
            assert!(
                e.contains("workload.stages.stopWhen.deliveredRatioBelow: must be a number between 0 and 1"),
                "{r}: {e:?}"
            );
        }
    }
}
