//! msgbench-operator entry point: controllers for the server kinds and BenchmarkRun, plus
//! /metrics, /healthz, /readyz on :8080.
//!
//! With `--leader-election` (the chart's default) several replicas may run: each campaigns for a
//! Lease in its own namespace and only the holder runs the controllers (`runtime/leader.rs`). A
//! standby serves /healthz and a ready /readyz; a leader that loses the Lease (another holder, or
//! no successful renewal within the renew deadline) stops its controllers at once and campaigns
//! again as a standby in the same process (`runtime/terms.rs`); only controllers that fail to stop
//! within the bound make it exit. On SIGTERM the leader finishes in-flight reconciles, then frees
//! the Lease so a standby takes over without waiting for it to expire. Without the flag (a local
//! `cargo run`) the process leads unconditionally: run only one.
#![forbid(unsafe_code)]

use clap::{Parser, ValueEnum};
use msgbench_crds::{JetStreamCluster, MqttBroker, PubSubServer};
use msgbench_operator::access::control_key;
use msgbench_operator::benchmark_run::runners::gather::RESULTS_BUDGET_BYTES;
use msgbench_operator::runtime::context::{Context, Readiness};
use msgbench_operator::runtime::merge_budget::MergeBudget;
use msgbench_operator::runtime::{http_server, leader, terms};
use msgbench_operator::server::controller as server_controller;
use msgbench_operator_core::fault_policy::FaultPolicy;
use msgbench_operator_core::operands::OperandDefaults;
use msgbench_operator_core::run::retention::RetentionPolicy;
use std::net::SocketAddr;
use std::sync::Arc;
use tokio_util::sync::CancellationToken;
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
    /// Carry out BenchmarkRun `spec.faults` (needs `delete` on pods: chart `faults.enabled`),
    /// and add the fault agent to server pods whose `spec.faultInjection` asks for it. Off: such
    /// servers run without it, Degraded (FaultInjectionNotAllowed).
    #[arg(long, env = "ALLOW_FAULTS")]
    allow_faults: bool,
    /// Also allow fault agents with `spec.faultInjection.network` (partition faults: the agent
    /// runs as uid 0 with NET_ADMIN and KILL). Means nothing without --allow-faults (chart
    /// `faults.network`).
    #[arg(long, env = "ALLOW_NETWORK_FAULTS")]
    allow_network_faults: bool,
    /// Also allow servers with `spec.faultInjection.powerLoss` (powerLoss faults: the server
    /// container runs privileged, as uid 0, to mount its store's lazy file system). Means
    /// nothing without --allow-faults (chart `faults.powerLoss`).
    #[arg(long, env = "ALLOW_POWER_LOSS_FAULTS")]
    allow_power_loss_faults: bool,
    /// Reconcile only while holding a Lease, so several replicas can run (needs POD_NAME and
    /// OPERATOR_NAMESPACE). Leave off for a local `cargo run` of a single operator.
    #[arg(long, env = "LEADER_ELECTION")]
    leader_election: bool,
    /// Name of the leader election Lease (in OPERATOR_NAMESPACE).
    #[arg(long, env = "LEADER_ELECTION_LEASE", default_value = leader::DEFAULT_LEASE_NAME)]
    leader_election_lease: String,
    /// This replica's identity in the Lease: its pod name (downward API).
    #[arg(long, env = "POD_NAME")]
    pod_name: Option<String>,
    /// The operator's own namespace, where the Lease lives (downward API).
    #[arg(long, env = "OPERATOR_NAMESPACE")]
    operator_namespace: Option<String>,
    /// Default images and pod additions for runner and server pods (the chart mounts its
    /// `operands.yaml` here). Unset: the built-in defaults (msgbench's own images under
    /// ghcr.io/msgbench, tagged with this operator's version).
    #[arg(long, env = "OPERANDS_CONFIG")]
    operands_config: Option<std::path::PathBuf>,
    /// The container's memory limit in bytes (the chart sets it from resources.limits.memory
    /// through the downward API); a quarter of it is the budget for run results in memory.
    #[arg(long, env = "MEMORY_LIMIT_BYTES")]
    memory_limit_bytes: Option<u64>,
    /// Secret in OPERATOR_NAMESPACE holding the key that signs runner control credentials,
    /// created when missing (the chart: `<release>-operator-control-key`). Unset: a key of this
    /// process only, so runs in flight fail when it restarts.
    #[arg(long, env = "CONTROL_KEY_SECRET")]
    control_key_secret: Option<String>,
    /// Read a runner's results from its pod log when its agent no longer holds them (needs
    /// `get` on pods/log: chart `results.fromPodLogs`). Off: such a run ends ResultsLost.
    #[arg(long, env = "RESULTS_FROM_POD_LOGS")]
    results_from_pod_logs: bool,
    /// Succeeded BenchmarkRuns kept per benchmark (label `msgbench.dev/benchmark`, else
    /// `generateName`) and namespace; older ones are deleted. Unset: all are kept.
    #[arg(long, env = "SUCCEEDED_RUNS_HISTORY_LIMIT")]
    succeeded_runs_history_limit: Option<u32>,
    /// Failed BenchmarkRuns kept per benchmark and namespace, as above.
    #[arg(long, env = "FAILED_RUNS_HISTORY_LIMIT")]
    failed_runs_history_limit: Option<u32>,
    /// Seconds after finishing before a BenchmarkRun without `spec.deleteAfterSeconds` is
    /// deleted. Unset: never by age.
    #[arg(long, env = "DELETE_RUNS_AFTER_SECONDS", value_parser = clap::value_parser!(i64).range(0..))]
    delete_runs_after_seconds: Option<i64>,
}

impl Args {
    fn operands(&self) -> anyhow::Result<OperandDefaults> {
        let Some(path) = &self.operands_config else {
            return Ok(OperandDefaults::default());
        };
        let text = std::fs::read_to_string(path)
            .map_err(|e| anyhow::anyhow!("--operands-config {}: {e}", path.display()))?;
        OperandDefaults::parse(&text)
            .map_err(|e| anyhow::anyhow!("--operands-config {}: {e}", path.display()))
    }

    /// Which fault agents server pods may carry.
    fn fault_policy(&self) -> FaultPolicy {
        if (self.allow_network_faults || self.allow_power_loss_faults) && !self.allow_faults {
            tracing::warn!(
                "--allow-network-faults or --allow-power-loss-faults without --allow-faults: \
                 no fault agent"
            );
        }
        let policy = FaultPolicy {
            agents: self.allow_faults,
            network: self.allow_network_faults,
            power_loss: self.allow_power_loss_faults,
        };
        tracing::info!(faults = ?policy, "fault agents allowed");
        policy
    }

    fn election(&self) -> anyhow::Result<Option<leader::Config>> {
        if !self.leader_election {
            return Ok(None);
        }
        let required = |v: &Option<String>, env: &str| {
            v.clone().filter(|s| !s.is_empty()).ok_or_else(|| {
                anyhow::anyhow!(
                    "--leader-election needs {env} (the chart sets it from the downward API)"
                )
            })
        };
        Ok(Some(leader::Config {
            lease: self.leader_election_lease.clone(),
            namespace: required(&self.operator_namespace, "OPERATOR_NAMESPACE")?,
            identity: required(&self.pod_name, "POD_NAME")?,
            timing: leader::Timing::DEFAULT,
        }))
    }
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    init_tracing(args.log_format);
    // The operator's own tree links only ring, but one cargo invocation that also builds
    // bench-runner (e2e/images/build, `cargo test --workspace`) unifies rustls features and adds
    // aws-lc-rs (tokio-tungstenite, async-nats); with two providers compiled in rustls cannot
    // pick one by itself, and kube's client would panic. So name it before any TLS use.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let election = args.election()?;
    let kube_config = kube::Config::infer().await?;
    let client = kube::Client::try_from(kube_config.clone())?;
    let readiness = Arc::new(Readiness::new(4));
    let ctx = context(&args, client, readiness.clone()).await?;
    let ctx = Arc::new(ctx);

    let listener = tokio::net::TcpListener::bind(args.metrics_addr).await?;
    tracing::info!(addr = %listener.local_addr()?, "serving /metrics /healthz /readyz");
    let app = http_server::router(ctx.metrics.clone(), readiness.clone());
    let server = tokio::spawn(async move {
        axum::serve(listener, app)
            .with_graceful_shutdown(shutdown_signal())
            .await
    });

    let Some(config) = election else {
        let ctx = Arc::new(ctx.next_term());
        run_controllers(ctx, args.namespace, CancellationToken::new()).await;
        server.await??;
        tracing::info!("shut down");
        return Ok(());
    };
    let Some(mut elector) = start_election(&kube_config, config, &ctx, readiness).await? else {
        tracing::info!("stopped while standby");
        return Ok(());
    };
    let namespace = args.namespace;
    // Each term of leadership gets a fresh context (see `Context::next_term`).
    let controllers = |stop| run_controllers(Arc::new(ctx.next_term()), namespace.clone(), stop);
    if let Err(e) = terms::lead_terms(&mut elector, controllers, shutdown_signal()).await {
        // Controllers that may still act without the Lease, or an election that cannot go
        // on: exit, and the kubelet restarts the container as a standby.
        tracing::error!(error = %e, "leader election: exiting");
        std::process::exit(1);
    }
    elector.release().await;
    server.await??;
    tracing::info!("shut down");
    Ok(())
}

fn init_tracing(format: LogFormat) {
    let filter = EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| EnvFilter::new("info,kube=warn,msgbench_operator=info"));
    let fmt = tracing_subscriber::fmt().with_env_filter(filter);
    match format {
        LogFormat::Json => fmt.json().init(),
        LogFormat::Text => fmt.init(),
    }
}

/// The controllers' context from the flags: run policies, the runner control key (loaded from
/// or created in its Secret), and the operand defaults that name it.
async fn context(
    args: &Args,
    client: kube::Client,
    readiness: Arc<Readiness>,
) -> anyhow::Result<Context> {
    let operands = args.operands()?;
    tracing::info!(images = ?operands.images, "operand defaults");
    let mut ctx = Context::new(client, readiness, !args.no_varz);
    ctx.runs.allow_faults = args.allow_faults;
    ctx.runs.results_from_pod_logs = args.results_from_pod_logs;
    ctx.runs.retention = RetentionPolicy {
        succeeded_history_limit: args.succeeded_runs_history_limit,
        failed_history_limit: args.failed_runs_history_limit,
        delete_after_seconds: args.delete_runs_after_seconds,
    };
    tracing::info!(retention = ?ctx.runs.retention, "finished runs' retention");
    match (&args.control_key_secret, &args.operator_namespace) {
        (Some(name), Some(ns)) => {
            let signer = control_key::load_or_create(ctx.client.clone(), ns, name).await?;
            ctx.control = Arc::new(signer);
            tracing::info!(secret = %format!("{ns}/{name}"), "runner control key loaded");
        }
        (Some(_), None) => anyhow::bail!("--control-key-secret needs OPERATOR_NAMESPACE"),
        (None, _) => tracing::warn!(
            "no --control-key-secret: runner control key of this process only; runs in flight fail when it restarts"
        ),
    }
    // Runner and fault-agent pods check the operator's credentials with this key.
    let mut operands = operands;
    operands.control_public_key = ctx.control.public_keys();
    operands.faults = args.fault_policy();
    // The servers' fences admit the operator's own pods to their monitoring ports.
    operands.operator_peer = ctx.runner_peer.clone();
    ctx.operands = Arc::new(operands);
    ctx.runs.merge_budget = Arc::new(MergeBudget::from_memory_limit(
        args.memory_limit_bytes,
        RESULTS_BUDGET_BYTES,
    ));
    tracing::info!(
        bytes = ctx.runs.merge_budget.total_bytes(),
        "memory budget for run results"
    );
    Ok(ctx)
}

/// Reaches the Lease as a standby (`Some`), or `None` when SIGTERM/SIGINT comes first.
async fn start_election(
    kube_config: &kube::Config,
    config: leader::Config,
    ctx: &Context,
    readiness: Arc<Readiness>,
) -> anyhow::Result<Option<leader::Elector>> {
    let client = leader::lease_client(kube_config, &config.timing)?;
    tokio::select! {
        elector = leader::Elector::start(client, config, &ctx.metrics, readiness) => elector.map(Some),
        _ = shutdown_signal() => Ok(None),
    }
}

/// The four controllers; each returns on SIGTERM (after its in-flight reconciles) or at once
/// when `stop` is cancelled.
async fn run_controllers(ctx: Arc<Context>, namespace: Option<String>, stop: CancellationToken) {
    let ns = || namespace.clone();
    tokio::join!(
        server_controller::run::<JetStreamCluster>(ctx.clone(), ns(), stop.clone()),
        server_controller::run::<MqttBroker>(ctx.clone(), ns(), stop.clone()),
        server_controller::run::<PubSubServer>(ctx.clone(), ns(), stop.clone()),
        msgbench_operator::benchmark_run::controller::run(ctx.clone(), ns(), stop),
    );
}

async fn shutdown_signal() {
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .expect("SIGTERM handler");
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {},
        _ = term.recv() => {},
    }
}
