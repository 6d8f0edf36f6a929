//! Carries out the faults `decide` chose, whose pods are in status already (`injecting`): a
//! deletion with the recorded uid as precondition, or an ask to the pod's fault agent. What
//! happens comes back as outcomes that the pure `decide::settle` writes into the records: act
//! chooses nothing and writes nothing. A repeat (the choice was in status before this pass: an
//! earlier pass may have acted) is settled only by a report or the pod seen deleted, and an
//! agent without a report makes it unknown (`request::outcome`).
//!
//! Faults due together are carried out together: every fault agent is asked at once, so one
//! crash per ordinal at the same `afterSeconds` crashes every server within milliseconds of each
//! other (a first-crashed server could otherwise be back before the last is hit).
use super::agent;
use crate::runtime::context::Context;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::{DeleteParams, Preconditions};
use kube::Api;
use msgbench_crds::benchmark_run::{BenchmarkRun, FaultAction, FaultInjection, FaultRecord};
use msgbench_operator_core::run::decide::EffectOutcome;
use msgbench_operator_core::run::faults::{policy, request};
use msgbench_operator_core::run::model::AgentAnswer;
use msgbench_operator_core::run::runners::build::RunIdentity;

/// Carries out the records `due` (indices into `faults`, each with whether it is a repeat).
pub async fn inject(
    ctx: &Context,
    br: &BenchmarkRun,
    id: &RunIdentity,
    faults: &[FaultRecord],
    due: &[(usize, bool)],
) -> Vec<EffectOutcome> {
    let ready: Vec<(usize, FaultInjection, bool)> = (due.iter())
        .filter_map(|&(i, repeat)| Some((i, faults.get(i)?.injecting.clone()?, repeat)))
        .collect();
    let by_agent = |rec: &FaultRecord| rec.action.is_some_and(FaultAction::needs_agent);
    let (asks, deletions): (Vec<_>, Vec<_>) =
        (ready.into_iter()).partition(|(i, _, _)| by_agent(&faults[*i]));
    let mut done = ask_agents(ctx, br, id, faults, &asks).await;
    for (index, injection, repeat) in deletions {
        let action = faults[index].action;
        match delete(ctx, &id.namespace, &injection, action).await {
            Deletion::Done => done.push(EffectOutcome::FaultDeleted {
                index,
                injection,
                // When the API server took the deletion: the fault's own time.
                at: Time(k8s_openapi::jiff::Timestamp::now()),
            }),
            // Gone or replaced after an earlier delete may be its work: the pod, looked at
            // next pass, says (`settle::settle_injections`).
            Deletion::Refused(why) if repeat => {
                tracing::warn!(run = %id.name, %why, "repeated fault deletion refused")
            }
            Deletion::Refused(why) => done.push(EffectOutcome::FaultNotDone { index, why }),
            // The pod is looked at on the next pass (soon: the record is still due).
            Deletion::Unknown(e) => {
                tracing::warn!(run = %id.name, error = %e, "fault deletion unconfirmed")
            }
        }
    }
    done
}

/// Every agent at once. An answer not known yet is no outcome: asked again next pass, with the
/// same key (never a second signal).
async fn ask_agents(
    ctx: &Context,
    br: &BenchmarkRun,
    id: &RunIdentity,
    faults: &[FaultRecord],
    asks: &[(usize, FaultInjection, bool)],
) -> Vec<EffectOutcome> {
    let sends = asks.iter().map(|(i, inj, repeat)| {
        let rec = faults[*i].clone();
        async move { agent::ask(ctx, br, &id.namespace, &rec, inj, *repeat).await }
    });
    let answers = futures::future::join_all(sends).await;
    let mut out = Vec::new();
    for ((index, injection, repeat), answer) in asks.iter().zip(answers) {
        if let AgentAnswer::Unknown(e) = &answer {
            tracing::warn!(run = %id.name, error = %e, "fault unconfirmed");
        }
        out.extend(request::outcome(*index, injection, answer, *repeat));
    }
    out
}

/// What a delete request came to.
enum Deletion {
    Done,
    /// The API server refused it (gone, replaced, forbidden): the pod was not deleted.
    Refused(String),
    /// No answer we can trust (a timeout, a server error): the next pass looks at the pod.
    Unknown(String),
}

/// Deletes the recorded pod, only while it still has the recorded uid.
async fn delete(
    ctx: &Context,
    ns: &str,
    inj: &FaultInjection,
    action: Option<FaultAction>,
) -> Deletion {
    let dp = DeleteParams {
        grace_period_seconds: policy::deletion_grace_seconds(action),
        preconditions: Some(Preconditions {
            uid: Some(inj.pod_uid.clone()),
            resource_version: None,
        }),
        ..DeleteParams::default()
    };
    let res = Api::<Pod>::namespaced(ctx.client.clone(), ns)
        .delete(&inj.pod, &dp)
        .await;
    match res {
        Ok(_) => Deletion::Done,
        Err(kube::Error::Api(e)) if matches!(e.code, 403 | 404 | 409 | 422) => {
            Deletion::Refused(format!("deleting pod {}: {e}", inj.pod))
        }
        Err(e) => Deletion::Unknown(format!("deleting pod {}: {e}", inj.pod)),
    }
}
