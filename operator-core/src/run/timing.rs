//! How long a run may take, derived from its spec: expected length, the run's deadline and the
//! runner Job's backstop. Pure.
use crate::run::variants;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use msgbench_crds::benchmark_run::BenchmarkRun;
use msgbench_crds::workload::Workload;

/// A status time in ms since the epoch (0 before it).
pub fn millis(t: &Time) -> u64 {
    t.0.as_millisecond().max(0) as u64
}

/// A status time from ms since the epoch.
pub fn time_at(unix_ms: u64) -> Option<Time> {
    k8s_openapi::jiff::Timestamp::from_millisecond(unix_ms as i64)
        .ok()
        .map(Time)
}

/// The operator's own barrier bound adds this to the spec's (pods that never became ready
/// cannot time out by themselves).
pub const BARRIER_GRACE_SECONDS: i64 = 30;
/// The runner Job's activeDeadlineSeconds exceeds the run's deadline by this much.
const JOB_DEADLINE_BACKSTOP_SECONDS: i64 = 60;

/// Seconds one run of `w` is expected to take, when its length is known.
pub fn workload_seconds(w: &Workload) -> Option<i64> {
    let body = if let Some(d) = w.duration_seconds {
        i64::from(d)
    } else if let (Some(n), Some(r)) = (w.messages_per_publisher, w.rate_per_publisher) {
        (n / u64::from(r)) as i64 + 1
    } else if let Some(s) = &w.sessions {
        let mut t = 0i64;
        for x in s {
            t += i64::from(x.pause_after_seconds);
            t += w
                .rate_per_publisher
                .map_or(0, |r| (x.messages / u64::from(r)) as i64);
        }
        t
    } else {
        return None;
    };
    Some(body + i64::from(w.warmup_seconds) + i64::from(w.drain_seconds))
}

/// Trials the runners run: `trials`, times the variants with variants.
pub fn total_trials(br: &BenchmarkRun) -> i32 {
    br.spec.trials.max(1) * (br.spec.variants.len().max(1) as i32)
}

/// Seconds every trial takes back to back, settle pauses included, when all lengths are known.
pub fn expected_run_seconds(br: &BenchmarkRun) -> Option<i64> {
    let s = &br.spec;
    let per_round = match variants::plan(s) {
        Ok(p) if !p.is_empty() => p
            .iter()
            .map(|v| workload_seconds(&v.workload))
            .sum::<Option<i64>>()?,
        _ => workload_seconds(&s.workload)?,
    };
    let n = i64::from(total_trials(br));
    Some(per_round * i64::from(s.trials.max(1)) + i64::from(s.settle_seconds) * (n - 1))
}

/// Upper bound for the whole run, counted from its acceptance: the spec's, or derived from the
/// workload and timeouts.
pub fn deadline_seconds(br: &BenchmarkRun) -> i64 {
    if let Some(d) = br.spec.active_deadline_seconds {
        return d;
    }
    let s = &br.spec;
    let n = i64::from(total_trials(br));
    let run = expected_run_seconds(br).unwrap_or(1800 * n);
    i64::from(s.target_ready_timeout_seconds)
        + i64::from(s.barrier_timeout_seconds)
        + i64::from(s.connect_timeout_seconds) * n
        + run
        + n * (30 + i64::from(s.settle_seconds))
        + 60
}

/// The runner Job's own deadline: only a backstop for when the operator is down. It must not
/// race the run's deadline (its pod deletions would read as RunnerFailed), nor cut short a
/// runner holding its results for an operator that is away.
pub fn job_deadline_seconds(br: &BenchmarkRun) -> i64 {
    deadline_seconds(br)
        + JOB_DEADLINE_BACKSTOP_SECONDS
        + i64::from(br.spec.runners.results_hold_seconds.max(0))
}

/// How long runners may take to reach the start barrier once their Job exists: they retry
/// the target for connectTimeoutSeconds before they are ready.
pub fn barrier_limit_seconds(br: &BenchmarkRun) -> i64 {
    i64::from(br.spec.barrier_timeout_seconds)
        + i64::from(br.spec.connect_timeout_seconds)
        + BARRIER_GRACE_SECONDS
}
