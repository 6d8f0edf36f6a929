//! A `crash`, `pause` or `partition` carried out by the target pod's fault agent: the operator
//! asks it (with a credential signed for the server object) to signal the server process or cut
//! its traffic, and records what the agent reports having done. The same question on a later
//! pass (same key) gets the same report and never a second signal, so a lost answer is settled
//! by asking again; asked as a `repeat`, an agent that lost its reports (restarted) does nothing
//! and says so (`AgentAnswer::NoReport`: the fault is then unknown).
use super::pods::{pod_named, server_uid};
use crate::access::pod_http::{self, Options};
use crate::runtime::context::Context;
use k8s_openapi::api::core::v1::Pod;
use kube::{Api, ResourceExt};
use msgbench_crds::benchmark_run::{BenchmarkRun, FaultInjection, FaultRecord};
use msgbench_operator_core::run::faults::policy;
use msgbench_operator_core::run::faults::request::request;
use msgbench_operator_core::run::model::AgentAnswer;
use runner_api::fault_agent::{
    AgentAction, AgentState, FaultReport, FAULT_AGENT_PORT, NO_REPORT_STATUS,
};
use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

/// What an agent that restarted since the ask answers (its own words are not kept).
const NO_REPORT: &str = "the fault agent has no report of it (it restarted since the ask)";

/// Asks the agent of `inj`'s pod for `rec`; `repeat`: an earlier ask may have reached it.
pub async fn ask(
    ctx: &Context,
    br: &BenchmarkRun,
    ns: &str,
    rec: &FaultRecord,
    inj: &FaultInjection,
    repeat: bool,
) -> AgentAnswer {
    let (addr, scope) = match agent_of(ctx, br, ns, rec, inj).await {
        Ok(found) => found,
        Err(answer) => return answer,
    };
    let body = request(br, rec, repeat);
    // A power loss waits for the lazy file system's reply, which the agent bounds at 5 s.
    let wait = match body.action {
        AgentAction::PowerLoss => Duration::from_secs(7),
        _ => Duration::from_secs(3),
    };
    let opts = Options::new(wait, 64 << 10).signed(ctx.control_for(&scope));
    match pod_http::post_json(addr, "/faults", &body, opts).await {
        Ok(reply) => match reply.json::<FaultReport>() {
            Ok(r) => AgentAnswer::Done(r),
            Err(e) => AgentAnswer::Unknown(e.to_string()),
        },
        Err(e) if e.status().is_some_and(|s| s.as_u16() == NO_REPORT_STATUS) => {
            AgentAnswer::NoReport(NO_REPORT.into())
        }
        Err(e) if e.status().is_some_and(|s| s.is_client_error()) => {
            AgentAnswer::Refused(format!("the fault agent of pod {}: {e}", inj.pod))
        }
        Err(e) => AgentAnswer::Unknown(format!("the fault agent of pod {}: {e}", inj.pod)),
    }
}

/// The agent's `GET /faults/state` in `inj`'s pod (that very pod: uid-checked).
pub async fn state(
    ctx: &Context,
    br: &BenchmarkRun,
    ns: &str,
    rec: &FaultRecord,
    inj: &FaultInjection,
) -> Result<AgentState, String> {
    let (addr, scope) = agent_of(ctx, br, ns, rec, inj).await.map_err(|a| match a {
        AgentAnswer::Refused(e) | AgentAnswer::Unknown(e) | AgentAnswer::NoReport(e) => e,
        AgentAnswer::Done(_) => String::new(),
    })?;
    let opts = Options::new(Duration::from_secs(3), 16 << 10).signed(ctx.control_for(&scope));
    let reply = pod_http::get(addr, "/faults/state", opts).await;
    let reply = reply.map_err(|e| format!("the fault agent of pod {}: {e}", inj.pod))?;
    reply.json::<AgentState>().map_err(|e| e.to_string())
}

/// The agent's address and its credentials' scope (the server object's uid); or the answer
/// that stands for one that cannot be asked.
async fn agent_of(
    ctx: &Context,
    br: &BenchmarkRun,
    ns: &str,
    rec: &FaultRecord,
    inj: &FaultInjection,
) -> Result<(SocketAddr, String), AgentAnswer> {
    let pods = Api::<Pod>::namespaced(ctx.client.clone(), ns);
    let pod = match pod_named(&pods, &inj.pod).await {
        Ok(Some(p)) => p,
        Ok(None) => return Err(AgentAnswer::Refused(format!("pod {} is gone", inj.pod))),
        Err(e) => {
            return Err(AgentAnswer::Unknown(format!(
                "reading pod {}: {e}",
                inj.pod
            )))
        }
    };
    if pod.uid().as_deref() != Some(inj.pod_uid.as_str()) {
        return Err(AgentAnswer::Refused(format!(
            "pod {} was replaced",
            inj.pod
        )));
    }
    let ip: Option<IpAddr> = (pod.status.as_ref())
        .and_then(|s| s.pod_ip.as_ref())
        .and_then(|ip| ip.parse().ok());
    let Some(ip) = ip else {
        return Err(AgentAnswer::Unknown(format!("pod {} has no IP", inj.pod)));
    };
    let Some(server) = policy::server_of(br, rec.variant.as_deref()) else {
        let why = "the trial's target is not a serverRef";
        return Err(AgentAnswer::Refused(why.into()));
    };
    let scope = server_uid(ctx, server, ns).await;
    let scope = scope.map_err(AgentAnswer::Unknown)?;
    Ok((SocketAddr::new(ip, FAULT_AGENT_PORT), scope))
}
