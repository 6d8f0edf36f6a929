//! `decide`, transition by transition: each test builds a status and what observe saw, and
//! checks the next phase, reason, effects and requeue.
use super::*;
use crate::run::model::Gathered;
use crate::run::model::{AgentSeen, BaselineSeen, BaselineState, TargetSeen};
use crate::run::model::{FaultAgentSeen, Resolved};
use crate::run::results::compare;
use crate::run::results::tests::runner as record;
use crate::run::runners::build;
use crate::run::target::target_auth::TlsSource;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::batch::v1::JobStatus;
use k8s_openapi::api::core::v1::{Pod, PodCondition, PodStatus};
use msgbench_crds::benchmark_run::Verdict;
use msgbench_crds::benchmark_run::{ObservedPod, Progress};
use runner_api::agent::AgentProgress;
use serde_json::json;

const T0: i64 = 1_800_000_000;

fn at(s: i64) -> Time {
    Time(k8s_openapi::jiff::Timestamp::from_second(s).unwrap())
}

fn at_ms(ms: u64) -> Time {
    super::time_at(ms).unwrap()
}

fn run(runners: u32, extra: &str) -> BenchmarkRun {
    serde_norway::from_str(&format!(
        r#"
apiVersion: msgbench.dev/v1alpha1
kind: BenchmarkRun
metadata: {{name: r1, namespace: bench, uid: u-1, generation: 1}}
spec:
  target: {{serverRef: {{kind: JetStreamCluster, name: js3}}}}
  workload: {{protocol: nats, payloadBytes: 64, ratePerPublisher: 100, durationSeconds: 10}}
  runners: {{count: {runners}}}
  targetReadyTimeoutSeconds: 60
  barrierTimeoutSeconds: 30
  connectTimeoutSeconds: 10
  {extra}"#
    ))
    .unwrap()
}

fn id(br: &BenchmarkRun) -> RunIdentity {
    use kube::Resource;
    RunIdentity {
        owner: crate::meta::Owner {
            kind_label: crate::run::identity::KIND_LABEL,
            name: "r1".into(),
            namespace: "bench".into(),
            owner_ref: br.controller_owner_ref(&()).unwrap(),
        },
        generation: 1,
    }
}

/// Generation 1 accepted at T0, in `phase`.
fn status(phase: Phase) -> BenchmarkRunStatus {
    let mut st = BenchmarkRunStatus {
        observed_generation: Some(1),
        phase: Some(phase),
        ..BenchmarkRunStatus::default()
    };
    cond::accept(&mut st.conditions, Some(1), &at(T0));
    st
}

fn ready_target() -> TargetSeen {
    TargetSeen {
        variant: None,
        resolved: Ok(Resolved {
            url: "nats://js3.bench.svc:4222".into(),
            display: "JetStreamCluster/js3".into(),
            not_ready: None,
            server_labels: None,
            environment: None,
            auth: None,
            tls: None,
            unfit: None,
            fault_agent: None,
            fault_agent_refused: None,
        }),
        unreachable: None,
    }
}

fn pod(index: u32, phase: &str, ready: bool) -> Pod {
    let mut p: Pod = serde_json::from_value(json!({
        "metadata": {"name": format!("r1-g1-{index}-x"), "namespace": "bench",
                     "labels": {"batch.kubernetes.io/job-completion-index": index.to_string()}},
    }))
    .unwrap();
    p.status = Some(PodStatus {
        phase: Some(phase.into()),
        pod_ip: Some(format!("10.0.0.{}", index + 1)),
        conditions: Some(vec![PodCondition {
            type_: "Ready".into(),
            status: if ready { "True" } else { "False" }.into(),
            ..PodCondition::default()
        }]),
        ..PodStatus::default()
    });
    p
}

fn job(created: i64) -> Job {
    let mut j: Job = serde_json::from_value(json!({"metadata": {"name": "r1-g1"}})).unwrap();
    j.metadata.creation_timestamp = Some(at(created));
    j.status = Some(JobStatus {
        active: Some(2),
        ..JobStatus::default()
    });
    j
}

fn agent(index: u32, progress: AgentProgress) -> AgentSeen {
    AgentSeen {
        pod: format!("r1-g1-{index}-x"),
        ip: format!("10.0.0.{}", index + 1),
        progress,
    }
}

fn started(trial: u32, waiting_for: u32, start: u64) -> AgentProgress {
    AgentProgress {
        ready: true,
        started: true,
        trial,
        waiting_for,
        trial_start_unix_ms: start,
        ..AgentProgress::default()
    }
}

fn ready_agent() -> AgentProgress {
    AgentProgress {
        ready: true,
        ..AgentProgress::default()
    }
}

fn verdict(d: &Decision) -> (Option<Phase>, String) {
    let reason = d
        .status
        .verdict
        .as_ref()
        .map(|v| v.reason.clone())
        .unwrap_or_default();
    (d.status.phase, reason)
}

fn message(d: &Decision) -> String {
    d.status
        .verdict
        .as_ref()
        .and_then(|v| v.message.clone())
        .unwrap_or_default()
}

fn condition(d: &Decision, type_: &str) -> (String, String) {
    let c = cond::get(&d.status.conditions, type_).unwrap();
    (c.status.clone(), c.reason.clone())
}

fn decide_at(br: &BenchmarkRun, st: &BenchmarkRunStatus, obs: &Observed) -> Decision {
    decide(br, &id(br), st, obs)
}

// --- new generation, deadline, invalid spec ---------------------------------------------

#[test]
fn a_new_generation_starts_over_and_keeps_the_last_verdict_in_history() {
    let br = run(1, "");
    let mut old = status(Phase::Failed);
    old.observed_generation = Some(0);
    old.verdict = Some(Verdict {
        reason: RunFailureReason::ThresholdsNotMet.to_string(),
        message: None,
    });
    old.job_name = Some("r1-g0".into());
    let d = decide_at(&br, &old, &Observed::at(at(T0 + 100)));
    assert_eq!(d.status.phase, Some(Phase::Pending));
    assert_eq!(d.status.observed_generation, Some(1));
    assert_eq!(d.status.job_name, None);
    assert_eq!(d.status.history.len(), 1);
    assert_eq!(d.status.history[0].generation, 0);
    assert_eq!(d.status.history[0].phase, Some(Phase::Failed));
    assert_eq!(d.effects, vec![Effect::DeleteOtherGenerations]);
    assert_eq!(
        condition(&d, cond::COMPLETE),
        ("False".into(), "Pending".into())
    );
}

#[test]
fn a_run_past_its_deadline_fails_whatever_its_phase() {
    let br = run(1, "activeDeadlineSeconds: 100");
    for phase in [
        Phase::Pending,
        Phase::Starting,
        Phase::Running,
        Phase::Merging,
    ] {
        let d = decide_at(&br, &status(phase), &Observed::at(at(T0 + 101)));
        assert_eq!(
            verdict(&d),
            (
                Some(Phase::Failed),
                RunFailureReason::DeadlineExceeded.to_string()
            ),
            "{phase:?}"
        );
        let within = decide_at(&br, &status(phase), &Observed::at(at(T0 + 100)));
        assert_ne!(
            verdict(&within).1,
            RunFailureReason::DeadlineExceeded.as_str(),
            "{phase:?}"
        );
    }
}

#[test]
fn a_run_stored_past_the_admission_bounds_fails_before_any_pod_naming_the_field() {
    let pending = |br: &BenchmarkRun| {
        let mut obs = Observed::at(at(T0 + 1));
        obs.targets = vec![ready_target()];
        decide_at(br, &status(Phase::Pending), &obs)
    };
    // runners x trials x phases (measured, warm-up) at the 2560 bound, then past it.
    let br = run(64, "trials: 20");
    assert_ne!(
        verdict(&pending(&br)).1,
        RunFailureReason::InvalidSpec.as_str()
    );
    let mut big = br.clone();
    big.spec.workload.warmup_seconds = 5;
    assert_ne!(
        verdict(&pending(&big)).1,
        RunFailureReason::InvalidSpec.as_str(),
        "2560 is allowed"
    );
    big.spec.runners.count = 65;
    let d = pending(&big);
    assert_eq!(
        verdict(&d),
        (
            Some(Phase::Failed),
            RunFailureReason::InvalidSpec.to_string()
        )
    );
    assert!(
        message(&d).starts_with("runners.count: "),
        "{}",
        message(&d)
    );
    assert!(message(&d).contains("1300 x 2 = 2600"), "{}", message(&d));
    assert!(d.effects.is_empty());
    // A name the Job's labels cannot carry.
    let mut long = run(1, "");
    long.metadata.name = Some("n".repeat(53));
    let d = pending(&long);
    assert_eq!(
        verdict(&d),
        (
            Some(Phase::Failed),
            RunFailureReason::InvalidSpec.to_string()
        )
    );
    assert!(
        message(&d).starts_with("metadata.name: 53 characters"),
        "{}",
        message(&d)
    );
}

#[test]
fn a_workload_rule_admission_cannot_check_is_invalid_spec_naming_the_field() {
    let mut br = run(1, "");
    br.spec.workload.rate_per_publisher = Some(0);
    let mut obs = Observed::at(at(T0 + 1));
    obs.targets = vec![ready_target()];
    let d = decide_at(&br, &status(Phase::Pending), &obs);
    assert_eq!(
        verdict(&d),
        (
            Some(Phase::Failed),
            RunFailureReason::InvalidSpec.to_string()
        )
    );
    assert!(
        message(&d).starts_with("spec.workload.ratePerPublisher"),
        "{}",
        message(&d)
    );
    assert!(d.effects.is_empty(), "nothing is created");
}

// --- the target ---------------------------------------------------------------------------

#[test]
fn a_missing_target_is_waited_for_then_target_not_found() {
    let br = run(1, "");
    let mut obs = Observed::at(at(T0 + 30));
    obs.targets = vec![TargetSeen {
        resolved: Err(
            "target.serverRef: JetStreamCluster/js3 does not exist in namespace bench".into(),
        ),
        ..ready_target()
    }];
    let d = decide_at(&br, &status(Phase::Pending), &obs);
    assert_eq!(d.status.phase, Some(Phase::WaitingForTarget));
    assert_eq!(
        condition(&d, cond::TARGET_READY),
        ("False".into(), RunFailureReason::TargetNotFound.to_string())
    );
    assert_eq!(d.requeue, Some(POLL));
    obs.now = at(T0 + 61);
    let d = decide_at(&br, &d.status, &obs);
    assert_eq!(
        verdict(&d),
        (
            Some(Phase::Failed),
            RunFailureReason::TargetNotFound.to_string()
        )
    );
    assert!(
        message(&d).contains("still missing after 60s"),
        "{}",
        message(&d)
    );
}

/// A server whose spec rules out the run's protocol (a pusher server for websocket) is not waited
/// for: the run fails at once, saying why and what to use, and creates nothing.
#[test]
fn an_unfit_target_fails_the_run_at_once() {
    let br = run(1, "");
    let mut t = ready_target();
    if let Ok(r) = &mut t.resolved {
        r.unfit = Some("target.serverRef: PubSubServer/ps: serves protocol pusher, not Websocket (workload.protocol: pusher)".into());
    }
    let mut obs = Observed::at(at(T0 + 1));
    obs.targets = vec![t];
    let d = decide_at(&br, &status(Phase::Pending), &obs);
    assert_eq!(
        verdict(&d),
        (
            Some(Phase::Failed),
            RunFailureReason::TargetUnfit.to_string()
        )
    );
    assert!(
        message(&d).contains("(workload.protocol: pusher)"),
        "{}",
        message(&d)
    );
    assert!(d.effects.is_empty(), "nothing is created");
}

/// A `crash` fault needs the target's fault agent: without it the run fails at once, naming
/// the setting; with it the run goes on to start its runners.
#[test]
fn a_crash_without_the_targets_fault_agent_is_unfit() {
    let br = run(
        1,
        "faults:\n  - {afterSeconds: 2, action: crash, pod: streamLeader}",
    );
    let mut t = ready_target();
    if let Ok(r) = &mut t.resolved {
        r.server_labels = Some(Default::default());
    }
    let mut obs = Observed::at(at(T0 + 1));
    obs.faults_allowed = true;
    obs.targets = vec![t.clone()];
    let d = decide_at(&br, &status(Phase::Pending), &obs);
    assert_eq!(
        verdict(&d),
        (
            Some(Phase::Failed),
            RunFailureReason::TargetUnfit.to_string()
        )
    );
    assert!(
        message(&d).contains("spec.faultInjection.enabled: true on JetStreamCluster/js3"),
        "{}",
        message(&d)
    );
    if let Ok(r) = &mut t.resolved {
        r.fault_agent = Some(FaultAgentSeen::default());
    }
    obs.targets = vec![t];
    let d = decide_at(&br, &status(Phase::Pending), &obs);
    assert_ne!(verdict(&d).1, RunFailureReason::TargetUnfit.as_str());
    assert!(
        d.effects
            .iter()
            .any(|e| matches!(e, Effect::CreateRunners { .. })),
        "{:?}",
        d.effects
    );
}

/// A target whose agent the operator's install refuses has none: a crash run fails at once,
/// passing on why (the chart value), not asking for a setting the server already has.
#[test]
fn a_crash_against_a_refused_fault_agent_says_why_it_has_none() {
    let br = run(
        1,
        "faults:\n  - {afterSeconds: 2, action: crash, pod: streamLeader}",
    );
    let mut t = ready_target();
    if let Ok(r) = &mut t.resolved {
        r.server_labels = Some(Default::default());
        r.fault_agent_refused =
            Some("spec.faultInjection.network needs faults.network=true".into());
    }
    let mut obs = Observed::at(at(T0 + 1));
    obs.faults_allowed = true;
    obs.targets = vec![t];
    let d = decide_at(&br, &status(Phase::Pending), &obs);
    assert_eq!(verdict(&d).1, RunFailureReason::TargetUnfit.as_str());
    assert!(
        message(&d).contains("JetStreamCluster/js3 runs without one: spec.faultInjection.network")
            && !message(&d).contains("set spec.faultInjection.enabled"),
        "{}",
        message(&d)
    );
}

/// A `partition` needs the agent's network faults, and a partition from peers needs a server
/// that has peers; each refusal names the field to change.
#[test]
fn a_partition_needs_network_faults_and_peers() {
    let br = run(
        1,
        "faults:\n  - {afterSeconds: 2, action: partition, pod: streamLeader, durationSeconds: 5}",
    );
    let decide_with = |agent: FaultAgentSeen| {
        let mut t = ready_target();
        if let Ok(r) = &mut t.resolved {
            r.server_labels = Some(Default::default());
            r.fault_agent = Some(agent);
        }
        let mut obs = Observed::at(at(T0 + 1));
        obs.faults_allowed = true;
        obs.targets = vec![t];
        decide_at(&br, &status(Phase::Pending), &obs)
    };
    let d = decide_with(FaultAgentSeen {
        network: false,
        power_loss: false,
        peers: true,
    });
    assert_eq!(
        verdict(&d),
        (
            Some(Phase::Failed),
            RunFailureReason::TargetUnfit.to_string()
        )
    );
    assert!(
        message(&d).contains("spec.faults[0]: action partition needs")
            && message(&d).contains("spec.faultInjection.network: true on JetStreamCluster/js3"),
        "{}",
        message(&d)
    );
    let d = decide_with(FaultAgentSeen {
        network: true,
        power_loss: false,
        peers: false,
    });
    assert!(
        message(&d).contains("spec.faults[0].partitionFrom: JetStreamCluster/js3 has no peers"),
        "{}",
        message(&d)
    );
    let d = decide_with(FaultAgentSeen {
        network: true,
        power_loss: false,
        peers: true,
    });
    assert_ne!(
        verdict(&d).1,
        RunFailureReason::TargetUnfit.as_str(),
        "{}",
        message(&d)
    );
}

#[test]
fn a_target_not_ready_is_waited_for_then_target_not_ready() {
    let br = run(1, "");
    let mut t = ready_target();
    if let Ok(r) = &mut t.resolved {
        r.not_ready = Some("JetStreamCluster/js3 is not Ready".into());
    }
    let mut obs = Observed::at(at(T0 + 10));
    obs.targets = vec![t];
    let d = decide_at(&br, &status(Phase::Pending), &obs);
    assert_eq!(d.status.phase, Some(Phase::WaitingForTarget));
    assert_eq!(
        d.status.target_name.as_deref(),
        Some("JetStreamCluster/js3")
    );
    obs.now = at(T0 + 61);
    let d = decide_at(&br, &d.status, &obs);
    assert_eq!(
        verdict(&d),
        (
            Some(Phase::Failed),
            RunFailureReason::TargetNotReady.to_string()
        )
    );
    assert!(
        message(&d).contains("still not Ready after 60s"),
        "{}",
        message(&d)
    );
}

#[test]
fn a_ready_target_without_endpoints_is_waited_for_then_target_unreachable() {
    let br = run(1, "");
    let mut obs = Observed::at(at(T0 + 5));
    obs.targets = vec![TargetSeen {
        unreachable: Some("Service bench/js3 port 4222: no EndpointSlice yet for port 4222".into()),
        ..ready_target()
    }];
    let d = decide_at(&br, &status(Phase::Pending), &obs);
    assert_eq!(
        condition(&d, cond::TARGET_READY),
        ("False".into(), "EndpointsNotReady".into())
    );
    assert!(d.effects.is_empty());
    obs.now = at(T0 + 61);
    let d = decide_at(&br, &d.status, &obs);
    assert_eq!(
        verdict(&d),
        (
            Some(Phase::Failed),
            RunFailureReason::TargetUnreachable.to_string()
        )
    );
    assert!(
        message(&d).starts_with("nats://js3.bench.svc:4222: no ready endpoint"),
        "{}",
        message(&d)
    );
    assert_eq!(
        condition(&d, cond::TARGET_READY),
        (
            "False".into(),
            RunFailureReason::TargetUnreachable.to_string()
        )
    );
}

#[test]
fn a_variant_target_not_ready_is_named() {
    let br = run(1, "");
    let mut v = ready_target();
    v.variant = Some("r2".into());
    v.resolved = Err("target.serverRef: JetStreamCluster/js2 does not exist".into());
    let mut obs = Observed::at(at(T0 + 5));
    obs.targets = vec![ready_target(), v];
    let d = decide_at(&br, &status(Phase::Pending), &obs);
    let c = cond::get(&d.status.conditions, cond::TARGET_READY).unwrap();
    assert!(c.message.starts_with("variant r2: "), "{}", c.message);
}

#[test]
fn a_reachable_target_creates_the_runners() {
    let br = run(2, "");
    let mut obs = Observed::at(at(T0 + 3));
    obs.targets = vec![ready_target()];
    let d = decide_at(&br, &status(Phase::WaitingForTarget), &obs);
    assert_eq!(d.status.phase, Some(Phase::Starting));
    assert_eq!(d.status.job_name.as_deref(), Some("r1-g1"));
    assert_eq!(
        condition(&d, cond::TARGET_READY),
        ("True".into(), "TargetReady".into())
    );
    assert_eq!(
        condition(&d, cond::RUNNERS_READY),
        ("False".into(), "Starting".into())
    );
    let [Effect::CreateRunners { config_map, job }] = d.effects.as_slice() else {
        panic!("{:?}", d.effects)
    };
    let cfg = &config_map.data.as_ref().unwrap()[build::CONFIG_FILE];
    assert!(cfg.contains("nats://js3.bench.svc:4222"), "{cfg}");
    let spec = job.spec.as_ref().unwrap();
    assert_eq!(spec.completions, Some(2));
    assert_eq!(
        spec.active_deadline_seconds,
        Some(timing::job_deadline_seconds(&br))
    );
}

/// Another run holds the target: this run waits, naming it, and creates nothing; the runners
/// it creates once the target is free carry the run's own wire identity.
#[test]
fn a_target_in_use_by_another_run_is_waited_for_then_the_run_starts_isolated() {
    use crate::run::target::target_lock::RunOnTarget;
    let br = run(1, "");
    let mut obs = Observed::at(at(T0 + 3));
    obs.targets = vec![ready_target()];
    let mut other = RunOnTarget::of(&br);
    other.name = "holder".into();
    other.holds = true;
    obs.on_target = vec![other.clone()];
    let d = decide_at(&br, &status(Phase::WaitingForTarget), &obs);
    assert_eq!(d.status.phase, Some(Phase::WaitingForTarget));
    assert!(d.effects.is_empty(), "{:?}", d.effects);
    assert_eq!(
        condition(&d, cond::TARGET_READY),
        ("False".into(), "TargetInUse".into())
    );
    let msg = &cond::get(&d.status.conditions, cond::TARGET_READY)
        .unwrap()
        .message;
    assert!(msg.contains("run holder is running on it"), "{msg}");
    // Done: the run starts, and its agent config isolates it.
    obs.on_target[0].holds = false;
    obs.on_target[0].finished = true;
    let d = decide_at(&br, &status(Phase::WaitingForTarget), &obs);
    let [Effect::CreateRunners { config_map, .. }] = d.effects.as_slice() else {
        panic!("{:?}", d.effects)
    };
    let cfg: runner_api::agent::AgentConfig =
        serde_norway::from_str(&config_map.data.as_ref().unwrap()[build::CONFIG_FILE]).unwrap();
    assert_eq!(cfg.isolation, Some(build::run_isolation("u-1", 1)));
    // Both sharing: the run starts alongside and says so.
    let shared = run(1, "shareTarget: true");
    other.shares = true;
    obs.on_target = vec![other];
    let d = decide_at(&shared, &status(Phase::WaitingForTarget), &obs);
    assert_eq!(d.status.phase, Some(Phase::Starting));
    assert_eq!(
        condition(&d, cond::TARGET_READY),
        ("True".into(), "TargetShared".into())
    );
    assert!(cond::get(&d.status.conditions, cond::NAMES_SHARED).is_none());
    // Sharing an existing stream too: a warning that names it and the run beside it.
    let mut on_stream = shared.clone();
    on_stream.spec.workload = serde_norway::from_str(
        "{protocol: jetstream, payloadBytes: 64, ratePerPublisher: 100, durationSeconds: 10, \
         jetstream: {stream: ORDERS, createStream: false}}",
    )
    .unwrap();
    let d = decide_at(&on_stream, &status(Phase::WaitingForTarget), &obs);
    assert_eq!(d.status.phase, Some(Phase::Starting));
    let w = cond::get(&d.status.conditions, cond::NAMES_SHARED).expect("NamesShared");
    assert_eq!(
        (w.status.as_str(), w.reason.as_str()),
        ("True", "NamesShared")
    );
    assert!(
        w.message.contains("stream ORDERS") && w.message.contains("holder"),
        "{}",
        w.message
    );
    // The same stream without shareTarget: the run waits its turn, nothing is shared.
    on_stream.spec.share_target = false;
    let d = decide_at(&on_stream, &status(Phase::WaitingForTarget), &obs);
    assert_eq!(d.status.phase, Some(Phase::WaitingForTarget));
    assert!(cond::get(&d.status.conditions, cond::NAMES_SHARED).is_none());
}

/// The agent config and the runner pod of a decision whose one effect creates the runners.
fn runners_created(d: &Decision) -> (&str, &k8s_openapi::api::core::v1::PodSpec) {
    let [Effect::CreateRunners { config_map, job }] = d.effects.as_slice() else {
        panic!("{:?}", d.effects)
    };
    let cfg = &config_map.data.as_ref().unwrap()[build::CONFIG_FILE];
    let pod = job.spec.as_ref().unwrap().template.spec.as_ref().unwrap();
    (cfg, pod)
}

/// The Secret and keys projected into runner volume `volume`, which must have that one source.
fn projected_secret<'a>(
    pod: &'a k8s_openapi::api::core::v1::PodSpec,
    volume: &str,
) -> (&'a str, Vec<&'a str>) {
    let v = (pod.volumes.iter().flatten()).find(|v| v.name == volume);
    let sources = v.unwrap().projected.as_ref().unwrap().sources.as_deref();
    let [source] = sources.unwrap() else {
        panic!("one source, the CA: {sources:?}")
    };
    let s = source.secret.as_ref().unwrap();
    let keys = s.items.iter().flatten().map(|i| i.key.as_str()).collect();
    (s.name.as_str(), keys)
}

/// A target with `spec.auth`: the runner container reads the server's Secret through
/// `secretKeyRef`, and the agent config names only where (no credential passes the operator).
#[test]
fn a_target_with_auth_gives_the_runners_secret_references_and_the_config_names_only() {
    use crate::run::target::target_auth::TargetSecret;
    use msgbench_crds::jetstream_cluster::{NatsAuth, NatsAuthMode};
    let br = run(1, "");
    let mut t = ready_target();
    if let Ok(r) = &mut t.resolved {
        r.auth = Some(TargetSecret::Nats(NatsAuth {
            secret_name: "js3-auth".into(),
            mode: NatsAuthMode::Token,
        }));
    }
    let mut obs = Observed::at(at(T0 + 3));
    obs.targets = vec![t];
    let d = decide_at(&br, &status(Phase::WaitingForTarget), &obs);
    let (cfg, pod) = runners_created(&d);
    assert!(cfg.contains("envPrefix: MSGBENCH_AUTH_0"), "{cfg}");
    let env = pod.containers[0].env.as_ref().unwrap();
    let token = env
        .iter()
        .find(|e| e.name == "MSGBENCH_AUTH_0_TOKEN")
        .unwrap();
    let r = token
        .value_from
        .as_ref()
        .unwrap()
        .secret_key_ref
        .as_ref()
        .unwrap();
    assert_eq!((r.name.as_str(), r.key.as_str()), ("js3-auth", "token"));
}

/// A TLS target: the runner pods mount only `ca.crt` of the server's Secret, and the agent
/// config says where, for that target's URL.
#[test]
fn a_tls_target_gives_the_runners_its_ca_only() {
    let br = run(1, "");
    let mut t = ready_target();
    if let Ok(r) = &mut t.resolved {
        r.url = "tls://js3.bench.svc:4222".into();
        r.tls = Some(TlsSource::server_secret("js3-tls"));
    }
    let mut obs = Observed::at(at(T0 + 3));
    obs.targets = vec![t];
    let d = decide_at(&br, &status(Phase::WaitingForTarget), &obs);
    let (cfg, pod) = runners_created(&d);
    assert!(
        cfg.contains(
            "targetTls:\n- target: tls://js3.bench.svc:4222\n  caFile: /etc/msgbench/tls/0/ca.crt"
        ),
        "{cfg}"
    );
    assert_eq!(projected_secret(pod, "tls-0"), ("js3-tls", vec!["ca.crt"]));
    let mounts = pod.containers[0].volume_mounts.as_ref().unwrap();
    assert!(mounts
        .iter()
        .any(|m| m.name == "tls-0" && m.mount_path == "/etc/msgbench/tls/0"));
}

/// A TLS MqttBroker with a login, by `serverRef`: the runners connect to its `mqtts://` URL,
/// verify it with the `ca.crt` of the broker's TLS Secret (mounted, nothing else of it), and
/// log in with its user's Secret through references.
#[test]
fn a_tls_mqtt_broker_with_a_login_gives_the_runners_its_ca_and_user() {
    use crate::run::target::target_auth::of_mqtt_broker;
    use msgbench_crds::benchmark_run::ServerKind;
    use msgbench_crds::mqtt_broker::MqttBrokerSpec;
    use msgbench_crds::workload::Protocol;
    let mut br = run(1, "");
    br.spec.target.server_ref.as_mut().unwrap().kind = ServerKind::MqttBroker;
    br.spec.workload.protocol = Protocol::Mqtt;
    let spec: MqttBrokerSpec =
        serde_norway::from_str("{auth: {secretName: mq-user}, tls: {secretName: mq-tls}}").unwrap();
    let mut t = ready_target();
    if let Ok(r) = &mut t.resolved {
        r.url = "mqtts://mq.bench.svc:1883".into();
        (r.auth, r.tls) = of_mqtt_broker(&spec);
    }
    let mut obs = Observed::at(at(T0 + 3));
    obs.targets = vec![t];
    let d = decide_at(&br, &status(Phase::WaitingForTarget), &obs);
    let (cfg, pod) = runners_created(&d);
    assert!(
        cfg.contains(
            "targetTls:\n- target: mqtts://mq.bench.svc:1883\n  caFile: /etc/msgbench/tls/0/ca.crt"
        ),
        "{cfg}"
    );
    assert!(cfg.contains("envPrefix: MSGBENCH_AUTH_0"), "{cfg}");
    assert!(!cfg.contains("mq-user") && !cfg.contains("mq-tls"), "{cfg}");
    assert_eq!(projected_secret(pod, "tls-0"), ("mq-tls", vec!["ca.crt"]));
    let c = &pod.containers[0];
    let m = (c.volume_mounts.iter().flatten()).find(|m| m.name == "tls-0");
    let m = m.expect("the CA mounted");
    assert_eq!(
        (m.mount_path.as_str(), m.read_only),
        ("/etc/msgbench/tls/0", Some(true))
    );
    let refs: Vec<(&str, &str, &str)> = (c.env.iter().flatten())
        .filter_map(|e| {
            let r = e.value_from.as_ref()?.secret_key_ref.as_ref()?;
            Some((e.name.as_str(), r.name.as_str(), r.key.as_str()))
        })
        .collect();
    assert_eq!(
        refs,
        [
            ("MSGBENCH_AUTH_0_USERNAME", "mq-user", "username"),
            ("MSGBENCH_AUTH_0_PASSWORD", "mq-user", "password")
        ]
    );
}

// --- the baseline -------------------------------------------------------------------------

fn with_baseline(waiting_chain: &[&str]) -> BaselineSeen {
    BaselineSeen {
        name: "r0".into(),
        state: Some(BaselineState::default()),
        waiting_chain: waiting_chain.iter().map(|s| s.to_string()).collect(),
    }
}

#[test]
fn a_run_waits_while_its_baseline_runs() {
    let br = run(1, "baselineRef: {name: r0}");
    let mut obs = Observed::at(at(T0 + 3));
    obs.targets = vec![ready_target()];
    obs.baseline = Some(with_baseline(&["r0"]));
    let d = decide_at(&br, &status(Phase::Pending), &obs);
    assert_eq!(d.status.phase, Some(Phase::Pending));
    assert_eq!(
        condition(&d, cond::RUNNERS_READY),
        ("False".into(), "WaitingForBaseline".into())
    );
    assert!(d.effects.is_empty());
    // Once it has ended, the run goes ahead.
    obs.baseline.as_mut().unwrap().state.as_mut().unwrap().ended = Some(Phase::Succeeded);
    let d = decide_at(&br, &status(Phase::Pending), &obs);
    assert_eq!(d.status.phase, Some(Phase::Starting));
}

#[test]
fn runs_waiting_for_each_other_fail_at_once_as_a_baseline_cycle() {
    let br = run(1, "baselineRef: {name: r0}");
    let mut obs = Observed::at(at(T0 + 3));
    obs.targets = vec![ready_target()];
    obs.baseline = Some(with_baseline(&["r0", "r1"]));
    let d = decide_at(&br, &status(Phase::Pending), &obs);
    assert_eq!(
        verdict(&d),
        (
            Some(Phase::Failed),
            RunFailureReason::BaselineCycle.to_string()
        )
    );
    assert!(message(&d).contains("r1 -> r0 -> r1"), "{}", message(&d));
    assert_eq!(
        d.requeue,
        Some(POLL),
        "a finished run is looked at once more, not in a loop"
    );
}

// --- the start barrier ----------------------------------------------------------------------

#[test]
fn runners_not_all_ready_wait_then_barrier_timeout() {
    let br = run(2, "");
    let mut obs = Observed::at(at(T0 + 20));
    obs.job = Some(job(T0 + 10));
    obs.runner_pods = vec![pod(0, "Running", true), pod(1, "Pending", false)];
    let d = decide_at(&br, &status(Phase::Starting), &obs);
    assert_eq!(d.status.phase, Some(Phase::Starting));
    assert_eq!(d.status.progress.as_ref().unwrap().runners_ready, 1);
    obs.now = at(T0 + 10 + timing::barrier_limit_seconds(&br) + 1);
    let d = decide_at(&br, &status(Phase::Starting), &obs);
    assert_eq!(
        verdict(&d),
        (
            Some(Phase::Failed),
            RunFailureReason::BarrierTimeout.to_string()
        )
    );
    assert!(message(&d).starts_with("1 of 2 runners"), "{}", message(&d));
}

#[test]
fn all_runners_ready_stores_the_common_start_before_anyone_hears_it() {
    let br = run(2, "");
    let mut obs = Observed::at(at(T0 + 20));
    obs.job = Some(job(T0 + 10));
    obs.runner_pods = vec![pod(0, "Running", true), pod(1, "Running", true)];
    let d = decide_at(&br, &status(Phase::Starting), &obs);
    assert_eq!(
        d.status.phase,
        Some(Phase::Starting),
        "Running once the runners have it"
    );
    let start = d.status.start_time.clone().unwrap();
    assert_eq!(millis(&start), millis(&obs.now) + barrier::START_LEAD_MS);
    assert!(
        d.effects.is_empty(),
        "no /start before the time is stored: {:?}",
        d.effects
    );
    assert_eq!(
        condition(&d, cond::RUNNERS_READY),
        ("False".into(), "StartChosen".into())
    );
}

#[test]
fn a_failed_runner_pod_fails_the_run_with_its_own_reason() {
    let br = run(2, "");
    let mut failed = pod(1, "Failed", false);
    failed.status.as_mut().unwrap().reason = Some("Evicted".into());
    let mut obs = Observed::at(at(T0 + 20));
    obs.job = Some(job(T0 + 10));
    obs.runner_pods = vec![pod(0, "Running", true), failed];
    for phase in [Phase::Starting, Phase::Running] {
        let d = decide_at(&br, &status(phase), &obs);
        assert_eq!(
            verdict(&d),
            (
                Some(Phase::Failed),
                RunFailureReason::RunnerFailed.to_string()
            ),
            "{phase:?}"
        );
        assert!(message(&d).contains("r1-g1-1-x"), "{}", message(&d));
    }
}

/// A target that refused the runners (or that none reached) was not ready after all: the run
/// fails with the runner's reason and TargetReady ends False with it, not True beside it.
#[test]
fn a_target_that_refused_the_runners_ends_target_ready_false() {
    use runner_api::termination::RunnerGaveUp;
    for (gave_up, why, reason) in [
        (
            RunnerGaveUp::TargetAuthFailed,
            "nats: Authorization Violation",
            RunFailureReason::TargetAuthFailed,
        ),
        (
            RunnerGaveUp::TargetUnreachable,
            "target nats://127.0.0.1:4222 unreachable: 3 connect attempt(s) failed",
            RunFailureReason::TargetUnreachable,
        ),
    ] {
        refused_runners_end_target_ready_false(gave_up, why, reason);
    }
}

fn refused_runners_end_target_ready_false(
    gave_up: runner_api::termination::RunnerGaveUp,
    why: &str,
    reason: RunFailureReason,
) {
    use runner_api::termination::Termination;
    let br = run(1, "");
    let mut failed = pod(0, "Failed", false);
    let said = Termination::new(gave_up, why);
    let state: k8s_openapi::api::core::v1::ContainerStatus = serde_json::from_value(json!({
        "name": "runner", "image": "i", "imageID": "", "ready": false, "restartCount": 0,
        "state": {"terminated": {"exitCode": 2, "reason": "Error", "message": said.to_json()}},
    }))
    .unwrap();
    failed.status.as_mut().unwrap().container_statuses = Some(vec![state]);
    let mut obs = Observed::at(at(T0 + 20));
    obs.job = Some(job(T0 + 10));
    obs.runner_pods = vec![failed];
    let mut st = status(Phase::Running);
    cond::set(
        &mut st.conditions,
        cond::TARGET_READY,
        cond::Status::True,
        "Ready",
        "",
        Some(1),
        &at(T0),
    );
    let d = decide_at(&br, &st, &obs);
    let reason = reason.to_string();
    assert_eq!(verdict(&d), (Some(Phase::Failed), reason.clone()));
    assert_eq!(condition(&d, cond::TARGET_READY), ("False".into(), reason));
    // A failure that is not the target's leaves TargetReady as it was.
    let mut evicted = pod(0, "Failed", false);
    evicted.status.as_mut().unwrap().reason = Some("Evicted".into());
    obs.runner_pods = vec![evicted];
    let d = decide_at(&br, &st, &obs);
    assert_eq!(verdict(&d).1, RunFailureReason::RunnerFailed.to_string());
    assert_eq!(
        condition(&d, cond::TARGET_READY),
        ("True".into(), "Ready".into())
    );
}

#[test]
fn a_runner_whose_node_went_silent_fails_the_run_naming_the_node() {
    let br = run(2, "");
    // The node controller flipped Ready; the kubelet's last word was "container ready".
    let mut lost: Pod = serde_json::from_value(json!({
        "metadata": {"name": "r1-g1-1-x"},
        "spec": {"nodeName": "msgbench-local-3", "containers": [{"name": "runner"}]},
        "status": {"phase": "Running",
            "conditions": [{"type": "Ready", "status": "False"}],
            "containerStatuses": [{"name": "runner", "ready": true, "restartCount": 0,
                "image": "i", "imageID": "", "state": {"running": {}}}]}
    }))
    .unwrap();
    let mut obs = Observed::at(at(T0 + 20));
    obs.job = Some(job(T0 + 10));
    obs.runner_pods = vec![pod(0, "Running", true), lost.clone()];
    for phase in [Phase::Starting, Phase::Running] {
        let d = decide_at(&br, &status(phase), &obs);
        assert_eq!(
            verdict(&d),
            (
                Some(Phase::Failed),
                RunFailureReason::RunnerNodeLost.to_string()
            ),
            "{phase:?}"
        );
        assert!(
            message(&d).contains("node msgbench-local-3"),
            "{}",
            message(&d)
        );
    }
    // The same pod, not ready by the kubelet's own account (a probe): waited for.
    lost.status
        .as_mut()
        .unwrap()
        .container_statuses
        .as_mut()
        .unwrap()[0]
        .ready = false;
    obs.runner_pods = vec![pod(0, "Running", true), lost];
    let d = decide_at(&br, &status(Phase::Starting), &obs);
    assert_eq!(d.status.phase, Some(Phase::Starting));
}

#[test]
fn a_runner_no_node_takes_fails_at_the_barrier_bound_in_the_schedulers_words() {
    let br = run(2, "");
    let mut pending = pod(1, "Pending", false);
    pending.status.as_mut().unwrap().conditions = Some(vec![PodCondition {
        type_: "PodScheduled".into(),
        status: "False".into(),
        reason: Some("Unschedulable".into()),
        message: Some("0/3 nodes are available: 3 Insufficient cpu.".into()),
        ..PodCondition::default()
    }]);
    let mut obs = Observed::at(at(T0 + 20));
    obs.job = Some(job(T0 + 10));
    obs.runner_pods = vec![pod(0, "Running", true), pending];
    let d = decide_at(&br, &status(Phase::Starting), &obs);
    assert_eq!(
        d.status.phase,
        Some(Phase::Starting),
        "waited for within the bound"
    );
    obs.now = at(T0 + 10 + timing::barrier_limit_seconds(&br) + 1);
    let d = decide_at(&br, &status(Phase::Starting), &obs);
    assert_eq!(
        verdict(&d),
        (
            Some(Phase::Failed),
            RunFailureReason::RunnersUnschedulable.to_string()
        )
    );
    assert!(
        message(&d).starts_with("1 of 2 runners")
            && message(&d).ends_with(
                "runner pod r1-g1-1-x could not be scheduled: 0/3 nodes are available: \
                 3 Insufficient cpu."
            ),
        "{}",
        message(&d)
    );
}

/// A runner pod created at `created` whose container waits on an image pull.
fn pulling(created: i64, reason: &str, message: &str) -> Pod {
    let mut p = pod(1, "Pending", false);
    p.metadata.creation_timestamp = Some(at(created));
    p.status.as_mut().unwrap().container_statuses = Some(vec![serde_json::from_value(json!({
        "name": "runner", "image": "reg.example/x/msgbench/bench-runner:nope", "imageID": "",
        "ready": false, "restartCount": 0,
        "state": {"waiting": {"reason": reason, "message": message}}
    }))
    .unwrap()]);
    p
}

#[test]
fn a_runner_image_that_cannot_be_pulled_ends_the_run_naming_it_within_the_grace() {
    let br = run(2, "");
    let kubelet = "failed to pull and unpack image \"reg.example/x/msgbench/bench-runner:nope\": \
                   not found";
    let mut obs = Observed::at(at(T0 + 20));
    obs.job = Some(job(T0 + 5));
    obs.runner_pods = vec![
        pod(0, "Running", true),
        pulling(T0 + 5, "ErrImagePull", kubelet),
    ];
    // A registry blip is waited out, and the wait says why.
    let d = decide_at(&br, &status(Phase::Starting), &obs);
    assert_eq!(d.status.phase, Some(Phase::Starting));
    let c = cond::get(&d.status.conditions, cond::RUNNERS_READY).unwrap();
    assert_eq!(
        (c.status.as_str(), c.reason.as_str()),
        ("False", "ErrImagePull")
    );
    assert!(
        c.message
            .contains("reg.example/x/msgbench/bench-runner:nope"),
        "{}",
        c.message
    );
    // Still failing at the grace's end: Failed, naming the pod, the image and the kubelet's
    // words, long before the barrier's bound.
    obs.now = at(T0 + 5 + barrier::PULL_GRACE_SECONDS);
    assert!(barrier::PULL_GRACE_SECONDS + 5 < timing::barrier_limit_seconds(&br));
    obs.runner_pods[1] = pulling(T0 + 5, "ImagePullBackOff", "Back-off pulling image");
    let d = decide_at(&br, &status(Phase::Starting), &obs);
    assert_eq!(
        verdict(&d),
        (
            Some(Phase::Failed),
            RunFailureReason::ImagePullFailed.to_string()
        )
    );
    assert_eq!(
        message(&d),
        "runner pod r1-g1-1-x cannot pull image \"reg.example/x/msgbench/bench-runner:nope\" \
         (ImagePullBackOff): Back-off pulling image; still failing 40s after the pod was created"
    );
    // An invalid reference is not waited for.
    obs.now = at(T0 + 6);
    obs.runner_pods[1] = pulling(T0 + 5, "InvalidImageName", "couldn't parse image name");
    let d = decide_at(&br, &status(Phase::Starting), &obs);
    assert_eq!(
        verdict(&d),
        (
            Some(Phase::Failed),
            RunFailureReason::ImagePullFailed.to_string()
        )
    );
}

/// Running with the common start stored at `start_ms`, two runner pods up.
fn running(start_ms: u64, now_ms: u64, agents: Vec<AgentSeen>) -> (BenchmarkRunStatus, Observed) {
    in_phase(Phase::Running, start_ms, now_ms, agents)
}

/// `phase` with the common start stored at `start_ms`, two runner pods up.
fn in_phase(
    phase: Phase,
    start_ms: u64,
    now_ms: u64,
    agents: Vec<AgentSeen>,
) -> (BenchmarkRunStatus, Observed) {
    let mut st = status(phase);
    st.start_time = Some(at_ms(start_ms));
    let mut obs = Observed::at(at_ms(now_ms));
    obs.job = Some(job(T0 + 10));
    obs.runner_pods = vec![pod(0, "Running", true), pod(1, "Running", true)];
    obs.agents = agents;
    (st, obs)
}

const START: u64 = (T0 as u64 + 30) * 1000;

#[test]
fn the_stored_start_goes_to_every_runner_in_parallel_and_the_run_is_running() {
    let br = run(2, "");
    let both = vec![agent(0, ready_agent()), agent(1, ready_agent())];
    let (st, obs) = in_phase(Phase::Starting, START, START - 1500, both.clone());
    let d = decide_at(&br, &st, &obs);
    assert_eq!(
        d.effects,
        vec![Effect::Release {
            trial: 1,
            at_unix_ms: START,
            ips: vec!["10.0.0.1".into(), "10.0.0.2".into()]
        }]
    );
    assert_eq!(
        d.status.start_time, st.start_time,
        "the stored start is never changed by a send"
    );
    assert_eq!(
        d.status.phase,
        Some(Phase::Running),
        "written after the sends"
    );
    assert_eq!(
        condition(&d, cond::RUNNERS_READY),
        ("True".into(), "BarrierReleased".into())
    );
    // An agent that does not answer is not released on faith: the run stays Starting.
    let (st, obs) = in_phase(Phase::Starting, START, START - 1500, both[..1].to_vec());
    let d = decide_at(&br, &st, &obs);
    assert_eq!(
        d.status.phase,
        Some(Phase::Running),
        "the one that answered gets it"
    );
    let (st, obs) = in_phase(Phase::Starting, START, START - 1500, vec![]);
    let d = decide_at(&br, &st, &obs);
    assert_eq!(
        (d.status.phase, d.effects.len()),
        (Some(Phase::Starting), 0)
    );
    // After a restart between the sends and the status write, every runner has it already.
    let had_it = vec![
        agent(0, started(1, 0, START)),
        agent(1, started(1, 0, START)),
    ];
    let (st, obs) = in_phase(Phase::Starting, START, START + 300, had_it);
    let d = decide_at(&br, &st, &obs);
    assert_eq!((d.status.phase, d.effects.len()), (Some(Phase::Running), 0));
}

#[test]
fn a_start_nobody_received_in_time_is_moved_not_sent_late() {
    let br = run(2, "");
    let (st, obs) = in_phase(
        Phase::Starting,
        START,
        START + 3_000,
        vec![agent(0, ready_agent()), agent(1, ready_agent())],
    );
    let d = decide_at(&br, &st, &obs);
    assert!(d.effects.is_empty(), "{:?}", d.effects);
    let moved = millis(d.status.start_time.as_ref().unwrap());
    assert_eq!(moved, START + 3_000 + barrier::START_LEAD_MS);
    assert_eq!(
        d.status.phase,
        Some(Phase::Starting),
        "sent on the next pass"
    );
}

#[test]
fn a_late_runner_gets_the_same_start_or_the_run_ends_started_apart() {
    let br = run(2, "");
    let on_time = agent(0, started(1, 0, START));
    // Just after the start, within the tolerance: the late one gets the same time.
    let (st, obs) = running(
        START,
        START + 200,
        vec![on_time.clone(), agent(1, ready_agent())],
    );
    let d = decide_at(&br, &st, &obs);
    assert_eq!(
        d.effects,
        vec![Effect::Release {
            trial: 1,
            at_unix_ms: START,
            ips: vec!["10.0.0.2".into()]
        }]
    );
    // Seconds later it would not run concurrently with the other: fail, never merge.
    let (st, obs) = running(START, START + 5_000, vec![on_time, agent(1, ready_agent())]);
    let d = decide_at(&br, &st, &obs);
    assert_eq!(
        verdict(&d),
        (
            Some(Phase::Failed),
            RunFailureReason::RunnersStartedApart.to_string()
        )
    );
    assert!(message(&d).contains("r1-g1-1-x"), "{}", message(&d));
}

#[test]
fn a_later_trial_is_released_when_every_runner_waits_for_it() {
    let br = run(2, "");
    let now = START + 20_000;
    let (st, obs) = running(
        START,
        now,
        vec![agent(0, started(2, 2, 0)), agent(1, started(1, 0, START))],
    );
    assert!(
        decide_at(&br, &st, &obs).effects.is_empty(),
        "one runner still in trial 1"
    );
    let (st, obs) = running(
        START,
        now,
        vec![agent(0, started(2, 2, 0)), agent(1, started(2, 2, 0))],
    );
    let d = decide_at(&br, &st, &obs);
    assert_eq!(
        d.effects,
        vec![Effect::Release {
            trial: 2,
            at_unix_ms: now + barrier::TRIAL_LEAD_MS,
            ips: vec!["10.0.0.1".into(), "10.0.0.2".into()]
        }]
    );
    assert_eq!(d.requeue, Some(Duration::from_millis(500)));
    // A resend after a partial release names the start the released runner keeps.
    let kept = now + 300;
    let (st, obs) = running(
        START,
        now + 100,
        vec![agent(0, started(2, 0, kept)), agent(1, started(2, 2, 0))],
    );
    let d = decide_at(&br, &st, &obs);
    assert_eq!(
        d.effects,
        vec![Effect::Release {
            trial: 2,
            at_unix_ms: kept,
            ips: vec!["10.0.0.2".into()]
        }]
    );
}

#[test]
fn echoes_that_differ_from_the_sent_start_are_started_apart() {
    let ok = vec![
        ("10.0.0.1".to_string(), Ok(START)),
        ("10.0.0.2".to_string(), Err("timeout".to_string())),
    ];
    assert_eq!(
        check_echoes(1, START, &ok),
        None,
        "an unanswered send is resent, not a failure"
    );
    let apart = vec![
        ("10.0.0.1".to_string(), Ok(START)),
        ("10.0.0.2".to_string(), Ok(START - 4_000)),
    ];
    let msg = check_echoes(1, START, &apart).unwrap();
    assert!(
        msg.contains("10.0.0.2 keeps") && msg.contains("4000 ms apart"),
        "{msg}"
    );
}

#[test]
fn a_release_answered_apart_settles_into_a_failed_run_and_one_answered_together_does_not() {
    let now = time_at(START).unwrap();
    let mut st = BenchmarkRunStatus {
        phase: Some(Phase::Running),
        ..BenchmarkRunStatus::default()
    };
    let together = EffectOutcome::Released {
        trial: 2,
        at_unix_ms: START,
        echoes: vec![
            ("10.0.0.1".into(), Ok(START)),
            ("10.0.0.2".into(), Err("timeout".into())),
        ],
    };
    settle(&run(1, ""), &mut st, &[together], 1, &now);
    assert_eq!(st.phase, Some(Phase::Running));
    let apart = EffectOutcome::Released {
        trial: 2,
        at_unix_ms: START,
        echoes: vec![("10.0.0.2".into(), Ok(START + 3_000))],
    };
    settle(&run(1, ""), &mut st, &[apart], 1, &now);
    assert_eq!(st.phase, Some(Phase::Failed));
    let v = st.verdict.unwrap();
    assert_eq!(v.reason, RunFailureReason::RunnersStartedApart.as_str());
    assert!(v
        .message
        .unwrap()
        .starts_with("trial 2: runner(s) started apart"));
}

// --- running and results --------------------------------------------------------------------

#[test]
fn progress_is_written_at_most_every_few_seconds() {
    let br = run(1, "");
    let mut counting = started(1, 0, START);
    counting.published = 100;
    let (mut st, obs) = running(START, START + 3_000, vec![agent(0, counting.clone())]);
    st.progress = Some(Progress {
        trial: 1,
        trials: 1,
        elapsed_seconds: 1,
        published: 50,
        runners_ready: 1,
        ..Progress::default()
    });
    let d = decide_at(&br, &st, &obs);
    assert_eq!(
        d.status, st,
        "2 s after the last figures nothing is written"
    );
    let (_, later) = running(START, START + 7_000, vec![agent(0, counting)]);
    let d = decide_at(&br, &st, &later);
    let p = d.status.progress.unwrap();
    assert_eq!((p.elapsed_seconds, p.published), (7, 100));
}

#[test]
fn results_over_the_memory_share_fail_the_run_as_results_too_large() {
    let br = run(1, "");
    let (st, mut obs) = running(START, START + 20_000, vec![]);
    let why = "pod p: GET http://10.0.0.7:9090/results: response body over 33554432 bytes";
    obs.results = Some(Gathered::TooLarge(why.into()));
    let d = decide_at(&br, &st, &obs);
    assert_eq!(
        verdict(&d),
        (
            Some(Phase::Failed),
            RunFailureReason::ResultsTooLarge.to_string()
        )
    );
    assert!(message(&d).contains("response body over 33554432 bytes"));
}

#[test]
fn lost_results_fail_the_run_as_results_lost() {
    let br = run(1, "");
    let (st, mut obs) = running(START, START + 20_000, vec![]);
    obs.results = Some(Gathered::Lost(
        "runner 1 (pod p): trial 1: frames 2 of 3 missing from the log".into(),
    ));
    let d = decide_at(&br, &st, &obs);
    assert_eq!(
        verdict(&d),
        (
            Some(Phase::Failed),
            RunFailureReason::ResultsLost.to_string()
        )
    );
    assert!(message(&d).contains("frames 2 of 3 missing"));
    // A Job that completed before the results were read.
    let (st, mut obs) = running(START, START + 20_000, vec![]);
    obs.runner_pods.clear();
    obs.job = None;
    let d = decide_at(&br, &st, &obs);
    assert_eq!(
        verdict(&d),
        (
            Some(Phase::Failed),
            RunFailureReason::ResultsLost.to_string()
        )
    );
    // A holding runner that did not answer yet is waited for.
    let (st, mut obs) = running(START, START + 20_000, vec![]);
    obs.results = Some(Gathered::NotYet("pod p: connection refused".into()));
    let d = decide_at(&br, &st, &obs);
    assert_eq!(d.status.phase, Some(Phase::Merging));
    assert_eq!(d.status.verdict, None);
}

fn two_runner_lines(second_start_offset_ms: u64) -> Vec<runner_api::agent::RawResultLine> {
    let fast: Vec<u64> = vec![1_000; 99];
    let mut b = record(2, 1, &fast, 99);
    b.started_unix_ms += second_start_offset_ms;
    crate::run::results::tests::raw(&[record(1, 1, &fast, 99), b])
}

#[test]
fn complete_results_reach_a_verdict() {
    let br = run(2, "");
    let (st, mut obs) = running(START, START + 20_000, vec![]);
    obs.results = Some(Gathered::Complete(two_runner_lines(0)));
    let d = decide_at(&br, &st, &obs);
    assert_eq!(verdict(&d), (Some(Phase::Succeeded), "Succeeded".into()));
    assert_eq!(d.status.result.as_ref().unwrap().received, 198);
    assert!(message(&d).starts_with("198 received"), "{}", message(&d));
    assert_eq!(
        condition(&d, cond::COMPLETE),
        ("True".into(), "Succeeded".into())
    );
    assert_eq!(d.status.environment.as_ref().unwrap().runner_pods.len(), 2);
}

#[test]
fn a_server_restart_no_fault_asked_for_is_named_in_status_and_the_verdict() {
    let br = run(2, "");
    let server = |restarts: Option<i32>, last: Option<&str>| ObservedPod {
        name: "js-0".into(),
        uid: Some("u0".into()),
        restarts,
        last_termination: last.map(Into::into),
        ..ObservedPod::default()
    };
    // The servers as they were when the start was chosen are kept...
    let mut obs = Observed::at(at(T0 + 20));
    obs.job = Some(job(T0 + 10));
    obs.runner_pods = vec![pod(0, "Running", true), pod(1, "Running", true)];
    obs.server_pods = vec![server(None, None)];
    let d = decide_at(&br, &status(Phase::Starting), &obs);
    let env = d.status.environment.clone().unwrap();
    assert_eq!(env.server_pods_at_start, obs.server_pods);
    // ...and compared with them once the results are in.
    let (mut st, mut obs) = running(START, START + 20_000, vec![]);
    st.environment = Some(env);
    obs.results = Some(Gathered::Complete(two_runner_lines(0)));
    obs.server_pods = vec![server(Some(1), Some("OOMKilled (exit 137)"))];
    let d = decide_at(&br, &st, &obs);
    assert_eq!(verdict(&d), (Some(Phase::Succeeded), "Succeeded".into()));
    let restarts = &d.status.environment.as_ref().unwrap().server_restarts;
    assert_eq!(restarts.len(), 1, "{restarts:?}");
    assert!(
        message(&d).contains("caution: server pods changed during the run")
            && message(&d).contains("js-0 restarted (OOMKilled (exit 137))"),
        "{}",
        message(&d)
    );
}

#[test]
fn a_broken_threshold_is_thresholds_not_met() {
    let br = run(
        2,
        "thresholds: [{metric: receiveRate, op: gt, value: 1000000}]",
    );
    let (st, mut obs) = running(START, START + 20_000, vec![]);
    obs.results = Some(Gathered::Complete(two_runner_lines(0)));
    let d = decide_at(&br, &st, &obs);
    assert_eq!(
        verdict(&d),
        (
            Some(Phase::Failed),
            RunFailureReason::ThresholdsNotMet.to_string()
        )
    );
    assert!(d.status.result.is_some(), "the figures stay for the reader");
}

#[test]
fn records_of_one_trial_that_started_apart_are_never_merged() {
    let br = run(2, "");
    let (st, mut obs) = running(START, START + 20_000, vec![]);
    obs.results = Some(Gathered::Complete(two_runner_lines(3_000)));
    let d = decide_at(&br, &st, &obs);
    assert_eq!(
        verdict(&d),
        (
            Some(Phase::Failed),
            RunFailureReason::RunnersStartedApart.to_string()
        )
    );
    assert!(
        message(&d).contains("trial 1: starts 3000 ms apart"),
        "{}",
        message(&d)
    );
    assert!(d.status.result.is_none());
}

// --- after the verdict ----------------------------------------------------------------------

fn finished(phase: Phase) -> BenchmarkRunStatus {
    let mut st = status(Phase::Running);
    fail(
        &mut st,
        RunFailureReason::RunnerFailed,
        "",
        1,
        &at(T0 + 100),
    );
    if phase == Phase::Succeeded {
        pass(&mut st, "ok", 1, &at(T0 + 100));
    }
    st
}

#[test]
fn a_failed_run_stops_its_active_runners_once() {
    let br = run(2, "");
    let mut obs = Observed::at(at(T0 + 101));
    obs.job = Some(job(T0 + 10));
    let d = decide_at(&br, &finished(Phase::Failed), &obs);
    assert_eq!(
        d.effects,
        vec![Effect::SuspendJob {
            name: "r1-g1".into()
        }]
    );
    assert_eq!(d.requeue, None);
    obs.job.as_mut().unwrap().spec = Some(k8s_openapi::api::batch::v1::JobSpec {
        suspend: Some(true),
        ..Default::default()
    });
    assert!(decide_at(&br, &finished(Phase::Failed), &obs)
        .effects
        .is_empty());
}

#[test]
fn a_passed_run_lets_holding_runners_go() {
    let br = run(2, "trials: 3");
    let mut obs = Observed::at(at(T0 + 101));
    obs.runner_pods = vec![pod(0, "Running", true), pod(1, "Succeeded", false)];
    let d = decide_at(&br, &finished(Phase::Succeeded), &obs);
    assert_eq!(
        d.effects,
        vec![Effect::AckResults {
            ips: vec!["10.0.0.1".into()],
            records: 3
        }]
    );
    assert_eq!(d.status, finished(Phase::Succeeded), "no status write");
}

#[test]
fn a_late_baseline_comparison_ends_when_the_baseline_fails_or_is_gone() {
    let br = run(1, "baselineRef: {name: r0}");
    let mut st = finished(Phase::Succeeded);
    st.trials = vec![Default::default(), Default::default()];
    st.comparison = Some(compare::with_baseline(
        "r0",
        Some(&with_baseline(&["r0"])),
        &st.trials,
    ));
    let mut obs = Observed::at(at(T0 + 200));
    obs.baseline = Some(with_baseline(&["r0"]));
    let d = decide_at(&br, &st, &obs);
    assert_eq!(
        d.requeue,
        Some(Duration::from_secs(15)),
        "the baseline still runs"
    );
    obs.baseline.as_mut().unwrap().state.as_mut().unwrap().ended = Some(Phase::Failed);
    let d = decide_at(&br, &st, &obs);
    assert_eq!(
        d.status.comparison.as_ref().unwrap().reason.as_deref(),
        Some("BaselineFailed")
    );
    assert_eq!(d.requeue, None, "no polling after the baseline failed");
    obs.baseline.as_mut().unwrap().state = None;
    let d = decide_at(&br, &st, &obs);
    assert_eq!(
        d.status.comparison.as_ref().unwrap().reason.as_deref(),
        Some("BaselineNotFound")
    );
    assert_eq!(d.requeue, None);
}

#[test]
fn children_go_after_the_ttl_and_results_stay() {
    let br = run(1, "ttlSecondsAfterFinished: 60");
    let mut obs = Observed::at(at(T0 + 130));
    obs.job = Some(job(T0 + 10));
    obs.job.as_mut().unwrap().status = None;
    let d = decide_at(&br, &finished(Phase::Succeeded), &obs);
    assert!(d.effects.is_empty());
    assert_eq!(d.requeue, Some(Duration::from_secs(31)));
    obs.now = at(T0 + 161);
    let d = decide_at(&br, &finished(Phase::Succeeded), &obs);
    assert_eq!(d.effects, vec![Effect::DeleteChildren]);
    obs.job = None;
    let d = decide_at(&br, &finished(Phase::Succeeded), &obs);
    assert!(d.effects.is_empty(), "deleted once");
    assert_eq!(d.requeue, None);
}

#[test]
fn fault_outcomes_settle_into_their_records_and_nowhere_else() {
    use msgbench_crds::benchmark_run::{FaultInjection, FaultRecord};
    let now = time_at(START).unwrap();
    let injection = FaultInjection {
        pod: "demo-1".into(),
        pod_uid: "u1".into(),
        started_time: now.clone(),
        how: "ordinal 1".into(),
        stream_leader: None,
    };
    // Record 1's pod was chosen (by `decide`, in an earlier status).
    let chosen = FaultRecord {
        injecting: Some(injection),
        ..FaultRecord::default()
    };
    let mut st = BenchmarkRunStatus {
        faults: vec![FaultRecord::default(), chosen],
        ..BenchmarkRunStatus::default()
    };
    let refused = EffectOutcome::FaultNotDone {
        index: 1,
        why: "pod demo-1 was replaced".into(),
    };
    // An index past the records (a stale outcome) changes nothing.
    let stale = EffectOutcome::FaultNotDone {
        index: 7,
        why: "x".into(),
    };
    settle(&run(1, ""), &mut st, &[refused, stale], 1, &now);
    assert_eq!(st.faults[1].injecting, None);
    assert_eq!(
        st.faults[1].message.as_deref(),
        Some("not done: pod demo-1 was replaced")
    );
    assert_eq!(st.faults[0], FaultRecord::default());
    assert_eq!(st.faults.len(), 2);
}

mod faults;
mod rounds;
mod streams;

/// A `powerLoss` needs the server's store under the lazy file system; the refusal names the
/// field, and a server that has it passes.
#[test]
fn a_power_loss_needs_the_lazy_file_system_on_the_target() {
    let br = run(
        1,
        "faults:\n  - {afterSeconds: 2, action: powerLoss, pod: ordinal, ordinal: 0}",
    );
    let decide_with = |power_loss: bool| {
        let mut t = ready_target();
        if let Ok(r) = &mut t.resolved {
            r.server_labels = Some(Default::default());
            r.fault_agent = Some(FaultAgentSeen {
                network: false,
                power_loss,
                peers: true,
            });
        }
        let mut obs = Observed::at(at(T0 + 1));
        obs.faults_allowed = true;
        obs.targets = vec![t];
        decide_at(&br, &status(Phase::Pending), &obs)
    };
    let d = decide_with(false);
    assert_eq!(
        verdict(&d),
        (
            Some(Phase::Failed),
            RunFailureReason::TargetUnfit.to_string()
        )
    );
    assert!(
        message(&d).contains("spec.faults[0]: action powerLoss needs")
            && message(&d).contains("spec.faultInjection.powerLoss: true on JetStreamCluster/js3"),
        "{}",
        message(&d)
    );
    let d = decide_with(true);
    assert_ne!(
        verdict(&d).1,
        RunFailureReason::TargetUnfit.as_str(),
        "{}",
        message(&d)
    );
}
