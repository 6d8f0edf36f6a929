//! Server pods that restarted during a run without a fault asking for it. A server OOM-killed
//! under load, or evicted and replaced, puts an outage into the figures that nobody planned;
//! the status says so (`environment.serverRestarts`) instead of leaving a dip unexplained.
//! Pure: the pods are read at the start (when the common start is chosen) and with the results.
use k8s_openapi::api::core::v1::{ContainerStatus, Pod};
use kube::ResourceExt;
use msgbench_crds::benchmark_run::{FaultAction, FaultRecord, ObservedPod, ServerRestart};

/// The kubelet's reason for a container killed at its memory limit.
const OOM_KILLED: &str = "OOMKilled";
/// Longest termination reason kept (characters).
pub const MAX_REASON: usize = 64;

/// A server pod as observed, with what restarts are judged by: its uid, the server container's
/// restart count and last termination. The server is the pod's first container (a fault agent
/// is added after it).
pub fn observed_server_pod(p: &Pod) -> ObservedPod {
    let mut o = crate::run::runners::runner_pods::observed_pod(p);
    o.uid = p.uid();
    if let Some(c) = server_container(p) {
        o.restarts = (c.restart_count > 0).then_some(c.restart_count);
        o.last_termination = last_termination(c);
    }
    o
}

/// Whether a pod carrying a server's labels is a workload controller's (a StatefulSet's, or a
/// Deployment's ReplicaSet's) rather than one made by hand or by something else: labels alone
/// can be anyone's, and a lookalike's comings and goings are not the server's.
pub fn is_workload_pod(p: &Pod) -> bool {
    p.owner_references()
        .iter()
        .find(|r| r.controller == Some(true))
        .is_some_and(|r| {
            r.api_version == "apps/v1" && matches!(r.kind.as_str(), "StatefulSet" | "ReplicaSet")
        })
}

/// The status of the pod's server container (its first: a fault agent is added after it).
pub fn server_container(p: &Pod) -> Option<&ContainerStatus> {
    let name = &p.spec.as_ref()?.containers.first()?.name;
    let all = p.status.as_ref()?.container_statuses.as_ref()?;
    all.iter().find(|c| &c.name == name)
}

fn last_termination(c: &ContainerStatus) -> Option<String> {
    let t = c.last_state.as_ref()?.terminated.as_ref()?;
    // The kubelet's reasons are short words; a longer one is cut, not carried into status.
    let reason: String = t
        .reason
        .as_deref()
        .unwrap_or("Terminated")
        .chars()
        .take(MAX_REASON)
        .collect();
    Some(format!("{reason} (exit {})", t.exit_code))
}

/// Pods named by a fault of this run that was carried out, or may have been (unknown: its
/// agent's report lost; the verdict says so), and whether any was a deletion (whose
/// replacement may have a new name: a Deployment's pod).
fn faulted(faults: &[FaultRecord]) -> (Vec<&str>, bool) {
    let done: Vec<&FaultRecord> = faults
        .iter()
        .filter(|f| f.executed_time.is_some() || f.unknown())
        .collect();
    let pods = done.iter().filter_map(|f| f.pod.as_deref()).collect();
    let deleted = done
        .iter()
        .any(|f| matches!(f.action, Some(FaultAction::Delete | FaultAction::Kill)));
    (pods, deleted)
}

/// What changed between the start and now that no carried-out fault explains. A fault explains
/// any restart or replacement of the pod it acted on (a liveness probe failing in a pause is
/// the fault's doing too) but never an OOM kill.
pub fn unexplained(
    at_start: &[ObservedPod],
    now: &[ObservedPod],
    faults: &[FaultRecord],
) -> Vec<ServerRestart> {
    if at_start.is_empty() {
        return Vec::new(); // nothing read at the start (an older operator): nothing to judge by
    }
    let (faulted_pods, deleted) = faulted(faults);
    let mut out = Vec::new();
    for p in now {
        let start = at_start.iter().find(|s| s.name == p.name);
        let oom = p
            .last_termination
            .as_deref()
            .is_some_and(|t| t.starts_with(OOM_KILLED));
        let (change, restarts, explained) = match start {
            None => ("new", p.restarts.unwrap_or(0), deleted),
            Some(s) if s.uid.is_some() && s.uid != p.uid => {
                let by_fault = faulted_pods.contains(&p.name.as_str());
                ("replaced", p.restarts.unwrap_or(0), by_fault)
            }
            Some(s) => {
                let during = p.restarts.unwrap_or(0) - s.restarts.unwrap_or(0);
                if during <= 0 {
                    continue;
                }
                let by_fault = faulted_pods.contains(&p.name.as_str());
                ("restarted", during, by_fault)
            }
        };
        if explained && !(oom && restarts > 0) {
            continue;
        }
        out.push(ServerRestart {
            pod: p.name.clone(),
            change: change.into(),
            restarts,
            last_termination: (restarts > 0).then(|| p.last_termination.clone()).flatten(),
        });
    }
    for s in at_start {
        let here = now.iter().any(|p| p.name == s.name);
        if !here && !faulted_pods.contains(&s.name.as_str()) {
            out.push(ServerRestart {
                pod: s.name.clone(),
                change: "gone".into(),
                ..ServerRestart::default()
            });
        }
    }
    out.truncate(16);
    out
}

/// One line for the verdict's message, or `None` when nothing restarted.
pub fn caution(restarts: &[ServerRestart]) -> Option<String> {
    if restarts.is_empty() {
        return None;
    }
    let each: Vec<String> = restarts
        .iter()
        .map(|r| match &r.last_termination {
            Some(t) => format!("{} {} ({t})", r.pod, r.change),
            None => format!("{} {}", r.pod, r.change),
        })
        .collect();
    Some(format!(
        "caution: server pods changed during the run without a fault asking for it, so the \
         figures include their outage: {} (status.environment.serverRestarts)",
        each.join(", ")
    ))
}

#[cfg(test)]
mod tests;
