//! A run's JetStream streams, deleted by its id once the run is over. Each trial has a stream
//! of its own (`RunIsolation::stream`: `<stream>_<ID>_T<trial>`), which the runners delete
//! when they exit normally. A runner that is killed on the way (OOM, a lost node, a failed
//! run's suspended Job, a deleted run's pods) leaves its stream in the server's store, and
//! file-store streams pile up on a server that lives for months.
//!
//! So while a run may have streams it holds the finalizer [`FINALIZER`]. Once it has ended
//! (no runner active) or is being deleted, a short Job runs `msgbench-runner delete-streams`
//! for every JetStream target: it deletes every stream whose name carries the run's id, of
//! any generation and trial. The Job takes the runners' credentials and CA by reference, as
//! the runners do, so the operator still never reads a Secret. The finalizer goes when the
//! Job has ended, either way; a deleted run waits for it at most [`DELETE_WAIT`], so a target
//! that is down cannot keep a run (or its namespace) from going. Condition `StreamsDeleted`
//! says how it went. Pure.
use crate::meta::{
    LABEL_COMPONENT, LABEL_INSTANCE, LABEL_MANAGED_BY, LABEL_NAME, LABEL_PART_OF, MANAGED_BY,
};
use crate::operands::{customize, merged, OperandDefaults};
use crate::run::identity::{RunIdentity, KIND_LABEL};
use crate::run::model::{SweepSeen, TargetSeen};
use crate::run::runners::build::{mesh_opt_out, runner_security_context};
use crate::run::target::target_auth::{runner_tls, TargetSecret, TlsSource};
use crate::security::container_security_context;
use k8s_openapi::api::batch::v1::{Job, JobSpec};
use k8s_openapi::api::core::v1::{Container, PodSpec, PodTemplateSpec, ResourceRequirements};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use msgbench_crds::benchmark_run::{BenchmarkRun, BenchmarkRunSpec};
use msgbench_crds::workload::{Protocol, Workload};
use runner_api::agent::TargetTls;
use std::collections::BTreeMap;
use std::time::Duration;

/// Held while the run may have streams on a server.
pub const FINALIZER: &str = "msgbench.dev/streams";
/// `app.kubernetes.io/component` of the sweep's pod (runner pods are `runner`).
pub const COMPONENT: &str = "stream-sweeper";
/// The uid of the run a sweep Job is for: the Job is not owned by the run (a foreground
/// deletion would delete it before it ran), so a Job of the same name left by an earlier run
/// is told apart by this label.
pub const LABEL_RUN_UID: &str = "msgbench.dev/run-uid";
/// How long a run being deleted waits for its sweep.
pub const DELETE_WAIT: Duration = Duration::from_secs(120);
/// The sweep's own bound: connecting (30 s of retries), listing and deleting.
const DEADLINE_SECONDS: i64 = 90;
/// The Job goes this long after it ended; the run's condition keeps what it said.
const TTL_SECONDS: i32 = 600;

/// Reasons of condition `StreamsDeleted`.
pub const REASON_DELETING: &str = "Deleting";
pub const REASON_DELETED: &str = "Deleted";
pub const REASON_NOT_DELETED: &str = "NotDeleted";
pub const REASON_NO_TARGET: &str = "NoTarget";
/// Every runner exited normally, and a runner exits 0 only after deleting its streams.
pub const REASON_DELETED_BY_RUNNERS: &str = "DeletedByRunners";

/// Whether any trial of the run creates its own streams (`jetstream.createStream`, the
/// default): only those are named by the run's id.
pub fn creates_streams(spec: &BenchmarkRunSpec) -> bool {
    let creates = |w: &Workload| {
        w.protocol == Protocol::Jetstream && w.jetstream.as_ref().is_none_or(|j| j.create_stream)
    };
    creates(&spec.workload)
        || (spec.variants.iter())
            .filter_map(|v| v.workload.as_ref())
            .any(|o| creates(&spec.workload.with_override(o)))
}

pub fn holds_finalizer(br: &BenchmarkRun) -> bool {
    br.metadata
        .finalizers
        .iter()
        .flatten()
        .any(|f| f == FINALIZER)
}

/// The sweep Job's name: one per run (it deletes the streams of every generation).
pub fn job_name(run: &str) -> String {
    const SUFFIX: &str = "-streams";
    let base: String = run.chars().take(63 - SUFFIX.len()).collect();
    format!("{}{SUFFIX}", base.trim_end_matches(['-', '.']))
}

/// The run's id in its stream names: the first 8 hex digits of its uid (what
/// `RunIsolation::for_run` names streams with and `delete-streams --run` takes).
pub fn run_id(uid: &str) -> String {
    runner_api::agent::run_prefix(uid)
}

/// A JetStream server to sweep.
#[derive(Clone, Debug, PartialEq)]
pub struct SweepTarget {
    pub url: String,
    pub auth: Option<TargetSecret>,
    pub tls: Option<TlsSource>,
}

/// The resolved targets that speak JetStream (`nats://`, `tls://`), each once.
pub fn targets(seen: &[TargetSeen]) -> Vec<SweepTarget> {
    let mut out: Vec<SweepTarget> = Vec::new();
    for r in seen.iter().filter_map(|t| t.resolved.as_ref().ok()) {
        let nats = r.url.starts_with("nats://") || r.url.starts_with("tls://");
        if nats && !out.iter().any(|t| t.url == r.url) {
            out.push(SweepTarget {
                url: r.url.clone(),
                auth: r.auth.clone(),
                tls: r.tls.clone(),
            });
        }
    }
    out
}

/// The sweep: one container per target, each `delete-streams` for this run's id.
pub fn job(
    br: &BenchmarkRun,
    id: &RunIdentity,
    targets: &[SweepTarget],
    operands: &OperandDefaults,
) -> Job {
    let labels = BTreeMap::from([
        (LABEL_NAME.into(), KIND_LABEL.into()),
        (LABEL_INSTANCE.into(), id.name.clone()),
        (LABEL_COMPONENT.into(), COMPONENT.into()),
        (LABEL_MANAGED_BY.into(), MANAGED_BY.into()),
        (LABEL_PART_OF.into(), "msgbench".into()),
        (LABEL_RUN_UID.into(), id.owner_ref.uid.clone()),
    ]);
    let tls = runner_tls((targets.iter()).filter_map(|t| Some((t.url.as_str(), t.tls.as_ref()?))));
    let image =
        (br.spec.runners.image.clone()).unwrap_or_else(|| operands.images.bench_runner.clone());
    let containers = (targets.iter().enumerate())
        .map(|(i, t)| {
            let files = tls.0.iter().find(|c| c.target == t.url);
            sweep_container(i, t, &id.owner_ref.uid, files)
        })
        .map(|mut c| {
            c.image = Some(image.clone());
            c.image_pull_policy = Some(operands.image_pull_policy.clone());
            c.volume_mounts = Some(tls.2.clone()).filter(|m| !m.is_empty());
            c
        })
        .collect();
    let mut template = PodTemplateSpec {
        metadata: Some(ObjectMeta {
            labels: Some(labels.clone()),
            ..ObjectMeta::default()
        }),
        spec: Some(PodSpec {
            restart_policy: Some("Never".into()),
            automount_service_account_token: Some(false),
            enable_service_links: Some(false),
            security_context: Some(runner_security_context()),
            containers,
            volumes: Some(tls.1).filter(|v| !v.is_empty()),
            ..PodSpec::default()
        }),
    };
    // The runners' pod additions (pull secrets, tolerations, ...), not their placement rules.
    let defaults = merged(&mesh_opt_out(), &operands.runner_pods);
    customize(&mut template, &merged(&defaults, &br.spec.runners.pod));
    Job {
        metadata: ObjectMeta {
            name: Some(job_name(&id.name)),
            namespace: Some(id.namespace.clone()),
            labels: Some(labels),
            ..ObjectMeta::default()
        },
        spec: Some(JobSpec {
            backoff_limit: Some(1),
            active_deadline_seconds: Some(DEADLINE_SECONDS),
            ttl_seconds_after_finished: Some(TTL_SECONDS),
            template,
            ..JobSpec::default()
        }),
        ..Job::default()
    }
}

fn sweep_container(i: usize, t: &SweepTarget, uid: &str, tls: Option<&TargetTls>) -> Container {
    let mut args: Vec<String> = ["delete-streams", "--url", &t.url, "--run", &run_id(uid)]
        .map(String::from)
        .into();
    if let Some(tls) = tls {
        for (flag, value) in [
            ("--ca-file", &tls.ca_file),
            ("--tls-cert-file", &tls.cert_file),
            ("--tls-key-file", &tls.key_file),
            ("--tls-server-name", &tls.server_name),
        ] {
            if let Some(v) = value {
                args.extend([flag.into(), v.clone()]);
            }
        }
    }
    // What `delete-streams` reads by default, as `run` does: MSGBENCH_TOKEN, ...
    let env = (t.auth.as_ref())
        .map(|a| a.env("MSGBENCH"))
        .filter(|e| !e.is_empty());
    let q = |s: &str| Quantity(s.into());
    Container {
        name: format!("streams-{i}"),
        args: Some(args),
        env,
        resources: Some(ResourceRequirements {
            requests: Some(BTreeMap::from([
                ("cpu".into(), q("10m")),
                ("memory".into(), q("16Mi")),
            ])),
            limits: Some(BTreeMap::from([("memory".into(), q("64Mi"))])),
            ..ResourceRequirements::default()
        }),
        security_context: Some(container_security_context()),
        termination_message_policy: Some("FallbackToLogsOnError".into()),
        ..Container::default()
    }
}

/// What to do about the run's streams this pass.
#[derive(Clone, Debug, PartialEq)]
pub enum StreamsStep {
    /// No finalizer, or runners still active (they delete their own streams on exit).
    Nothing,
    /// Create the sweep Job; the message says where it deletes what.
    Sweep(Box<Job>, String),
    /// The sweep is under way.
    Wait,
    /// A run being deleted still has runners: delete its runner Jobs (garbage collection
    /// would delete them only once the run is gone, which the finalizer holds up).
    StopRunners,
    /// Release the finalizer; `StreamsDeleted` is (status, reason, message).
    Release(bool, &'static str, String),
}

/// A run that has ended: sweep once no runner is active, then release. `runners_cleaned`:
/// every runner of the run's only generation exited 0, which a runner does only after deleting
/// the streams it made; then no sweep is needed (an earlier generation's runners were
/// deleted with their generation, so a later generation always sweeps).
pub fn after_finish(
    br: &BenchmarkRun,
    id: &RunIdentity,
    runners_active: bool,
    runners_cleaned: bool,
    targets_seen: &[TargetSeen],
    sweep: Option<&SweepSeen>,
    operands: &OperandDefaults,
) -> StreamsStep {
    if !holds_finalizer(br) || runners_active {
        return StreamsStep::Nothing;
    }
    if runners_cleaned && id.generation == 1 && sweep.is_none() {
        let why = "every runner exited normally, deleting the streams it made";
        return StreamsStep::Release(true, REASON_DELETED_BY_RUNNERS, why.into());
    }
    step(br, id, targets_seen, sweep, operands)
}

/// A run being deleted, `waited` since its deletion: once its runners are gone (garbage
/// collection deletes them; a runner still running could make the next trial's stream after
/// the sweep), sweep, then release; past [`DELETE_WAIT`] release whatever is left.
pub fn on_delete(
    br: &BenchmarkRun,
    id: &RunIdentity,
    waited: Duration,
    runners_active: bool,
    targets_seen: &[TargetSeen],
    sweep: Option<&SweepSeen>,
    operands: &OperandDefaults,
) -> StreamsStep {
    if !holds_finalizer(br) {
        return StreamsStep::Nothing;
    }
    let next = if runners_active {
        StreamsStep::StopRunners
    } else {
        step(br, id, targets_seen, sweep, operands)
    };
    match next {
        StreamsStep::Sweep(..) | StreamsStep::Wait | StreamsStep::StopRunners
            if waited >= DELETE_WAIT =>
        {
            let why = format!(
                "the sweep did not end within {} s of the run's deletion: streams of run id {} \
                 may remain",
                DELETE_WAIT.as_secs(),
                run_id(&id.owner_ref.uid)
            );
            StreamsStep::Release(false, REASON_NOT_DELETED, why)
        }
        s => s,
    }
}

fn step(
    br: &BenchmarkRun,
    id: &RunIdentity,
    targets_seen: &[TargetSeen],
    sweep: Option<&SweepSeen>,
    operands: &OperandDefaults,
) -> StreamsStep {
    match sweep {
        Some(SweepSeen::Running) => StreamsStep::Wait,
        Some(SweepSeen::Ended { deleted, message }) => {
            let reason = if *deleted {
                REASON_DELETED
            } else {
                REASON_NOT_DELETED
            };
            StreamsStep::Release(*deleted, reason, message.clone())
        }
        None => {
            let to_sweep = targets(targets_seen);
            if to_sweep.is_empty() {
                let why: Vec<&str> = (targets_seen.iter())
                    .filter_map(|t| t.resolved.as_ref().err().map(String::as_str))
                    .collect();
                let msg = format!(
                    "no JetStream target to delete streams of run id {} from{}",
                    run_id(&id.owner_ref.uid),
                    if why.is_empty() {
                        String::new()
                    } else {
                        format!(": {}", why.join("; "))
                    }
                );
                return StreamsStep::Release(false, REASON_NO_TARGET, msg);
            }
            let urls: Vec<&str> = to_sweep.iter().map(|t| t.url.as_str()).collect();
            let msg = format!(
                "deleting the streams of run id {} on {}",
                run_id(&id.owner_ref.uid),
                urls.join(", ")
            );
            StreamsStep::Sweep(Box::new(job(br, id, &to_sweep, operands)), msg)
        }
    }
}

#[cfg(test)]
mod tests;
