//! The runner pods of one generation, sorted by state: who is ready, running, done, and who
//! failed and why (the runner's own termination message when it left one). Pure.
use crate::node_loss::{node_lost, NodeLoss};
use crate::run::runners::runner_failure::KUBE_DEADLINE_EXCEEDED;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use kube::ResourceExt;
use msgbench_crds::benchmark_run::{ObservedPod, RunFailureReason};

/// The runner pods of one generation, sorted by state.
pub struct RunnerView<'a> {
    pub ready: Vec<&'a Pod>,
    pub running: Vec<&'a Pod>,
    pub succeeded: Vec<&'a Pod>,
    pub failed: Vec<&'a Pod>,
    /// The Job's own failure: (run reason, message).
    pub job_failure: Option<(RunFailureReason, String)>,
    /// A running runner whose node stopped reporting: its results can never come.
    pub node_lost: Option<NodeLoss>,
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

/// The pods the run's current Job controls, by uid. A pod that only carries the run's labels
/// (a runner of an earlier run of the same name still terminating, or anything labelled to
/// look like one) is not this run's runner: it must not fail the run, nor be sent its token.
pub fn owned_by_job(pods: Vec<Pod>, job: Option<&Job>) -> Vec<Pod> {
    let Some(uid) = job.and_then(|j| j.metadata.uid.as_deref()) else {
        return Vec::new();
    };
    pods.into_iter()
        .filter(|p| controller_uid(&p.metadata) == Some(uid))
        .collect()
}

/// The uid of what controls this object (its controller ownerReference).
pub fn controller_uid(meta: &ObjectMeta) -> Option<&str> {
    meta.owner_references
        .iter()
        .flatten()
        .find(|o| o.controller == Some(true))
        .map(|o| o.uid.as_str())
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
            node_lost: None,
        };
        for p in live {
            match phase(p) {
                "Succeeded" => v.succeeded.push(p),
                "Failed" => v.failed.push(p),
                "Running" => {
                    if v.node_lost.is_none() {
                        v.node_lost = node_lost(p);
                    }
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
                RunFailureReason::RunnerFailed,
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
                Some(KUBE_DEADLINE_EXCEEDED) => RunFailureReason::DeadlineExceeded,
                _ => RunFailureReason::RunnerFailed,
            };
            v.job_failure = Some((
                reason,
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
    pub fn failure(&self) -> Option<(RunFailureReason, String)> {
        if let Some(p) = self.failed.first() {
            let (reason, msg) = termination_message(p);
            return Some((reason, format!("runner pod {}: {msg}", p.name_any())));
        }
        if let Some(loss) = &self.node_lost {
            let msg = format!(
                "runner {}; its runner cannot finish (no retry: a new runner would start \
                 apart from the others)",
                loss.describe()
            );
            return Some((RunFailureReason::RunnerNodeLost, msg));
        }
        self.job_failure.clone()
    }
}

fn termination_message(p: &Pod) -> (RunFailureReason, String) {
    let st = p.status.as_ref();
    let term = st
        .and_then(|s| s.container_statuses.as_ref())
        .and_then(|cs| cs.first())
        .and_then(|c| c.state.as_ref())
        .and_then(|s| s.terminated.as_ref());
    match term {
        Some(t) => crate::run::runners::runner_failure::classify(
            t.exit_code,
            t.reason.as_deref().unwrap_or_default(),
            t.message.as_deref().unwrap_or_default(),
        ),
        None => {
            let why = st
                .and_then(|s| s.reason.clone().or(s.message.clone()))
                .unwrap_or_else(|| "failed".into());
            let reason = if why.contains(KUBE_DEADLINE_EXCEEDED) {
                RunFailureReason::DeadlineExceeded
            } else {
                RunFailureReason::RunnerFailed
            };
            (reason, why)
        }
    }
}

/// The first runner pod the scheduler could not place: (pod, the scheduler's message).
pub fn unschedulable(pods: &[Pod]) -> Option<(String, String)> {
    pods.iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .find_map(|p| {
            let c = p
                .status
                .as_ref()?
                .conditions
                .as_ref()?
                .iter()
                .find(|c| c.type_ == "PodScheduled" && c.status == "False")?;
            let why = c.message.clone().or(c.reason.clone()).unwrap_or_default();
            Some((p.name_any(), why))
        })
}

/// Container waiting reasons of an image that cannot be pulled.
const PULL_FAILURES: &[&str] = &[
    "ErrImagePull",
    "ImagePullBackOff",
    "InvalidImageName",
    "ErrImageNeverPull",
];
/// Pull failures that no retry can mend: the reference itself is wrong, or pulls are off.
const PERMANENT_PULL_FAILURES: &[&str] = &["InvalidImageName", "ErrImageNeverPull"];

/// A runner pod whose image the kubelet cannot pull.
#[derive(Clone, Debug, PartialEq)]
pub struct PullFailure {
    pub pod: String,
    pub image: String,
    /// The kubelet's reason (ErrImagePull, ImagePullBackOff, ...) and message.
    pub reason: String,
    pub message: String,
    /// No retry can mend it (an invalid reference, pull policy Never).
    pub permanent: bool,
    pub pod_created: Option<Time>,
}

/// The first runner pod waiting on an image pull that failed.
pub fn image_pull_failure(pods: &[Pod]) -> Option<PullFailure> {
    pods.iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .find_map(|p| {
            let cs = p.status.as_ref()?.container_statuses.as_ref()?;
            cs.iter().find_map(|c| {
                let waiting = c.state.as_ref()?.waiting.as_ref()?;
                let reason = waiting.reason.as_deref()?;
                PULL_FAILURES.contains(&reason).then(|| PullFailure {
                    pod: p.name_any(),
                    image: c.image.clone(),
                    reason: reason.into(),
                    message: waiting.message.clone().unwrap_or_default(),
                    permanent: PERMANENT_PULL_FAILURES.contains(&reason),
                    pod_created: p.metadata.creation_timestamp.clone(),
                })
            })
        })
}

/// How a pod is reported in the environment.
pub fn observed_pod(p: &Pod) -> ObservedPod {
    let s = p.status.as_ref();
    let running = crate::pod_observer::running_image(p);
    ObservedPod {
        name: p.name_any(),
        node: p.spec.as_ref().and_then(|s| s.node_name.clone()),
        qos_class: s.and_then(|s| s.qos_class.clone()),
        cpus: None,
        image: running.as_ref().map(|r| r.image.clone()),
        image_id: running.and_then(|r| r.image_id),
        ..ObservedPod::default()
    }
}
