//! Status from observations: Ready/Progressing/Degraded with reasons, and the tuning that took
//! effect. Pure, so every branch is unit-tested; `lastTransitionTime` only moves on a change.

use crate::pod_observer::{PodObservation, REJECTION_REASONS};
use crate::tuning::is_integer_cpu;
use crate::validate::Violation;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use msgbench_crds::common::{condition, ObservedTuning, Resources, ServerStatus, Sysctl, Tuning};

/// Why the workload is held at 0 replicas.
#[derive(Clone, Debug, PartialEq)]
pub struct Hold {
    pub reason: String,
    pub message: String,
}

/// The server's own report of its CPU view (nats `/varz`: `cores`, `gomaxprocs`).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct ServerReport {
    pub cores: Option<u32>,
    pub threads: Option<u16>,
}

pub struct StatusInput<'a> {
    pub previous: Option<&'a ServerStatus>,
    pub generation: Option<i64>,
    pub desired_replicas: i32,
    pub violations: &'a [Violation],
    pub hold: Option<&'a Hold>,
    pub pods: &'a PodObservation,
    pub url: String,
    pub tuning: &'a Tuning,
    pub resources: &'a Resources,
    pub configured_threads: Option<u16>,
    pub server_report: ServerReport,
    pub now: Time,
}

/// Keep the workload at 0 replicas when the kubelet refused its pods for this very generation
/// (a refusal seen now, or recorded in Degraded for the current generation). A spec change
/// (new generation) lifts the hold and tries again.
pub fn hold_for(
    previous: Option<&ServerStatus>,
    generation: Option<i64>,
    pods: &PodObservation,
) -> Option<Hold> {
    if let Some(p) = pods.problem.as_ref().filter(|p| p.rejected) {
        return Some(Hold {
            reason: p.reason.clone(),
            message: p.message.clone(),
        });
    }
    let degraded = previous?
        .conditions
        .iter()
        .find(|c| c.type_ == condition::DEGRADED)?;
    (degraded.status == "True"
        && REJECTION_REASONS.contains(&degraded.reason.as_str())
        && degraded.observed_generation == generation)
        .then(|| Hold {
            reason: degraded.reason.clone(),
            message: degraded.message.clone(),
        })
}

pub fn compute(input: &StatusInput<'_>) -> ServerStatus {
    let StatusInput {
        pods,
        desired_replicas,
        ..
    } = *input;
    let (ready, progressing, degraded) = if !input.violations.is_empty() {
        let msg = input
            .violations
            .iter()
            .map(|v| v.to_string())
            .collect::<Vec<_>>()
            .join("; ");
        let reason = input.violations[0].reason;
        (
            (
                false,
                reason.to_string(),
                format!("spec not applied: {msg}"),
            ),
            (
                false,
                reason.to_string(),
                "waiting for a valid spec".to_string(),
            ),
            (true, reason.to_string(), msg),
        )
    } else if let Some(hold) = input.hold {
        let msg = if hold.message.contains("scaled to 0") {
            hold.message.clone()
        } else {
            format!(
                "{}; scaled to 0 replicas until the spec changes",
                hold.message
            )
        };
        (
            (false, hold.reason.clone(), msg.clone()),
            (
                false,
                "ScaledToZero".to_string(),
                "held at 0 replicas after a kubelet refusal".into(),
            ),
            (true, hold.reason.clone(), msg),
        )
    } else {
        let all_ready = pods.ready >= desired_replicas && desired_replicas > 0;
        let count = format!(
            "{}/{} replicas ready",
            pods.ready.min(desired_replicas),
            desired_replicas
        );
        let degraded = match &pods.problem {
            Some(p) => (true, p.reason.clone(), p.message.clone()),
            None => (
                false,
                "AsExpected".to_string(),
                "no pod problems observed".to_string(),
            ),
        };
        if all_ready {
            (
                (true, "AllReplicasReady".to_string(), count),
                (false, "Stable".to_string(), "rollout complete".to_string()),
                degraded,
            )
        } else {
            (
                (false, "ReplicasNotReady".to_string(), count.clone()),
                (true, "RollingOut".to_string(), count),
                degraded,
            )
        }
    };
    let conditions = vec![
        make_condition(input, condition::READY, ready),
        make_condition(input, condition::PROGRESSING, progressing),
        make_condition(input, condition::DEGRADED, degraded),
    ];
    ServerStatus {
        conditions,
        observed_generation: input.generation,
        replicas: pods.pods,
        ready_replicas: pods.ready,
        url: Some(input.url.clone()),
        observed_tuning: Some(observed_tuning(input)),
    }
}

fn make_condition(
    input: &StatusInput<'_>,
    type_: &str,
    (status, reason, message): (bool, String, String),
) -> Condition {
    let status = if status { "True" } else { "False" }.to_string();
    // Condition messages are bounded (32 KiB in the schema); stay far below.
    let message: String = message.chars().take(1024).collect();
    let last_transition_time = input
        .previous
        .and_then(|p| p.conditions.iter().find(|c| c.type_ == type_))
        .filter(|c| c.status == status)
        .map(|c| c.last_transition_time.clone())
        .unwrap_or_else(|| input.now.clone());
    Condition {
        type_: type_.into(),
        status,
        reason,
        message,
        observed_generation: input.generation,
        last_transition_time,
    }
}

fn observed_tuning(input: &StatusInput<'_>) -> ObservedTuning {
    let pods = input.pods;
    let cpu_limit = input.resources.limits.as_ref().and_then(|l| l.cpu.as_ref());
    let limit_cores = cpu_limit
        .and_then(crate::tuning::cpu_millis)
        .map(|m| m / 1000);
    let cores = input.server_report.cores;
    let (pinning_effective, pinning_reason) = if !input.tuning.cpu_pinning {
        (false, None)
    } else if pods.pods == 0 {
        (false, Some("no running server pods".to_string()))
    } else if pods.qos_class.as_deref() != Some("Guaranteed") {
        let q = pods.qos_class.as_deref().unwrap_or("unknown");
        (
            false,
            Some(format!("pods have QoS class {q}; pinning needs Guaranteed")),
        )
    } else if !cpu_limit.is_some_and(is_integer_cpu) {
        (false, Some("CPU limit is not an integer".to_string()))
    } else if let (Some(seen), Some(limit)) = (cores, limit_cores) {
        if u64::from(seen) == limit {
            (true, None)
        } else {
            (
                false,
                Some(format!(
                    "server sees {seen} CPUs but the limit is {limit}: the node's kubelet does \
                     not run the static CPU manager policy (or no exclusive CPU was free)"
                )),
            )
        }
    } else {
        // Guaranteed + integer CPU: the static CPU manager pins it (if the node runs it).
        (true, None)
    };
    ObservedTuning {
        qos_class: pods.qos_class.clone(),
        pinning_effective,
        pinning_reason,
        cpus: cores.map(|c| format!("{c} visible to the server")),
        // A running pod means the kubelet accepted and set them.
        sysctls_applied: if pods.ready > 0 {
            input
                .tuning
                .sysctls
                .iter()
                .map(|s| Sysctl {
                    name: s.name.replace('/', "."),
                    value: s.value.clone(),
                })
                .collect()
        } else {
            Vec::new()
        },
        threads: input.server_report.threads.or(input.configured_threads),
    }
}
