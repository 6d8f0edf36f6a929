//! A `crash`, `pause` or `partition` carried out by the target pod's fault agent: the operator
//! asks it (with a credential signed for the server object) to signal the server process or cut
//! its traffic, and records what the agent reports having done. The same question on a later pass (same key) gets the same report
//! and never a second signal, so a lost answer is settled by asking again.
use crate::access::pod_http::{self, Options};
use crate::runtime::context::Context;
use k8s_openapi::api::core::v1::Pod;
use kube::{Api, ResourceExt};
use msgbench_crds::benchmark_run::{BenchmarkRun, FaultInjection, FaultRecord};
use msgbench_operator_core::run::fault_request::{request, AgentAnswer};
use msgbench_operator_core::run::faults;
use runner_api::fault_agent::{FaultReport, FAULT_AGENT_PORT};
use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

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
    let opts = Options::new(Duration::from_secs(3), 64 << 10).signed(ctx.control_for(&scope));
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
