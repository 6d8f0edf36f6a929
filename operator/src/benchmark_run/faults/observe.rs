//! Reads what the fault steps of `decide` need, and touches nothing: the servers of due faults
//! whose pod is not chosen yet (`policy::choose`), the pods of recorded choices, stream leaders
//! and crashed containers after their faults.
use super::pods::{owned_pods, pod_named};
use super::{agent, leader};
use crate::runtime::context::Context;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::{Api, ResourceExt};
use msgbench_crds::benchmark_run::{BenchmarkRun, FaultRecord, ServerKind};
use msgbench_operator_core::run::faults::{policy, restart};
use msgbench_operator_core::run::model::{
    FaultLeaderSeen, FaultPodSeen, FaultRestartSeen, FaultTargetSeen,
};
use msgbench_operator_core::run::results::server_restarts;

/// The server of each due fault whose pod is not chosen yet, as `policy::choose` takes it.
pub async fn targets(
    ctx: &Context,
    br: &BenchmarkRun,
    ns: &str,
    recs: &[FaultRecord],
    now: &Time,
) -> Vec<FaultTargetSeen> {
    let mut out = Vec::new();
    for rec in policy::to_choose(recs, now) {
        let (fault, trial) = (rec.fault, rec.trial);
        let Some(server) = policy::server_of(br, rec.variant.as_deref()) else {
            let pods = Err("the trial's target is not a serverRef".into());
            out.push(FaultTargetSeen {
                fault,
                trial,
                pods,
                leader: None,
            });
            continue;
        };
        let owned = owned_pods(ctx, server, ns).await;
        let leader = match (&owned, server.kind) {
            (Ok(pods), ServerKind::JetStreamCluster) => {
                Some(leader::stream_leader(br, rec, pods).await)
            }
            _ => None,
        };
        let pods = owned.map(|pods| pods.iter().map(|p| (p.name_any(), p.uid())).collect());
        out.push(FaultTargetSeen {
            fault,
            trial,
            pods,
            leader,
        });
    }
    out
}

/// The pods that recorded injections name and that have no outcome yet, as they are now; for a
/// fault by agent, the agent is asked again as a repeat (the same key: it reports, never acts
/// twice; one that restarted since says it has no report).
pub async fn injected_pods(
    ctx: &Context,
    br: &BenchmarkRun,
    ns: &str,
    recs: &[FaultRecord],
) -> kube::Result<Vec<FaultPodSeen>> {
    let api = Api::<Pod>::namespaced(ctx.client.clone(), ns);
    let mut out = Vec::new();
    for rec in recs {
        let Some(inj) = policy::unsettled_injection(rec) else {
            continue;
        };
        let pod = pod_named(&api, &inj.pod).await?;
        let answer = match rec.action {
            Some(a) if a.needs_agent() => Some(agent::ask(ctx, br, ns, rec, inj, true).await),
            _ => None,
        };
        out.push(FaultPodSeen {
            pod: inj.pod.clone(),
            uid: pod.as_ref().and_then(|p| p.uid()),
            deleting: pod.is_some_and(|p| p.metadata.deletion_timestamp.is_some()),
            answer,
        });
    }
    Ok(out)
}

/// The stream leader after each fault whose time has come (`policy::leader_after_due`); a fault
/// whose stream no majority names yet is asked again next pass.
pub async fn leaders_after(
    ctx: &Context,
    br: &BenchmarkRun,
    ns: &str,
    recs: &[FaultRecord],
    now: &Time,
) -> Vec<FaultLeaderSeen> {
    let mut out = Vec::new();
    for rec in policy::leader_after_due(br, recs, now) {
        let Some(server) = policy::server_of(br, rec.variant.as_deref()) else {
            continue;
        };
        let Ok(pods) = owned_pods(ctx, server, ns).await else {
            continue;
        };
        if let Some(leader) = leader::current_leader(br, rec.trial, &pods).await {
            out.push(FaultLeaderSeen {
                fault: rec.fault,
                trial: rec.trial,
                leader,
            });
        }
    }
    out
}

/// The server container's status after each crash whose restart is still to be read
/// (`restart::restart_due`); a pod that cannot be read now is read next pass.
pub async fn restarts_after(
    ctx: &Context,
    ns: &str,
    recs: &[FaultRecord],
    now: &Time,
) -> Vec<FaultRestartSeen> {
    let api = Api::<Pod>::namespaced(ctx.client.clone(), ns);
    let mut out = Vec::new();
    for rec in restart::restart_due(recs, now) {
        let Some(name) = rec.pod.as_deref() else {
            continue;
        };
        let Ok(Some(pod)) = pod_named(&api, name).await else {
            continue;
        };
        if let Some(status) = server_restarts::server_container(&pod) {
            out.push(FaultRestartSeen {
                fault: rec.fault,
                trial: rec.trial,
                status: status.clone(),
            });
        }
    }
    out
}
