//! Realistic runs built through the operator's own merge (a 10-minute soak with variants and
//! faults, the demo's run), and what a watcher receives while one runs.
use super::fill::*;
use crate::run::results::variant_results;
use crate::run::timing;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use msgbench_crds::benchmark_run::*;
use runner_api::agent::RawResultLine;
use runner_api::coarse::CoarseLatency;
use runner_api::result::{TimelinePoint, MAX_TIMELINE_POINTS};
/// One second of latencies for a timeline point (a coarse histogram of `n` samples).
pub(super) fn timeline_point(second: u32, rng: &mut Rng, rate: u64) -> TimelinePoint {
    let mut latency = CoarseLatency::default();
    for us in latencies(rng, 200, 3_000.0, 0.5, 0.0) {
        latency.record(us);
    }
    TimelinePoint {
        second,
        seconds: 1,
        published: rate + rng.next() % 1000,
        received: rate + rng.next() % 1000,
        acked: rate + rng.next() % 1000,
        latency,
        ..TimelinePoint::default()
    }
}

/// The soak: `variants` variants x `rounds` rounds of a `seconds`-long JetStream workload with
/// `faults_per_trial` kills of the stream leader in each trial.
pub(super) fn soak_spec(
    variants: usize,
    rounds: u32,
    seconds: u32,
    faults_per_trial: usize,
) -> BenchmarkRun {
    let vs: String = (1..=variants)
        .map(|i| format!("    - {{name: r{i}, workload: {{jetstream: {{replicas: 1}}}}}}\n"))
        .collect();
    let fs: String = (0..faults_per_trial)
        .map(|i| {
            format!(
                "    - {{afterSeconds: {}, action: kill, pod: streamLeader}}\n",
                60 + i
            )
        })
        .collect();
    let faults = if fs.is_empty() {
        String::new()
    } else {
        format!("  faults:\n{fs}")
    };
    let y = format!(
        "apiVersion: msgbench.dev/v1alpha1\nkind: BenchmarkRun\n\
         metadata: {{name: js-soak-variants, namespace: bench}}\n\
         spec:\n  target: {{serverRef: {{kind: JetStreamCluster, name: js3}}}}\n  \
         workload: {{protocol: jetstream, durationSeconds: {seconds}, warmupSeconds: 5}}\n  \
         trials: {rounds}\n  thresholds:\n    - {{metric: deliveredRatio, op: ge, value: 0.999, severity: warn}}\n    \
         - {{metric: latencyP99Ms, op: le, value: 50}}\n  variants:\n{vs}{faults}"
    );
    serde_norway::from_str(&y).unwrap()
}

/// The demo's run as `e2e/demo` creates it (config/demo), in namespace `bench`.
pub(super) fn demo_spec() -> BenchmarkRun {
    let y = include_str!("../../../../../config/demo/benchmarkrun-js-r1-vs-r2.yaml");
    let mut br: BenchmarkRun = serde_norway::from_str(y).unwrap();
    br.metadata.namespace = Some("bench".into());
    br
}

/// `br`'s status built through the operator's own merge (`variant_results::apply`): one
/// runner, every round of every variant, a timeline point for each second of the measured
/// phase (`durationSeconds`; the drain's few points left out), `samples` latencies per record (with `tail` of them spread up to 30 s), and
/// `faults_per_trial` records per trial.
pub(super) fn realistic(
    br: &BenchmarkRun,
    samples: usize,
    tail: f64,
    faults_per_trial: usize,
) -> BenchmarkRunStatus {
    let names: Vec<String> = br.spec.variants.iter().map(|v| v.name.clone()).collect();
    let variants = names.len();
    let rounds = br.spec.trials.max(1) as u32;
    let seconds = br.spec.workload.duration_seconds.unwrap();
    let mut rng = Rng(42);
    let schedule: Vec<ScheduledRound> = (1..=rounds as i32)
        .map(|r| {
            let mut order = names.clone();
            order.rotate_left(r as usize % variants);
            ScheduledRound { round: r, order }
        })
        .collect();
    let lines = record_lines(&schedule, samples, tail, seconds, &mut rng);
    let trial = lines.len();
    let mut st = BenchmarkRunStatus {
        phase: Some(Phase::Succeeded),
        observed_generation: Some(1),
        target_name: Some("JetStreamCluster/js3".into()),
        start_time: Some(time(0)),
        completion_time: Some(time(3600)),
        job_name: Some("js-soak-variants-g1".into()),
        schedule,
        faults: kill_records(trial * faults_per_trial, &names),
        conditions: [
            "Complete",
            "Succeeded",
            "Reconciling",
            "Stalled",
            "TargetReady",
        ]
        .iter()
        .map(|t| Condition {
            type_: t.to_string(),
            status: "True".into(),
            reason: "RunSucceeded".into(),
            message: "every runner finished and every threshold held".into(),
            observed_generation: Some(1),
            last_transition_time: time(3600),
        })
        .collect(),
        environment: Some(environment()),
        server_usage: Some(ServerUsage {
            memory_points: vec![],
            pods: (0..3)
                .map(|i| PodUsage {
                    pod: format!("js3-{i}"),
                    ..server_usage(1).pods[0].clone()
                })
                .collect(),
            ..server_usage(0)
        }),
        ..BenchmarkRunStatus::default()
    };
    variant_results::apply(br, &mut st, &lines, 1, |n| {
        format!("JetStreamCluster/js3-{n}")
    })
    .unwrap();
    st
}

/// One runner's record per trial, in the schedule's order: `samples` latencies and a timeline
/// point per second of the measured phase.
fn record_lines(
    schedule: &[ScheduledRound],
    samples: usize,
    tail: f64,
    seconds: u32,
    rng: &mut Rng,
) -> Vec<RawResultLine> {
    let mut lines = Vec::new();
    let mut trial = 0;
    for round in schedule {
        for name in &round.order {
            trial += 1;
            let lat = latencies(rng, samples, 3_000.0, 0.6, tail);
            let mut l = runner_api::testing::record(
                1,
                trial,
                &lat,
                lat.len() as u64,
                1_800_000_000_000 + u64::from(trial) * 700_000,
            );
            l.variant = Some(name.clone());
            l.round = Some(round.round as u32);
            l.result.timeline = (0..seconds)
                .map(|s| timeline_point(s, rng, 50_000))
                .collect::<Vec<_>>();
            l.result.timeline.truncate(MAX_TIMELINE_POINTS);
            l.result.finalize();
            lines.push(RawResultLine::from_line(&l).unwrap());
        }
    }
    lines
}

/// `n` kill records spread over the variants, each with the stream leader before and after.
fn kill_records(n: usize, names: &[String]) -> Vec<FaultRecord> {
    (0..n)
        .map(|i| {
            let mut f = fault_record(i, Some(names[i % names.len()].clone()));
            f.server = "JetStreamCluster/js3".into();
            f.pod = Some("js3-1".into());
            f.signal = None;
            f.partition = None;
            f.restart = None;
            f.action = Some(FaultAction::Kill);
            f.stream_leader = Some(FaultStreamLeader {
                before: Some("js3-1".into()),
                after: Some("js3-2".into()),
                after_time: Some(time(9)),
            });
            f
        })
        .collect()
}

/// Three server pods and one runner pod, as a kind cluster shows them.
fn environment() -> ObservedEnvironment {
    ObservedEnvironment {
        server_pods: (0..3)
            .map(|i| ObservedPod {
                name: format!("js3-{i}"),
                node: Some(format!("kind-worker{i}")),
                qos_class: Some("Burstable".into()),
                cpus: Some("0-3".into()),
                image: Some("nats:2.11-alpine".into()),
                image_id: Some(format!("docker.io/library/nats@sha256:{}", "a".repeat(64))),
                uid: Some(format!("{i:08}-1111-2222-3333-444444444444")),
                ..ObservedPod::default()
            })
            .collect(),
        runner_pods: vec![ObservedPod {
            name: "js-soak-variants-g1-0-abcde".into(),
            node: Some("kind-worker".into()),
            qos_class: Some("Burstable".into()),
            cpus: Some("0-3".into()),
            image: Some("ghcr.io/msgbench/bench-runner:0.1.0".into()),
            image_id: Some(format!(
                "ghcr.io/msgbench/bench-runner@sha256:{}",
                "b".repeat(64)
            )),
            ..ObservedPod::default()
        }],
        shared_nodes: false,
        sysctls: vec![],
        server_pods_at_start: (0..3)
            .map(|i| ObservedPod {
                name: format!("js3-{i}"),
                uid: Some(format!("{i:08}-1111-2222-3333-444444444444")),
                ..ObservedPod::default()
            })
            .collect(),
        server_restarts: vec![],
    }
}

/// Status writes about each fault of a trial: the pod chosen (written before the deletion), the
/// fault carried out, the stream leader after it, the pod's restart.
pub(super) const WRITES_PER_FAULT: f64 = 4.0;

/// Status writes a minute while `br` runs, from the code: status is written only when it changes
/// (operator `benchmark_run::reconcile`), and while Running it changes with each server sample
/// (every `server_usage::SAMPLE_EVERY_MS`; `progress` goes with it), at each trial change
/// (`progress.trial` and the trial's planned faults) and [`WRITES_PER_FAULT`] times per fault.
/// An upper bound: passes come every 2 s (`decide::POLL`), so a sample is written 5 to 6 s after
/// the last, and a trial change can share its pass with a sample.
pub(super) fn writes_per_minute(br: &BenchmarkRun) -> f64 {
    let samples = 60_000.0 / crate::run::results::server_usage::SAMPLE_EVERY_MS as f64;
    let trials = f64::from(timing::total_trials(br));
    let minutes = timing::expected_run_seconds(br).unwrap() as f64 / 60.0;
    let per_trial = 1.0 + WRITES_PER_FAULT * br.spec.faults.len() as f64;
    samples + trials * per_trial / minutes
}

/// What a watcher receives a minute while the run runs (results land only at the verdict, so
/// this is the same before and after the results shrink), and returns those bytes.
pub(super) fn print_running(br: &BenchmarkRun, st: &BenchmarkRunStatus, faults: usize) -> usize {
    let running = while_running(st.clone(), faults);
    let object = object_bytes(br, &running);
    let writes = writes_per_minute(br);
    let per_minute = (object as f64 * writes) as usize;
    println!(
        "    while it runs ({faults} fault records so far, no results yet): status {}, object \
         {}; {writes:.1} status writes a minute (a server sample every {} s, {} trials in {} s, \
         {} faults a trial) = {} per watcher per minute",
        kib(bytes(&running)),
        kib(object),
        crate::run::results::server_usage::SAMPLE_EVERY_MS / 1000,
        timing::total_trials(br),
        timing::expected_run_seconds(br).unwrap(),
        br.spec.faults.len(),
        kib(per_minute)
    );
    per_minute
}

/// `st` as it stands mid-run: no results (they land at the verdict), `faults` records so far.
pub(super) fn while_running(mut st: BenchmarkRunStatus, faults: usize) -> BenchmarkRunStatus {
    st.phase = Some(Phase::Running);
    st.completion_time = None;
    st.headline = None;
    st.thresholds.clear();
    st.variants.clear();
    st.variant_comparison = None;
    st.faults.truncate(faults);
    for f in &mut st.faults {
        f.effect = None; // read from the timeline once the run is merged
    }
    st.progress = Some(Progress {
        trial: 30,
        trials: 60,
        elapsed_seconds: 21_000,
        expected_seconds: Some(42_000),
        published: 1_050_000_000,
        received: 1_050_000_000,
        runners_ready: 1,
    });
    st
}

/// The whole object as a watcher receives it: metadata, spec and status.
pub(super) fn object_bytes(br: &BenchmarkRun, st: &BenchmarkRunStatus) -> usize {
    let mut o = br.clone();
    o.status = Some(st.clone());
    o.metadata.uid = Some("0f6b3a6e-5c3e-4a43-9d1b-7f1f8f1f7f1f".into());
    o.metadata.resource_version = Some("123456789".into());
    o.metadata.generation = Some(1);
    o.metadata.creation_timestamp = Some(time(0));
    bytes(&o)
}
