//! Reading the runner pods: who is ready, who failed and why, and — when every runner is
//! done — turning their gathered records into the verdict.
use super::build::RunIdentity;
use super::conditions as cond;
use super::gather::{gather, DoneRunner, Gathered};
use super::reconcile::now;
use super::{compare, results};
use crate::context::Context;
use crate::error::{Error, Result};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;
use kube::{Api, ResourceExt};
use msgbench_crds::benchmark_run::{
    BenchmarkRun, BenchmarkRunStatus, ObservedEnvironment, ObservedPod, Outcome, Phase, Severity,
    Verdict,
};
use runner_api::agent::ResultLine;
use std::collections::BTreeSet;

/// The runner pods of one generation, sorted by state.
pub struct RunnerView<'a> {
    pub ready: Vec<&'a Pod>,
    pub running: Vec<&'a Pod>,
    pub succeeded: Vec<&'a Pod>,
    pub failed: Vec<&'a Pod>,
    pub job_failure: Option<(String, String)>,
}

fn phase(p: &Pod) -> &str {
    p.status
        .as_ref()
        .and_then(|s| s.phase.as_deref())
        .unwrap_or("")
}

fn is_ready(p: &Pod) -> bool {
    p.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

pub fn ip(p: &Pod) -> Option<String> {
    p.status.as_ref()?.pod_ip.clone()
}

pub fn job_complete(j: &Job) -> bool {
    j.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| {
            cs.iter()
                .any(|c| c.type_ == "Complete" && c.status == "True")
        })
}

impl<'a> RunnerView<'a> {
    pub fn of(pods: &'a [Pod], job: Option<&Job>) -> Self {
        let live = pods
            .iter()
            .filter(|p| p.metadata.deletion_timestamp.is_none());
        let mut v = RunnerView {
            ready: Vec::new(),
            running: Vec::new(),
            succeeded: Vec::new(),
            failed: Vec::new(),
            job_failure: None,
        };
        for p in live {
            match phase(p) {
                "Succeeded" => v.succeeded.push(p),
                "Failed" => v.failed.push(p),
                "Running" => {
                    v.running.push(p);
                    if is_ready(p) {
                        v.ready.push(p);
                    }
                }
                _ => {}
            }
        }
        // A deleted runner pod shows up as a terminating pod: that is a runner failure too.
        if let Some(p) = pods
            .iter()
            .find(|p| p.metadata.deletion_timestamp.is_some())
        {
            v.job_failure = Some((
                "RunnerFailed".into(),
                format!("runner pod {} was deleted", p.name_any()),
            ));
        }
        if let Some(c) = job
            .and_then(|j| j.status.as_ref())
            .and_then(|s| s.conditions.as_ref())
            .and_then(|cs| {
                cs.iter()
                    // FailureTarget comes first (Kubernetes ≥ 1.31), before the pods go.
                    .find(|c| {
                        (c.type_ == "Failed" || c.type_ == "FailureTarget") && c.status == "True"
                    })
            })
        {
            let reason = match c.reason.as_deref() {
                Some("DeadlineExceeded") => "DeadlineExceeded",
                _ => "RunnerFailed",
            };
            v.job_failure = Some((
                reason.into(),
                format!(
                    "runner Job failed: {}",
                    c.message.clone().unwrap_or_default()
                ),
            ));
        }
        v
    }

    pub fn ready_ips(&self) -> Vec<String> {
        self.ready.iter().filter_map(|p| ip(p)).collect()
    }

    /// (reason, message) when a runner failed; the runner's own reason (TargetUnreachable,
    /// BarrierTimeout) when it gave one, else a generic failure.
    pub fn failure(&self) -> Option<(&'static str, String)> {
        if let Some(p) = self.failed.first() {
            let (reason, msg) = termination_message(p);
            return Some((reason, format!("runner pod {}: {msg}", p.name_any())));
        }
        self.job_failure.as_ref().map(|(r, m)| {
            let r: &'static str = if r == "DeadlineExceeded" {
                "DeadlineExceeded"
            } else {
                "RunnerFailed"
            };
            (r, m.clone())
        })
    }
}

fn termination_message(p: &Pod) -> (&'static str, String) {
    let st = p.status.as_ref();
    let term = st
        .and_then(|s| s.container_statuses.as_ref())
        .and_then(|cs| cs.first())
        .and_then(|c| c.state.as_ref())
        .and_then(|s| s.terminated.as_ref());
    match term {
        Some(t) => super::runner_failure::classify(
            t.exit_code,
            t.reason.as_deref().unwrap_or_default(),
            t.message.as_deref().unwrap_or_default(),
        ),
        None => {
            let why = st
                .and_then(|s| s.reason.clone().or(s.message.clone()))
                .unwrap_or_else(|| "failed".into());
            let reason = if why.contains("DeadlineExceeded") {
                "DeadlineExceeded"
            } else {
                "RunnerFailed"
            };
            (reason, why)
        }
    }
}

/// Ends the run as Failed with `reason`.
pub fn fail(st: &mut BenchmarkRunStatus, reason: &str, message: &str, g: Option<i64>) {
    end(st, Outcome::Failed, reason, message, g);
}

/// Ends the run as Passed.
pub fn pass(st: &mut BenchmarkRunStatus, message: &str, g: Option<i64>) {
    end(st, Outcome::Passed, "Succeeded", message, g);
}

/// Phase, completion time, verdict and the terminal conditions (see `conditions`).
fn end(st: &mut BenchmarkRunStatus, outcome: Outcome, reason: &str, message: &str, g: Option<i64>) {
    let t = now();
    let message = crate::status_text::plain(message);
    st.phase = Some(match outcome {
        Outcome::Passed => Phase::Succeeded,
        Outcome::Failed => Phase::Failed,
    });
    st.completion_time = Some(t.clone());
    st.verdict = Some(Verdict {
        outcome,
        reason: reason.into(),
        message: Some(message.clone()),
    });
    cond::finish(&mut st.conditions, outcome, reason, &message, g, &t);
}

/// Gathers every runner's records (control endpoint, else log frames), merges, evaluates
/// thresholds, compares with the baseline and records the environment. Pods are only read,
/// never deleted here (TTL does that). Leaves the status as it was when a holding runner did
/// not answer yet.
pub async fn collect(
    ctx: &Context,
    br: &BenchmarkRun,
    id: &RunIdentity,
    st: &mut BenchmarkRunStatus,
    done: &[DoneRunner<'_>],
    pods: &Api<Pod>,
    token: &str,
) -> Result<()> {
    let g = Some(id.generation);
    let trials = super::reconcile::total_trials(br) as u32;
    let lines = match gather(pods, done, token, trials).await? {
        Gathered::Complete(lines) => lines,
        Gathered::NotYet(why) => {
            tracing::debug!(run = %id.name, %why, "results not gathered yet");
            return Ok(());
        }
        Gathered::Lost(why) => {
            fail(st, "ResultsLost", &why, g);
            return Ok(());
        }
    };
    st.phase = Some(Phase::Merging);
    let count = br.spec.runners.count.max(1) as usize;
    if br.spec.variants.is_empty() {
        if !single(ctx, br, id, st, &lines, count).await? {
            return Ok(());
        }
    } else {
        let shown = |name: &str| super::variants::target_display(&br.spec, name);
        if let Err(e) = super::variant_results::apply(br, st, &lines, count, shown) {
            fail(st, "ResultsLost", &format!("{e:#}"), g);
            return Ok(());
        }
    }
    st.environment = Some(environment(ctx, br, id, st.environment.take(), done).await?);
    if let Some(p) = &mut st.progress {
        p.trial = p.trials;
    }
    let broken: Vec<String> = st
        .thresholds
        .iter()
        .filter(|t| !t.passed && t.severity == Severity::Fail)
        .map(|t| {
            format!(
                "{}{:?} {:?} {} (observed {})",
                t.variant
                    .as_ref()
                    .map_or(String::new(), |v| format!("{v}: ")),
                t.metric,
                t.op,
                t.value,
                t.observed.map_or("none".into(), |o| o.to_string())
            )
        })
        .collect();
    if !broken.is_empty() {
        fail(st, "ThresholdsNotMet", &broken.join("; "), g);
        return Ok(());
    }
    let msg = match (
        &st.result,
        st.headline.as_ref().and_then(|h| h.comparison.clone()),
    ) {
        (_, Some(c)) => format!(
            "{} variants x {} rounds: {c}",
            st.variants.len(),
            st.schedule.len()
        ),
        (Some(r), None) => format!(
            "{} received at {:.1} msg/s, delivered {:.4}, p99 {}",
            r.received,
            r.receive_rate,
            r.delivered_ratio,
            st.headline.as_ref().map_or("-".into(), |h| h.p99.clone())
        ),
        (None, None) => return Err(Error::Build("no result".into())),
    };
    pass(st, &msg, g);
    Ok(())
}

/// A run without variants: merge, thresholds, baseline comparison. False when it failed.
async fn single(
    ctx: &Context,
    br: &BenchmarkRun,
    id: &RunIdentity,
    st: &mut BenchmarkRunStatus,
    lines: &[ResultLine],
    count: usize,
) -> Result<bool> {
    let g = Some(id.generation);
    let collected = match results::collect(lines, count, br.spec.trials.max(1) as usize) {
        Ok(c) => c,
        Err(e) => {
            fail(st, "ResultsLost", &format!("{e:#}"), g);
            return Ok(false);
        }
    };
    st.thresholds = results::evaluate(&collected.result, &br.spec.thresholds);
    st.comparison = match &br.spec.baseline_ref {
        Some(b) => Some(compare::against(ctx, &id.namespace, &b.name, &collected.trials).await?),
        None => None,
    };
    st.result = Some(collected.result);
    st.trials = collected.trials;
    st.statistics = collected.statistics;
    st.headline = Some(collected.headline);
    Ok(true)
}

fn observed(p: &Pod) -> ObservedPod {
    let s = p.status.as_ref();
    ObservedPod {
        name: p.name_any(),
        node: p.spec.as_ref().and_then(|s| s.node_name.clone()),
        qos_class: s.and_then(|s| s.qos_class.clone()),
        cpus: None,
        image: p
            .spec
            .as_ref()
            .and_then(|s| s.containers.first())
            .and_then(|c| c.image.clone()),
    }
}

async fn environment(
    ctx: &Context,
    br: &BenchmarkRun,
    id: &RunIdentity,
    prior: Option<ObservedEnvironment>,
    done: &[DoneRunner<'_>],
) -> Result<ObservedEnvironment> {
    let mut env = prior.unwrap_or_default();
    env.runner_pods = done.iter().take(64).map(|d| observed(d.pod)).collect();
    // The run's server and every variant's own.
    env.server_pods.clear();
    for r in std::iter::once(&br.spec.target)
        .chain(br.spec.variants.iter().filter_map(|v| v.target.as_ref()))
        .filter_map(|t| t.server_ref.as_ref())
    {
        if env.server_pods.len() >= 16 {
            break;
        }
        let sel = super::build::server_selector(r.kind, &r.name)
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join(",");
        let pods: Api<Pod> = Api::namespaced(ctx.client.clone(), &id.namespace);
        let list = pods
            .list(&kube::api::ListParams::default().labels(&sel))
            .await?;
        for p in list.items.iter().take(16 - env.server_pods.len()) {
            if !env.server_pods.iter().any(|x| x.name == p.name_any()) {
                env.server_pods.push(observed(p));
            }
        }
    }
    let server_nodes: BTreeSet<_> = env
        .server_pods
        .iter()
        .filter_map(|p| p.node.clone())
        .collect();
    env.shared_nodes = env
        .runner_pods
        .iter()
        .filter_map(|p| p.node.as_ref())
        .any(|n| server_nodes.contains(n));
    Ok(env)
}
