//! Resolves `spec.target` to a URL, Ready or not, and the server pods' labels.
pub mod endpoint_read;
pub mod server_sampling;
pub mod sweep_streams;

use crate::runtime::context::Context;
use crate::runtime::error::Result;
use kube::Api;
use msgbench_crds::benchmark_run::{
    BenchmarkRun, FaultAgentSpec, ObservedEnvironment, ServerKind, Target,
};
use msgbench_crds::common::ServerStatus;
use msgbench_crds::endpoint::Endpoint;
use msgbench_crds::pubsub_server::PubSubProtocol;
use msgbench_crds::workload::Protocol;
use msgbench_crds::{JetStreamCluster, MqttBroker, PubSubServer};
use msgbench_operator_core::fault_policy::FaultPolicy;
use msgbench_operator_core::run::model::{FaultAgentSeen, Resolved, TargetSeen};
use msgbench_operator_core::run::runners::build::server_selector;
use msgbench_operator_core::run::target::target_auth::{of_mqtt_broker, TargetSecret, TlsSource};

/// `Err(message)` when the referenced server does not exist.
pub async fn resolve(
    ctx: &Context,
    br: &BenchmarkRun,
    ns: &str,
) -> Result<std::result::Result<Resolved, String>> {
    resolve_target(ctx, &br.spec.target, br.spec.workload.protocol, ns).await
}

/// `resolve` for any target (a variant's own).
pub async fn resolve_target(
    ctx: &Context,
    t: &Target,
    protocol: Protocol,
    ns: &str,
) -> Result<std::result::Result<Resolved, String>> {
    if let Some(e) = &t.endpoint {
        return Ok(Ok(of_endpoint(e)));
    }
    let Some(r) = &t.server_ref else {
        return Ok(Err("target: neither serverRef nor endpoint is set".into()));
    };
    let c = ctx.client.clone();
    let mut auth = None;
    let mut tls = None;
    let mut unfit = None;
    let (mut fault_agent, policy) = ((None, None), &ctx.operands.faults);
    let status: Option<Option<ServerStatus>> = match r.kind {
        ServerKind::JetStreamCluster => Api::<JetStreamCluster>::namespaced(c, ns)
            .get_opt(&r.name)
            .await?
            .map(|s| {
                auth = s.spec.auth.map(TargetSecret::Nats);
                tls = (s.spec.tls).map(|t| TlsSource::server_secret(&t.secret_name));
                fault_agent = agent_of(policy, s.spec.fault_injection.as_ref(), true);
                s.status
            }),
        ServerKind::MqttBroker => Api::<MqttBroker>::namespaced(c, ns)
            .get_opt(&r.name)
            .await?
            .map(|s| {
                (auth, tls) = of_mqtt_broker(&s.spec);
                fault_agent = agent_of(policy, s.spec.fault_injection.as_ref(), false);
                s.status
            }),
        ServerKind::PubSubServer => {
            let Some(s) = Api::<PubSubServer>::namespaced(c, ns)
                .get_opt(&r.name)
                .await?
            else {
                return Ok(Err(format!(
                    "target.serverRef: PubSubServer/{} does not exist in namespace {ns}",
                    r.name
                )));
            };
            unfit = pubsub_fits(s.spec.protocol, protocol).err();
            auth = s.spec.pusher.map(|p| TargetSecret::PusherApp {
                secret_name: p.secret_name,
            });
            Some(s.status)
        }
    };
    let display = format!("{:?}/{}", r.kind, r.name);
    let unfit = unfit.map(|e| format!("target.serverRef: {display}: {e}"));
    let Some(status) = status else {
        return Ok(Err(format!(
            "target.serverRef: {display} does not exist in namespace {ns}"
        )));
    };
    let status = status.unwrap_or_default();
    let ready = status
        .conditions
        .iter()
        .any(|c| c.type_ == "Ready" && c.status == "True");
    let url = status.url.clone().map(|u| adapt_url(&u, protocol));
    let not_ready = match (&url, ready) {
        (Some(_), true) => None,
        (None, _) => Some(format!("{display} reports no client URL yet")),
        (_, false) => Some(format!("{display} is not Ready")),
    };
    let environment = status
        .observed_tuning
        .as_ref()
        .map(|o| ObservedEnvironment {
            sysctls: o.sysctls_applied.iter().take(16).cloned().collect(),
            ..ObservedEnvironment::default()
        });
    Ok(Ok(Resolved {
        url: url.unwrap_or_default(),
        display,
        not_ready,
        server_labels: Some(server_selector(r.kind, &r.name)),
        environment,
        auth,
        tls,
        unfit,
        fault_agent: fault_agent.0,
        fault_agent_refused: fault_agent.1,
    }))
}

/// An endpoint target: its URL as given, taken as ready (no server of msgbench's to ask).
fn of_endpoint(e: &Endpoint) -> Resolved {
    Resolved {
        url: e.url.clone(),
        display: e.url.clone(),
        not_ready: None,
        server_labels: None,
        environment: None,
        auth: e.auth.clone().map(TargetSecret::Endpoint),
        tls: e.tls.as_ref().map(TlsSource::of_endpoint),
        unfit: None,
        fault_agent: None,
        fault_agent_refused: None,
    }
}

/// The fault agent a server's pods carry: what its spec asks for if the operator's install
/// allows it (`ServerPod::agent_if` builds the same), else why not.
fn agent_of(
    policy: &FaultPolicy,
    spec: Option<&FaultAgentSpec>,
    peers: bool,
) -> (Option<FaultAgentSeen>, Option<String>) {
    match policy.admit(spec) {
        Ok(agent) => (
            agent.map(|f| FaultAgentSeen {
                network: f.network,
                power_loss: f.power_loss,
                peers,
            }),
            None,
        ),
        Err(refusal) => (None, Some(refusal.message)),
    }
}

/// A pusher PubSubServer (sockudo) speaks only pusher, and pusher only it; the reference
/// server speaks socketio and websocket whatever its `protocol` says.
fn pubsub_fits(server: PubSubProtocol, workload: Protocol) -> std::result::Result<(), String> {
    match (
        server == PubSubProtocol::Pusher,
        workload == Protocol::Pusher,
    ) {
        (true, false) => Err(format!(
            "serves protocol pusher, not {workload:?} (workload.protocol: pusher)"
        )),
        (false, true) => Err("does not serve protocol pusher (spec.protocol: pusher)".into()),
        _ => Ok(()),
    }
}

/// A PubSubServer serves Socket.IO on `http://` and plain WebSocket on `ws://…/ws`.
fn adapt_url(url: &str, p: Protocol) -> String {
    match p {
        Protocol::Websocket => {
            let rest = url
                .strip_prefix("http://")
                .or_else(|| url.strip_prefix("ws://"))
                .unwrap_or(url)
                .trim_end_matches('/');
            if rest.ends_with("/ws") {
                format!("ws://{rest}")
            } else {
                format!("ws://{rest}/ws")
            }
        }
        _ => url.to_string(),
    }
}

/// `spec.target` and every planned variant's own target, each resolved for the protocol it
/// is spoken to in (a variant may change it, e.g. `pusher` for sockudo).
pub async fn targets(ctx: &Context, br: &BenchmarkRun, ns: &str) -> Result<Vec<TargetSeen>> {
    let base = br.spec.workload.protocol;
    let own = br.spec.variants.iter().filter_map(|v| {
        let protocol = v.workload.as_ref().and_then(|o| o.protocol).unwrap_or(base);
        Some((Some(v.name.clone()), v.target.as_ref()?, protocol))
    });
    let wanted: Vec<_> = std::iter::once((None, &br.spec.target, base))
        .chain(own)
        .collect();
    let mut out = Vec::with_capacity(wanted.len());
    for (variant, t, protocol) in wanted {
        let resolved = resolve_target(ctx, t, protocol, ns).await?;
        let unreachable = match &resolved {
            Ok(r) if r.not_ready.is_none() => {
                crate::benchmark_run::target::endpoint_read::not_programmed(
                    ctx,
                    &r.url,
                    ns,
                    t.server_ref.is_some(),
                )
                .await?
            }
            _ => None,
        };
        out.push(TargetSeen {
            variant,
            resolved,
            unreachable,
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    #[test]
    fn only_a_pusher_server_serves_pusher_workloads() {
        use super::{pubsub_fits, PubSubProtocol as S};
        use msgbench_crds::workload::Protocol as W;
        assert!(pubsub_fits(S::Pusher, W::Pusher).is_ok());
        assert!(pubsub_fits(S::Socketio, W::Websocket).is_ok());
        let e = pubsub_fits(S::Pusher, W::Socketio).unwrap_err();
        assert!(e.contains("serves protocol pusher"), "{e}");
        assert!(pubsub_fits(S::Websocket, W::Pusher).is_err());
    }

    #[test]
    fn websocket_workloads_get_the_ws_path() {
        use msgbench_crds::workload::Protocol;
        assert_eq!(
            super::adapt_url("http://p.bench.svc:8080", Protocol::Websocket),
            "ws://p.bench.svc:8080/ws"
        );
        assert_eq!(
            super::adapt_url("http://p.bench.svc:8080", Protocol::Socketio),
            "http://p.bench.svc:8080"
        );
    }
}
