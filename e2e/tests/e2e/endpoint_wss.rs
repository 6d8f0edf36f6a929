//! A WebSocket server a team runs without msgbench — the reference pubsub-server from plain
//! manifests (the endpoint samples', `config/samples/endpoint-servers/pubsub-server.yaml`),
//! serving only TLS and requiring a token — is benchmarked by `endpoint`: `wss://` (the token in
//! `Authorization: Bearer`) and Socket.IO over `https://` (the token in a query parameter), the CA
//! from a Secret. Both deliver every message. A wrong token ends `TargetAuthFailed` and an
//! untrusted CA `TargetTLSFailed` (naming the issuer the runner saw; TargetReady ends False with
//! the same reason), each within 30 s of the
//! run's creation; the token never appears in the run, an Event, a runner's log or the
//! operator's log.
use anyhow::Result;
use kube::api::DynamicObject;
use msgbench_e2e::certs::{service_names, TestCa};
use msgbench_e2e::kinds;
use msgbench_e2e::manifests::{create_sample, wait_ready};
use msgbench_e2e::runs::{
    delivered_exactly, finished, refused_fast, target_refused, untrusted_ca_named,
};
use msgbench_e2e::secrets::{self, never_shown};
use msgbench_e2e::{run, TestContext};
use serde_json::json;
use std::time::Duration;

/// How a run reaches the server: its protocol, URL scheme and token placement.
#[derive(Clone, Copy)]
enum Way {
    /// Plain WebSocket frames echoed on `/ws`, token in `Authorization: Bearer`.
    Wss,
    /// HTTP publish, Socket.IO delivery, token in the `access_token` query parameter.
    SocketIoHttps,
}

/// A run at the server with the token of Secret `secret`, trusting the CA of Secret `ca`.
fn run_at_server(ns: &str, name: &str, way: Way, secret: &str, ca: &str) -> String {
    let (protocol, scheme, auth, options) = match way {
        Way::Wss => ("websocket", "wss", "", "websocket: {mode: echo}"),
        Way::SocketIoHttps => ("socketio", "https", ", query: access_token", "socketio: {}"),
    };
    format!(
        r#"
apiVersion: msgbench.dev/v1alpha1
kind: BenchmarkRun
metadata: {{name: {name}}}
spec:
  target:
    endpoint:
      protocol: {protocol}
      url: "{scheme}://team-ws.{ns}.svc:443"
      auth: {{secretName: {secret}, mode: token{auth}}}
      tls: {{ca: {{secretName: {ca}}}}}
  connectTimeoutSeconds: 120
  workload:
    protocol: {protocol}
    publishers: 1
    subscribers: 1
    payloadBytes: 64
    ratePerPublisher: 100
    durationSeconds: 3
    warmupSeconds: 0
    drainSeconds: 2
    {options}
  runners:
    resources:
      requests: {{cpu: 20m, memory: 32Mi}}
      limits: {{memory: 128Mi}}
"#
    )
}

#[tokio::test]
async fn a_websocket_server_the_team_runs_behind_tls_and_a_token_is_benchmarked_by_endpoint() {
    run("endpoint-wss", body).await;
}

async fn body(ctx: TestContext) -> Result<()> {
    let token = format!("msgbench-e2e-wss-{:x}", rand::random::<u64>());
    let (ca, other_ca) = (TestCa::new("team-ca")?, TestCa::new("someone-else")?);
    let server = ca.issue(&service_names("team-ws", &ctx.ns))?;
    secrets::create(
        &ctx,
        [
            json!({"metadata": {"name": "team-ws-token"}, "stringData": {"token": token}}),
            json!({"metadata": {"name": "wrong-token"}, "stringData": {"token": "not-the-token"}}),
            json!({"metadata": {"name": "team-ws-tls"}, "type": "kubernetes.io/tls",
                   "stringData": {"tls.crt": server.cert, "tls.key": server.key, "ca.crt": ca.pem}}),
            json!({"metadata": {"name": "other-ca"}, "stringData": {"ca.crt": other_ca.pem}}),
        ],
    )
    .await?;
    // The team's server, nothing msgbench made: the endpoint samples' own (its header says
    // how a team makes the Secrets created above).
    for (kind, name) in
        create_sample(&ctx.client, &ctx.ns, "endpoint-servers/pubsub-server.yaml").await?
    {
        wait_ready(&ctx.client, &ctx.ns, &kind, &name).await?;
    }

    for (name, way) in [
        ("wss-echo", Way::Wss),
        ("socketio-https", Way::SocketIoHttps),
    ] {
        let manifest = run_at_server(&ctx.ns, name, way, "team-ws-token", "team-ws-tls");
        kinds::create(&ctx.client, &ctx.ns, &manifest).await?;
        let br = finished(&ctx, name, Duration::from_secs(300)).await?;
        delivered_exactly(&br, 300)?; // 100/s for 3 s
        never_shown(&ctx, &token, name, &serde_json::to_string(&br)?).await?;
    }
    let auth = refused(&ctx, "wss-wrong-token", "wrong-token", "team-ws-tls").await?;
    target_refused(&auth, "TargetAuthFailed")?;
    let tls = refused(&ctx, "wss-wrong-ca", "team-ws-token", "other-ca").await?;
    untrusted_ca_named(&tls, "team-ca")
}

/// A run that must fail fast: ended within 30 s of its creation (its connect window is 120 s).
async fn refused(ctx: &TestContext, name: &str, secret: &str, ca: &str) -> Result<DynamicObject> {
    refused_fast(
        ctx,
        name,
        &run_at_server(&ctx.ns, name, Way::Wss, secret, ca),
    )
    .await
}
