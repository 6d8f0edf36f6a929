//! Turns a workload into phases. Phase 0 is always warm-up (possibly empty); measured phases
//! follow, each with the header phase byte equal to its index.
use msgbench_crds::workload::{StageDimension, Workload};

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

#[derive(Clone, Debug, PartialEq)]
pub struct Phase {
    pub name: String,
    pub length: Length,
    pub rate: Option<u32>,
    /// Publishers with index below this take part.
    pub publishers: u32,
    pub is_stage: bool,
    pub is_session: bool,
}

/// Phases of `w`, timed ones scheduled from offset 0 (the common start).
pub fn phases(w: &Workload) -> Vec<Phase> {
    let mut out = Vec::new();
    let mut t = 0u64;
    let base = |name: String, length, rate, publishers| Phase {
        name,
        length,
        rate,
        publishers,
        is_stage: false,
        is_session: false,
    };
    let first_rate = match &w.stages {
        Some(s) if s.dimension == StageDimension::Rate => Some(s.start),
        _ => w.rate_per_publisher,
    };
    out.push(base(
        "warmup".into(),
        Length::Timed {
            start_us: 0,
            seconds: w.warmup_seconds,
        },
        first_rate,
        w.publishers,
    ));
    t += u64::from(w.warmup_seconds) * 1_000_000;
    if let Some(d) = w.duration_seconds {
        out.push(base(
            "measured".into(),
            Length::Timed {
                start_us: t,
                seconds: d,
            },
            w.rate_per_publisher,
            w.publishers,
        ));
    } else if let Some(n) = w.messages_per_publisher {
        out.push(base(
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
            let mut p = base(
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
        for k in 0..st.count {
            let v = st.start.saturating_add(st.step.saturating_mul(k));
            let (rate, pubs) = match st.dimension {
                StageDimension::Rate => (Some(v), w.publishers),
                StageDimension::Connections => (w.rate_per_publisher, v),
            };
            let mut p = base(
                format!("stage-{}", k + 1),
                Length::Timed {
                    start_us: t,
                    seconds: st.stage_seconds,
                },
                rate,
                pubs,
            );
            p.is_stage = true;
            out.push(p);
            t += u64::from(st.stage_seconds) * 1_000_000;
        }
    }
    out
}

/// Publisher connections needed (the most any phase uses).
pub fn max_publishers(phases: &[Phase]) -> u32 {
    phases.iter().map(|p| p.publishers).max().unwrap_or(0)
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
    fn connection_stages_grow_publishers() {
        let w: Workload = serde_norway::from_str(
            "protocol: nats\nratePerPublisher: 10\nstages: {dimension: connections, start: 1, step: 2, count: 3, stageSeconds: 1}\n",
        )
        .unwrap();
        let p = phases(&w);
        assert_eq!(max_publishers(&p), 5);
        assert_eq!(p[2].publishers, 3);
    }
}
