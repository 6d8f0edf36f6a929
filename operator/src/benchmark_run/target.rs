//! Resolves `spec.target` to a URL, Ready or not, and the server pods' labels.
use super::build::server_selector;
use crate::context::Context;
use crate::error::Result;
use kube::Api;
use msgbench_crds::benchmark_run::{BenchmarkRun, ObservedEnvironment, ServerKind, Target};
use msgbench_crds::common::ServerStatus;
use msgbench_crds::jetstream_cluster::NatsAuth;
use msgbench_crds::workload::Protocol;
use msgbench_crds::{JetStreamCluster, MqttBroker, PubSubServer};
use std::collections::BTreeMap;

#[derive(Clone, Debug, PartialEq)]
pub struct Resolved {
    pub url: String,
    /// `<Kind>/<name>` or the endpoint URL.
    pub display: String,
    /// Why the target is not Ready yet.
    pub not_ready: Option<String>,
    pub server_labels: Option<BTreeMap<String, String>>,
    pub environment: Option<ObservedEnvironment>,
    /// The Secret clients authenticate with (a JetStreamCluster's `spec.auth`).
    pub auth: Option<NatsAuth>,
}

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
        return Ok(Ok(Resolved {
            url: e.url.clone(),
            display: e.url.clone(),
            not_ready: None,
            server_labels: None,
            environment: None,
            auth: None,
        }));
    }
    let Some(r) = &t.server_ref else {
        return Ok(Err("target: neither serverRef nor endpoint is set".into()));
    };
    let c = ctx.client.clone();
    let mut auth = None;
    let status: Option<Option<ServerStatus>> = match r.kind {
        ServerKind::JetStreamCluster => Api::<JetStreamCluster>::namespaced(c, ns)
            .get_opt(&r.name)
            .await?
            .map(|s| {
                auth = s.spec.auth;
                s.status
            }),
        ServerKind::MqttBroker => Api::<MqttBroker>::namespaced(c, ns)
            .get_opt(&r.name)
            .await?
            .map(|s| s.status),
        ServerKind::PubSubServer => Api::<PubSubServer>::namespaced(c, ns)
            .get_opt(&r.name)
            .await?
            .map(|s| s.status),
    };
    let display = format!("{:?}/{}", r.kind, r.name);
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
    }))
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

#[cfg(test)]
mod tests {
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
