//! msgbench-operator entry point: controllers for the server kinds plus /metrics, /healthz,
//! /readyz on :8080. Single replica (no leader election): run one pod.
#![forbid(unsafe_code)]

use clap::{Parser, ValueEnum};
use msgbench_crds::{JetStreamCluster, MqttBroker, PubSubServer};
use msgbench_operator::context::{Context, Readiness};
use msgbench_operator::{controllers, http_server};
use std::net::SocketAddr;
use std::sync::Arc;
use tracing_subscriber::EnvFilter;

#[derive(Clone, Copy, Debug, ValueEnum)]
enum LogFormat {
    Text,
    Json,
}

#[derive(Debug, Parser)]
#[command(
    name = "msgbench-operator",
    version,
    about = "Provisions and tunes msgbench servers"
)]
struct Args {
    /// Address of /metrics, /healthz and /readyz.
    #[arg(long, env = "METRICS_ADDR", default_value = "0.0.0.0:8080")]
    metrics_addr: SocketAddr,
    /// Log format.
    #[arg(long, env = "LOG_FORMAT", value_enum, default_value = "text")]
    log_format: LogFormat,
    /// Watch only this namespace (default: all namespaces).
    #[arg(long, env = "WATCH_NAMESPACE")]
    namespace: Option<String>,
    /// Do not read nats-server /varz on pod IPs (when the operator cannot reach pod IPs).
    #[arg(long, env = "NO_VARZ")]
    no_varz: bool,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let filter = EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| EnvFilter::new("info,kube=warn,msgbench_operator=info"));
    let fmt = tracing_subscriber::fmt().with_env_filter(filter);
    match args.log_format {
        LogFormat::Json => fmt.json().init(),
        LogFormat::Text => fmt.init(),
    }

    // bench-runner (result merge code) brings rustls with aws-lc-rs next to kube's ring: with two
    // providers compiled in, rustls cannot pick one by itself, so name it before any TLS use.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let client = kube::Client::try_default().await?;
    let readiness = Arc::new(Readiness::new(4));
    let ctx = Arc::new(Context::new(client, readiness.clone(), !args.no_varz));

    let listener = tokio::net::TcpListener::bind(args.metrics_addr).await?;
    tracing::info!(addr = %listener.local_addr()?, "serving /metrics /healthz /readyz");
    let app = http_server::router(ctx.metrics.clone(), readiness);
    let server = tokio::spawn(async move {
        axum::serve(listener, app)
            .with_graceful_shutdown(shutdown_signal())
            .await
    });

    tokio::join!(
        controllers::run::<JetStreamCluster>(ctx.clone(), args.namespace.clone()),
        controllers::run::<MqttBroker>(ctx.clone(), args.namespace.clone()),
        controllers::run::<PubSubServer>(ctx.clone(), args.namespace.clone()),
        msgbench_operator::benchmark_run::controller::run(ctx.clone(), args.namespace.clone()),
    );
    server.await??;
    tracing::info!("shut down");
    Ok(())
}

async fn shutdown_signal() {
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .expect("SIGTERM handler");
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {},
        _ = term.recv() => {},
    }
}
