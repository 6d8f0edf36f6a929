//! Reads the evidence of faults whose agent report was lost (`faults::unknown` judges it): for a
//! `crash` the asked pod's server container as the kubelet reports it, for a `pause` or
//! `partition` the agent's `GET /faults/state`. What cannot be read now is read next pass, until
//! the evidence's bound.
use super::agent;
use super::pods::pod_named;
use crate::runtime::context::Context;
use k8s_openapi::api::core::v1::Pod;
use kube::{Api, ResourceExt};
use msgbench_crds::benchmark_run::{BenchmarkRun, FaultAction, FaultRecord};
use msgbench_operator_core::run::faults::unknown;
use msgbench_operator_core::run::model::{Evidence, FaultEvidenceSeen};
use msgbench_operator_core::run::results::server_restarts;

pub async fn read(
    ctx: &Context,
    br: &BenchmarkRun,
    ns: &str,
    recs: &[FaultRecord],
) -> Vec<FaultEvidenceSeen> {
    let api = Api::<Pod>::namespaced(ctx.client.clone(), ns);
    let mut out = Vec::new();
    for rec in unknown::evidence_due(recs) {
        let Some(inj) = rec.injecting.as_ref() else {
            continue;
        };
        let evidence = match rec.action {
            // Both end in the server container's restart, which the kubelet reports.
            Some(FaultAction::Crash | FaultAction::PowerLoss) => {
                let Ok(pod) = pod_named(&api, &inj.pod).await else {
                    continue;
                };
                let status = pod.as_ref().and_then(server_restarts::server_container);
                Evidence::Server {
                    uid: pod.as_ref().and_then(|p| p.uid()),
                    status: status.cloned().map(Box::new),
                }
            }
            _ => Evidence::Agent(agent::state(ctx, br, ns, rec, inj).await),
        };
        out.push(FaultEvidenceSeen {
            fault: rec.fault,
            trial: rec.trial,
            evidence,
        });
    }
    out
}
