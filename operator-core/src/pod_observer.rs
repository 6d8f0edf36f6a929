//! What the server pods say: readiness, QoS class, sysctls, and kubelet refusals.

use k8s_openapi::api::core::v1::{ContainerStatus, Pod, PodStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use msgbench_crds::common::RunningImage;

/// Pod-level failures where the kubelet rejected the pod at admission. Workload controllers
/// replace such pods immediately, so they would storm: the operator scales to 0 instead.
pub const REJECTION_REASONS: &[&str] = &[
    "SysctlForbidden",
    "UnexpectedAdmissionError",
    "TopologyAffinityError",
    "OutOfcpu",
    "OutOfmemory",
    "NodeAffinity",
    "NodeSelectorMismatching",
];

/// Refusals a change in the cluster lifts without a spec change (CPU or memory freed, a node
/// relabelled, a device plugin back): retried after a pause instead of held until the spec
/// changes. The rest (a sysctl the kubelet does not allow, a topology it cannot meet) stay.
pub const TRANSIENT_REJECTIONS: &[&str] = &[
    "OutOfcpu",
    "OutOfmemory",
    "UnexpectedAdmissionError",
    "NodeAffinity",
];

pub fn is_transient_rejection(reason: &str) -> bool {
    TRANSIENT_REJECTIONS.contains(&reason)
}

/// A pod's node stopped reporting (see `node_loss`).
pub const NODE_NOT_READY: &str = "NodeNotReady";

/// Container waiting reasons that will not fix themselves (the kubelet backs off by itself).
const STUCK_WAITING_REASONS: &[&str] = &[
    "ErrImagePull",
    "ImagePullBackOff",
    "InvalidImageName",
    "CreateContainerConfigError",
    "CreateContainerError",
    "CrashLoopBackOff",
    "RunContainerError",
];

/// The kubelet's words for a Secret or key a container references and cannot find, as the
/// operator's own reasons (it does not read Secrets, so this is where it learns of them).
fn secret_reason<'a>(reason: &'a str, message: &str) -> &'a str {
    if reason != "CreateContainerConfigError" {
        return reason;
    }
    if message.starts_with("secret \"") && message.ends_with("not found") {
        "SecretNotFound"
    } else if message.starts_with("couldn't find key ") && message.contains(" in Secret ") {
        "SecretKeyMissing"
    } else {
        reason
    }
}

#[derive(Clone, Debug, Default, PartialEq)]
pub struct PodObservation {
    pub pods: i32,
    pub ready: i32,
    /// QoS class of the pods; `Mixed` when they disagree.
    pub qos_class: Option<String>,
    /// IP of one ready pod, for server self-reports (nats `/varz`).
    pub ready_pod_ip: Option<String>,
    pub problem: Option<PodProblem>,
    /// The image each live pod's server container runs (and its digest once pulled).
    pub images: Vec<RunningImage>,
}

#[derive(Clone, Debug, PartialEq)]
pub struct PodProblem {
    pub reason: String,
    pub message: String,
    /// The kubelet refused the pod: retrying unchanged would only create more pods.
    pub rejected: bool,
    /// When the refused pod was created (a transient refusal is retried a pause after it).
    pub refused_at: Option<Time>,
}

/// `template_hash`: the current pod template's hash; failed pods of another template are stale
/// (left behind by an old ReplicaSet) and ignored. `None` considers every pod.
pub fn observe_pods(pods: &[Pod], template_hash: Option<&str>) -> PodObservation {
    let mut obs = PodObservation::default();
    let alive = |p: &&Pod| p.metadata.deletion_timestamp.is_none();
    // A transient refusal followed by a pod the kubelet took (or has yet to judge) is history.
    let newest_live = (pods.iter().filter(alive))
        .filter(|p| !failed(p))
        .filter_map(|p| p.metadata.creation_timestamp.clone())
        .max_by_key(|t| t.0);
    for pod in pods.iter().filter(alive) {
        let pod_hash = (pod.metadata.annotations.as_ref())
            .and_then(|a| a.get(crate::meta::ANNOTATION_TEMPLATE_HASH))
            .map(String::as_str);
        if failed(pod) && template_hash.is_some() && pod_hash != template_hash {
            continue;
        }
        if failed(pod) {
            if let Some(p) = failed_pod_problem(pod, newest_live.as_ref()) {
                set_problem(&mut obs, p);
            }
            continue;
        }
        observe_live_pod(&mut obs, pod);
    }
    obs
}

fn failed(pod: &Pod) -> bool {
    pod.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Failed")
}

fn pod_name(pod: &Pod) -> String {
    pod.metadata.name.clone().unwrap_or_default()
}

/// Why a pod failed; `None` for a transient refusal a newer live pod has superseded.
fn failed_pod_problem(pod: &Pod, newest_live: Option<&Time>) -> Option<PodProblem> {
    let status = pod.status.as_ref()?;
    let reason = status.reason.clone().unwrap_or_else(|| "PodFailed".into());
    let rejected = REJECTION_REASONS.contains(&reason.as_str());
    let created = pod.metadata.creation_timestamp.clone();
    let superseded = match (&created, newest_live) {
        (Some(c), Some(live)) => c.0 <= live.0,
        _ => false,
    };
    if is_transient_rejection(&reason) && superseded {
        return None;
    }
    let said = status.message.as_deref().unwrap_or(&reason);
    let message = format!("pod {}: {said}", pod_name(pod));
    Some(PodProblem {
        reason,
        message,
        rejected,
        refused_at: created.filter(|_| rejected),
    })
}

/// Counts a pod that has not failed, and what keeps it from running: unschedulable, on a
/// silent node, or a container stuck waiting.
fn observe_live_pod(obs: &mut PodObservation, pod: &Pod) {
    obs.pods += 1;
    let Some(status) = &pod.status else {
        return;
    };
    obs.images.extend(running_image(pod));
    if let Some(q) = &status.qos_class {
        obs.qos_class = match obs.qos_class.take() {
            None => Some(q.clone()),
            Some(prev) if &prev == q => Some(prev),
            Some(_) => Some("Mixed".into()),
        };
    }
    let conditions = status.conditions.as_deref().unwrap_or_default();
    let ready = (conditions.iter()).any(|c| c.type_ == "Ready" && c.status == "True");
    if ready {
        obs.ready += 1;
        if obs.ready_pod_ip.is_none() {
            obs.ready_pod_ip = status.pod_ip.clone();
        }
    }
    let name = pod_name(pod);
    let unscheduled = (conditions.iter())
        .find(|c| c.type_ == "PodScheduled" && c.status == "False" && c.reason.is_some())
        .map(|c| {
            let message = format!("pod {name}: {}", c.message.as_deref().unwrap_or_default());
            degraded(c.reason.clone().unwrap_or_default(), message)
        });
    // On a node that went silent: Degraded, naming the node, until it reports again.
    let node_lost = crate::node_loss::node_lost(pod)
        .map(|loss| degraded(NODE_NOT_READY.into(), loss.describe()));
    for p in (unscheduled.into_iter())
        .chain(node_lost)
        .chain(stuck_containers(status, &name))
    {
        set_problem(obs, p);
    }
}

/// Containers (init containers first) waiting for a reason that will not fix itself.
fn stuck_containers<'a>(
    status: &'a PodStatus,
    name: &'a str,
) -> impl Iterator<Item = PodProblem> + 'a {
    let containers = (status.init_container_statuses.iter().flatten())
        .chain(status.container_statuses.iter().flatten());
    containers.filter_map(move |cs| {
        let waiting = cs.state.as_ref()?.waiting.as_ref()?;
        let reason = waiting.reason.as_deref()?;
        if !STUCK_WAITING_REASONS.contains(&reason) {
            return None;
        }
        let said = waiting.message.as_deref().unwrap_or(reason);
        let mut message = format!("pod {name} container {}: {said}", cs.name);
        if reason == "CrashLoopBackOff" {
            message.push_str(&last_exit(cs));
        }
        Some(degraded(secret_reason(reason, said).into(), message))
    })
}

/// `; last exit N: <termination message>` of a crash-looping container, when it left one: the
/// runtime's words for a container that could not start (exit 128), or msgbench-lazyfs's for a
/// store it could not mount (exit 125, e.g. a node without /dev/fuse). No server writes one, and
/// the termination message policy is the default (the file), so this quotes no server log.
fn last_exit(cs: &ContainerStatus) -> String {
    let Some(t) = cs.last_state.as_ref().and_then(|s| s.terminated.as_ref()) else {
        return String::new();
    };
    match t.message.as_deref().map(str::trim) {
        Some(m) if !m.is_empty() => format!("; last exit {}: {m}", t.exit_code),
        _ => String::new(),
    }
}

/// A problem that degrades the server without a kubelet refusal.
fn degraded(reason: String, message: String) -> PodProblem {
    PodProblem {
        reason,
        message,
        rejected: false,
        refused_at: None,
    }
}

/// The first container's image as specified, and the digest the kubelet reports for it.
pub fn running_image(pod: &Pod) -> Option<RunningImage> {
    let container = pod.spec.as_ref()?.containers.first()?;
    let image_id = pod
        .status
        .as_ref()
        .and_then(|s| s.container_statuses.as_ref())
        .and_then(|cs| cs.iter().find(|c| c.name == container.name))
        .map(|c| c.image_id.clone())
        .filter(|id| !id.is_empty());
    Some(RunningImage {
        pod: pod.metadata.name.clone().unwrap_or_default(),
        image: container.image.clone()?,
        image_id,
    })
}

/// Keep the most severe problem: a rejection wins over anything else, the newest rejection
/// over older ones.
fn set_problem(obs: &mut PodObservation, p: PodProblem) {
    let rank = |p: &PodProblem| (p.rejected, p.refused_at.as_ref().map(|t| t.0));
    if obs.problem.as_ref().is_none_or(|e| rank(&p) > rank(e)) {
        obs.problem = Some(p);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod(v: serde_json::Value) -> Pod {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn kubelet_rejection_of_the_current_template_is_a_rejection() {
        let failed = pod(
            json!({"metadata": {"name": "p", "annotations": {"msgbench.dev/template-hash": "h1"}},
            "status": {"phase": "Failed", "reason": "SysctlForbidden", "message": "forbidden sysctl"}}),
        );
        let obs = observe_pods(std::slice::from_ref(&failed), Some("h1"));
        let p = obs.problem.unwrap();
        assert!(p.rejected);
        assert_eq!(p.reason, "SysctlForbidden");
        assert_eq!(obs.pods, 0, "failed pods are not counted as replicas");
        assert!(
            observe_pods(&[failed], Some("h2")).problem.is_none(),
            "stale template"
        );
    }

    #[test]
    fn a_transient_refusal_followed_by_a_newer_pod_is_history() {
        let refused = |name: &str, created: &str| {
            pod(
                json!({"metadata": {"name": name, "creationTimestamp": created},
                "status": {"phase": "Failed", "reason": "OutOfcpu", "message": "no cpu"}}),
            )
        };
        let pending = pod(
            json!({"metadata": {"name": "p3", "creationTimestamp": "2026-11-24T00:01:00Z"},
            "status": {"phase": "Pending"}}),
        );
        let old = refused("p1", "2026-11-24T00:00:00Z");
        let newer = refused("p2", "2026-11-24T00:00:30Z");
        // Two refusals: the newest times the retry.
        let obs = observe_pods(&[old.clone(), newer.clone()], None);
        let p = obs.problem.unwrap();
        assert!(p.rejected);
        assert_eq!(p.message, "pod p2: no cpu");
        // A pod after them (being scheduled or running) makes them history.
        assert_eq!(observe_pods(&[old, newer, pending], None).problem, None);
        // A permanent refusal is not history because a later pod exists.
        let forbidden = pod(
            json!({"metadata": {"name": "f", "creationTimestamp": "2026-11-24T00:00:00Z"},
            "status": {"phase": "Failed", "reason": "SysctlForbidden", "message": "no"}}),
        );
        let later = pod(
            json!({"metadata": {"name": "g", "creationTimestamp": "2026-11-24T00:01:00Z"},
            "status": {"phase": "Pending"}}),
        );
        assert!(observe_pods(&[forbidden, later], None).problem.is_some());
    }

    #[test]
    fn a_replica_on_a_silent_node_is_a_problem_naming_the_node_until_it_reports() {
        let on_node = |ready: &str| {
            pod(json!({"metadata": {"name": "js3-2"},
                "spec": {"nodeName": "msgbench-local-2", "containers": [{"name": "nats"}]},
                "status": {"phase": "Running",
                    "conditions": [{"type": "Ready", "status": ready}],
                    "containerStatuses": [{"name": "nats", "ready": true, "restartCount": 0,
                        "image": "i", "imageID": "", "state": {"running": {}}}]}}))
        };
        let obs = observe_pods(&[on_node("False")], None);
        let p = obs.problem.unwrap();
        assert_eq!((p.reason.as_str(), p.rejected), (NODE_NOT_READY, false));
        assert!(
            p.message.contains("js3-2 on node msgbench-local-2"),
            "{}",
            p.message
        );
        assert_eq!((obs.pods, obs.ready), (1, 0));
        let back = observe_pods(&[on_node("True")], None);
        assert_eq!((back.problem, back.ready), (None, 1));
    }

    /// A crash loop quotes the last exit's termination message when the container left one
    /// (msgbench-lazyfs on a node without /dev/fuse), and only then.
    #[test]
    fn a_crash_loop_quotes_the_last_termination_message() {
        let looping = |last: serde_json::Value| {
            pod(
                json!({"metadata": {"name": "js-0"}, "status": {"phase": "Running",
                "containerStatuses": [{"name": "nats", "image": "x", "imageID": "", "ready": false,
                    "restartCount": 3, "lastState": {"terminated": last},
                    "state": {"waiting": {"reason": "CrashLoopBackOff",
                        "message": "back-off 40s restarting failed container"}}}]}}),
            )
        };
        let said = "msgbench-lazyfs: opening /dev/fuse: No such file or directory (os error 2)\n";
        let p = observe_pods(&[looping(json!({"exitCode": 125, "message": said}))], None);
        let p = p.problem.unwrap();
        assert_eq!(p.reason, "CrashLoopBackOff");
        assert_eq!(
            p.message,
            "pod js-0 container nats: back-off 40s restarting failed container; last exit 125: \
             msgbench-lazyfs: opening /dev/fuse: No such file or directory (os error 2)"
        );
        let silent = observe_pods(&[looping(json!({"exitCode": 1}))], None);
        assert!(silent
            .problem
            .unwrap()
            .message
            .ends_with("failed container"));
    }

    /// The kubelet's refusal for a missing Secret or key becomes the operator's reason, with
    /// its words (which name the Secret and key) kept in the message.
    #[test]
    fn a_missing_secret_or_key_is_named_by_reason() {
        let refused = |message: &str| {
            pod(
                json!({"metadata": {"name": "js-0"}, "status": {"phase": "Pending",
                "containerStatuses": [{"name": "nats", "image": "x", "imageID": "", "ready": false,
                    "restartCount": 0, "state": {"waiting": {"reason": "CreateContainerConfigError",
                    "message": message}}}]}}),
            )
        };
        let cases = [
            ("secret \"js-tls\" not found", "SecretNotFound"),
            (
                "couldn't find key ca.crt in Secret bench/js-tls",
                "SecretKeyMissing",
            ),
            ("configmap \"c\" not found", "CreateContainerConfigError"),
        ];
        for (message, reason) in cases {
            let p = observe_pods(&[refused(message)], None).problem.unwrap();
            assert_eq!(p.reason, reason, "{message}");
            assert_eq!(p.message, format!("pod js-0 container nats: {message}"));
        }
    }

    #[test]
    fn image_pull_backoff_is_a_problem_but_not_a_rejection() {
        let waiting = pod(
            json!({"metadata": {"name": "p"}, "status": {"phase": "Pending", "qosClass": "Burstable",
            "containerStatuses": [{"name": "nats", "image": "x", "imageID": "", "ready": false, "restartCount": 0,
                "state": {"waiting": {"reason": "ImagePullBackOff", "message": "back-off pulling x"}}}]}}),
        );
        let ready = pod(
            json!({"metadata": {"name": "q"}, "status": {"phase": "Running", "qosClass": "Guaranteed",
            "podIP": "10.0.0.7", "conditions": [{"type": "Ready", "status": "True"}]}}),
        );
        let obs = observe_pods(&[waiting, ready], None);
        let p = obs.problem.unwrap();
        assert!(!p.rejected);
        assert_eq!(p.reason, "ImagePullBackOff");
        assert!(p.message.contains("container nats"));
        assert_eq!((obs.pods, obs.ready), (2, 1));
        assert_eq!(obs.qos_class.as_deref(), Some("Mixed"));
        assert_eq!(obs.ready_pod_ip.as_deref(), Some("10.0.0.7"));
    }
}
