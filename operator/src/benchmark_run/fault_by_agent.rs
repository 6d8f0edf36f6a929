//! A `crash`, `pause` or `partition` carried out by the target pod's fault agent: the operator
//! asks it (with a credential signed for the server object) to signal the server process or cut
//! its traffic, and records what the agent reports having done. The same question on a later pass (same key) gets the same report
//! and never a second signal, so a lost answer is settled by asking again.
use super::faults;
use crate::context::Context;
use crate::pod_http::{self, Options};
use k8s_openapi::api::core::v1::Pod;
use kube::{Api, ResourceExt};
use msgbench_crds::benchmark_run::{BenchmarkRun, FaultAction, FaultInjection, FaultRecord};
use runner_api::fault_agent::{AgentAction, FaultReport, FaultRequest, FAULT_AGENT_PORT};
use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

/// What the agent answered.
#[derive(Clone, Debug, PartialEq)]
pub enum AgentAnswer {
    Done(FaultReport),
    /// It will not (too late, no such process, pod replaced): the fault was not carried out.
    Refused(String),
    /// No answer to trust: the next pass asks again.
    Unknown(String),
}

/// The agent's request for `rec` (the same on every pass).
pub fn request(br: &BenchmarkRun, rec: &FaultRecord) -> FaultRequest {
    let fault = br.spec.faults.get(rec.fault as usize);
    let duration_ms = (fault.and_then(|f| f.duration_seconds)).map(|s| s.max(0) as u64 * 1000);
    let action = match rec.action {
        Some(FaultAction::Pause) => AgentAction::Pause,
        Some(FaultAction::Partition) => AgentAction::Partition,
        _ => AgentAction::Crash,
    };
    FaultRequest {
        key: faults::agent_key(&br.uid().unwrap_or_default(), rec),
        action,
        not_after_unix_ms: faults::not_after_ms(rec),
        duration_ms: duration_ms.filter(|_| action != AgentAction::Crash),
        partition_from: (action == AgentAction::Partition)
            .then(|| fault.and_then(|f| f.partition_from).unwrap_or_default()),
    }
}

pub async fn ask(
    ctx: &Context,
    br: &BenchmarkRun,
    ns: &str,
    rec: &FaultRecord,
    inj: &FaultInjection,
) -> AgentAnswer {
    let pods = Api::<Pod>::namespaced(ctx.client.clone(), ns);
    let pod = match super::fault_inject::pod_named(&pods, &inj.pod).await {
        Ok(Some(p)) => p,
        Ok(None) => return AgentAnswer::Refused(format!("pod {} is gone", inj.pod)),
        Err(e) => return AgentAnswer::Unknown(format!("reading pod {}: {e}", inj.pod)),
    };
    if pod.uid().as_deref() != Some(inj.pod_uid.as_str()) {
        return AgentAnswer::Refused(format!("pod {} was replaced", inj.pod));
    }
    let ip: Option<IpAddr> = (pod.status.as_ref())
        .and_then(|s| s.pod_ip.as_ref())
        .and_then(|ip| ip.parse().ok());
    let Some(ip) = ip else {
        return AgentAnswer::Unknown(format!("pod {} has no IP", inj.pod));
    };
    let Some(server) = faults::server_of(br, rec.variant.as_deref()) else {
        return AgentAnswer::Refused("the trial's target is not a serverRef".into());
    };
    let scope = match super::fault_inject::server_uid(ctx, server, ns).await {
        Ok(uid) => uid,
        Err(e) => return AgentAnswer::Unknown(e),
    };
    let body = request(br, rec);
    let credential = ctx.control_credential(&scope);
    let opts = Options::new(Duration::from_secs(3), 64 << 10).bearer(&credential);
    let addr = SocketAddr::new(ip, FAULT_AGENT_PORT);
    match pod_http::post_json(addr, "/faults", &body, opts).await {
        Ok(reply) => match reply.json::<FaultReport>() {
            Ok(r) => AgentAnswer::Done(r),
            Err(e) => AgentAnswer::Unknown(e.to_string()),
        },
        Err(e) if e.status().is_some_and(|s| s.is_client_error()) => {
            AgentAnswer::Refused(format!("the fault agent of pod {}: {e}", inj.pod))
        }
        Err(e) => AgentAnswer::Unknown(format!("the fault agent of pod {}: {e}", inj.pod)),
    }
}
