//! `bench-runner run | merge | report | fault-agent | agent | delete-streams`.
#![forbid(unsafe_code)]
use anyhow::Context;
use bench_runner::fault_agent::{self, FaultAgent};
use bench_runner::{agent, engine, report, stream_sweep, termination, ClientPath, RunOptions};
use clap::{Parser, Subcommand};
use runner_api::agent::{AgentConfig, ResultLine};
use runner_api::control_auth::ControlVerifier;
use runner_api::result::RunnerResult;
use runner_api::result_frames;
use runner_api::target::Credentials;
use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};

#[derive(Parser)]
#[command(name = "bench-runner", version, about = "msgbench load generator")]
struct Cli {
    /// Where a failure is written as `{"reason","message"}` JSON for Kubernetes to report
    /// (default: /dev/termination-log, when that file exists, as it does in a container).
    #[arg(long, global = true, env = termination::PATH_ENV)]
    termination_log: Option<PathBuf>,
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Run a workload against a target and write the result. A NATS target that requires
    /// auth takes MSGBENCH_TOKEN, MSGBENCH_NKEY_SEED, or MSGBENCH_USERNAME and
    /// MSGBENCH_PASSWORD, an MQTT broker that requires a login MSGBENCH_USERNAME and
    /// MSGBENCH_PASSWORD, a pusher target its app's MSGBENCH_PUSHER_APP_ID, MSGBENCH_PUSHER_KEY
    /// and MSGBENCH_PUSHER_SECRET, from the environment (never from arguments, which `ps` shows).
    Run {
        /// Workload YAML (or JSON) file.
        #[arg(short = 'f', long = "file")]
        file: PathBuf,
        /// nats://host:port (tls://host:port: NATS over TLS, protocol jetstream), mqtt://host:port,
        /// http://host:port (socketio), ws://host:port (websocket, pusher).
        #[arg(long, env = "MSGBENCH_TARGET")]
        target: String,
        /// Where to write the JSON result.
        #[arg(long, short = 'o')]
        output: Option<PathBuf>,
        /// Runner id carried in every payload, 1 to 255 (default: random). Runners of one run
        /// need distinct ids; latency is only measured for messages carrying this runner's id.
        #[arg(long, env = "MSGBENCH_RUNNER_ID", value_parser = clap::value_parser!(u16).range(1..=255))]
        runner_id: Option<u16>,
        /// Exit with status 3 when the generator was saturated.
        #[arg(long)]
        fail_if_saturated: bool,
        /// Seconds to keep retrying a target that refuses connections or does not resolve yet,
        /// before the load starts; then fail naming the URL, attempts and last error.
        #[arg(long, default_value_t = 30, value_parser = clap::value_parser!(u32).range(0..=3600))]
        connect_timeout_seconds: u32,
        /// PEM CA certificate a tls:// target's certificate is verified with (default: the
        /// system's roots).
        #[arg(long, env = "MSGBENCH_TLS_CA_FILE")]
        tls_ca_file: Option<PathBuf>,
        /// Client code for core NATS and MQTT 3.1.1 QoS 0/1: `wire` (batched, hand-written) or
        /// `library` (async-nats / rumqttc, which also speak TLS). For comparing the two.
        #[arg(long, value_enum, default_value_t = ClientPath::default())]
        client: ClientPath,
    },
    /// Merge results of the runners of one run into the result one process would report.
    Merge {
        #[arg(required = true)]
        inputs: Vec<PathBuf>,
        #[arg(long, short = 'o')]
        output: Option<PathBuf>,
    },
    /// Print the table of a result file.
    Report { input: PathBuf },
    /// In a server pod that shares its process namespace: signal the server process when the
    /// operator asks (POST /faults), with credentials it signed for this server object only.
    FaultAgent {
        /// Name of the server process (`/proc/<pid>/comm`), e.g. nats-server or mosquitto.
        #[arg(long)]
        process: String,
        #[arg(long, default_value = "0.0.0.0:9091")]
        listen: std::net::SocketAddr,
        /// The operator's Ed25519 public keys (base64, comma-separated: current, previous).
        /// Required: the agent never runs without checking credentials.
        #[arg(long, env = runner_api::control_auth::PUBLIC_KEY_ENV)]
        control_public_key: Option<String>,
        /// The uid of the server object: credentials for anything else are refused. Required.
        #[arg(long, env = runner_api::fault_agent::SERVER_UID_ENV)]
        server_uid: Option<String>,
        /// Also carry out partitions (needs NET_ADMIN in the pod's network namespace).
        #[arg(long)]
        network: bool,
        /// The nftables program partitions use.
        #[arg(long, default_value = "/usr/sbin/nft")]
        nft: PathBuf,
        /// The server's ports its peers use (a partition `from: peers`).
        #[arg(long, value_delimiter = ',')]
        peer_ports: Vec<u16>,
        /// The server's client ports (a partition `from: clients`).
        #[arg(long, value_delimiter = ',')]
        client_ports: Vec<u16>,
    },
    /// In-cluster runner: connect, report ready on GET /ready, start at the time given by
    /// POST /start, print one `MSGBENCH-RESULT` log line per trial, exit 0.
    Agent {
        /// Agent config (target, workload, trials, barrier timeout) as YAML or JSON.
        #[arg(
            short = 'f',
            long = "config",
            default_value = "/etc/msgbench/agent.yaml"
        )]
        config: PathBuf,
        /// Runner id, 1 to 255 (default: JOB_COMPLETION_INDEX + 1 of an Indexed Job).
        #[arg(long, env = "MSGBENCH_RUNNER_ID", value_parser = clap::value_parser!(u16).range(1..=255))]
        runner_id: Option<u16>,
        /// Address of /ready, /start, /progress and /results.
        #[arg(long, default_value = "0.0.0.0:9090")]
        listen: std::net::SocketAddr,
        /// Address of the live Prometheus /metrics (open: counts only).
        #[arg(long, default_value = "0.0.0.0:9102")]
        metrics_listen: std::net::SocketAddr,
        /// The operator's Ed25519 public keys (base64, comma-separated: current, previous):
        /// every endpoint but /ready needs a credential it signed for `--run-uid`. Not a
        /// secret. Required: the agent never runs without checking credentials.
        #[arg(long, env = runner_api::control_auth::PUBLIC_KEY_ENV)]
        control_public_key: Option<String>,
        /// The uid of this runner's BenchmarkRun: credentials for other runs are refused.
        /// Required.
        #[arg(long, env = runner_api::control_auth::RUN_UID_ENV)]
        run_uid: Option<String>,
    },
    /// Delete the JetStream streams of one BenchmarkRun (`<stream>_<RUN>G<generation>_T<trial>`),
    /// e.g. those a killed runner left behind. Prints one JSON line
    /// `{"run","deleted":[..],"failed":[{"stream","error"}]}`; exits 1 when a delete failed.
    /// Credentials from the environment as for `run` (MSGBENCH_TOKEN, ...).
    DeleteStreams(DeleteStreams),
}

#[derive(clap::Args)]
struct DeleteStreams {
    /// nats://host:port or tls://host:port.
    #[arg(long)]
    url: String,
    /// The run: the first 8 hex digits of its uid.
    #[arg(long, value_parser = stream_sweep::parse_run)]
    run: String,
    /// PEM CA certificate a tls:// server's certificate is verified with (default: the
    /// system's roots).
    #[arg(long, visible_alias = "tls-ca-file", env = "MSGBENCH_TLS_CA_FILE")]
    ca_file: Option<PathBuf>,
    /// Seconds to keep retrying a server that refuses connections or does not resolve yet;
    /// then fail naming the URL.
    #[arg(long, default_value_t = 30, value_parser = clap::value_parser!(u32).range(0..=3600))]
    connect_timeout_seconds: u32,
    /// Prefix of the credential variables: `<prefix>_TOKEN`, `<prefix>_NKEY_SEED`, or
    /// `<prefix>_USERNAME` and `<prefix>_PASSWORD` (an agent config's `targetAuth` prefix).
    #[arg(long, default_value = "MSGBENCH")]
    auth_env_prefix: String,
}

fn main() -> std::process::ExitCode {
    // Diagnostics go to stderr only (stdout carries results), coloured only on a terminal: a
    // pod log shows plain text.
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .init();
    let cli = Cli::parse();
    let termination_log = cli.termination_log.clone().or_else(|| {
        let p = PathBuf::from(termination::DEFAULT_PATH);
        p.exists().then_some(p)
    });
    match real_main(cli.cmd, termination_log.as_deref()) {
        Ok(code) => std::process::ExitCode::from(code),
        Err(e) => {
            eprintln!("bench-runner: {e:#}");
            if let Some(p) = termination_log {
                termination::write(&termination::of(&e), &p);
            }
            std::process::ExitCode::from(2)
        }
    }
}

fn real_main(cmd: Cmd, termination_log: Option<&Path>) -> anyhow::Result<u8> {
    match cmd {
        Cmd::Run {
            file,
            target,
            output,
            runner_id,
            fail_if_saturated,
            connect_timeout_seconds,
            tls_ca_file,
            client,
        } => {
            let text = std::fs::read_to_string(&file)
                .with_context(|| format!("reading {}", file.display()))?;
            let w = engine::parse_workload(&text)
                .with_context(|| format!("{}: not a valid workload", file.display()))?;
            let opts = RunOptions {
                runner_id: runner_id.unwrap_or_else(random_id),
                runners: bench_runner::payload::MAX_RUNNER,
                run_tag: 0,
                progress: std::io::stderr().is_terminal(),
                gate: None,
                setup: Default::default(),
                connect_timeout: std::time::Duration::from_secs(u64::from(connect_timeout_seconds)),
                // Never on the command line (it shows in `ps`): from the environment only.
                credentials: Credentials::from_env("MSGBENCH", |k| std::env::var(k).ok()),
                ca_file: tls_ca_file,
                live: None,
                client,
            };
            let rt = tokio::runtime::Builder::new_multi_thread()
                .enable_all()
                .build()?;
            let r = rt.block_on(engine::run(w, &target, opts))?;
            print!("{}", report::render(&r));
            if let Some(o) = output {
                write(&o, &r)?;
            }
            Ok(if fail_if_saturated && r.generator.saturated {
                3
            } else {
                0
            })
        }
        Cmd::Merge { inputs, output } => {
            let parts = inputs
                .iter()
                .map(|p| Ok((p.display().to_string(), read(p)?)))
                .collect::<anyhow::Result<Vec<_>>>()?;
            let r = RunnerResult::merge(&parts)?;
            print!("{}", report::render(&r));
            if let Some(o) = output {
                write(&o, &r)?;
            }
            Ok(0)
        }
        Cmd::Report { input } => {
            print!("{}", report::render(&read(&input)?));
            Ok(0)
        }
        Cmd::FaultAgent {
            process,
            listen,
            control_public_key,
            server_uid,
            network,
            nft,
            peer_ports,
            client_ports,
        } => {
            let auth = control_verifier(
                control_public_key,
                (runner_api::fault_agent::SERVER_UID_ENV, server_uid),
            )?;
            let net = network.then_some(fault_agent::NetFaults {
                nft: bench_runner::fault_net::Nft { program: nft },
                peer_ports,
                client_ports,
            });
            let agent = FaultAgent::new(&process, Path::new("/proc"), auth, net);
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()?;
            rt.block_on(fault_agent::serve(listen, agent))?;
            Ok(0)
        }
        Cmd::Agent {
            config,
            runner_id,
            listen,
            metrics_listen,
            control_public_key,
            run_uid,
        } => {
            // Before anything else: an agent without its key must not come up at all.
            let auth = control_verifier(
                control_public_key,
                (runner_api::control_auth::RUN_UID_ENV, run_uid),
            )?;
            let text = std::fs::read_to_string(&config)
                .with_context(|| format!("reading {}", config.display()))?;
            let cfg: AgentConfig = serde_norway::from_str(&text)
                .with_context(|| format!("{}: not a valid agent config", config.display()))?;
            let runner_id = match runner_id {
                Some(id) => id,
                None => job_index_id()?,
            };
            let rt = tokio::runtime::Builder::new_multi_thread()
                .enable_all()
                .build()?;
            rt.block_on(run_agent(cfg, runner_id, (listen, metrics_listen), auth))?;
            Ok(0)
        }
        Cmd::DeleteStreams(args) => delete_streams(args, termination_log),
    }
}

/// `delete-streams`: the JSON line on stdout, the summary on stderr and in the termination log.
fn delete_streams(a: DeleteStreams, termination_log: Option<&Path>) -> anyhow::Result<u8> {
    // Never on the command line (it shows in `ps`): from the environment only.
    let auth = Credentials::from_env(&a.auth_env_prefix, |k| std::env::var(k).ok());
    let target = stream_sweep::target(&a.url, auth, a.ca_file)?;
    let window = bench_runner::connect::ConnectWindow::new(
        &target.raw,
        std::time::Duration::from_secs(u64::from(a.connect_timeout_seconds)),
    );
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let sweep = rt.block_on(stream_sweep::sweep(&target, &a.run, &window))?;
    println!("{}", sweep.json_line());
    eprintln!("bench-runner: {}", sweep.summary());
    if let Some(p) = termination_log {
        sweep.write_termination(p);
    }
    Ok(sweep.exit_code())
}

/// Runs every trial, then holds the results until the operator confirmed it has them.
async fn run_agent(
    cfg: AgentConfig,
    runner_id: u16,
    (listen, metrics_listen): (std::net::SocketAddr, std::net::SocketAddr),
    auth: ControlVerifier,
) -> anyhow::Result<()> {
    let hold = std::time::Duration::from_secs(u64::from(cfg.results_hold_seconds));
    let state = agent::AgentState::new(auth);
    agent::serve(listen, state.clone()).await?;
    // On this runtime: a scrape is a short read of atomics, beside the load.
    bench_runner::live_metrics::serve(metrics_listen, state.live()).await?;
    // Each record also goes to stdout as frames: the fallback when /results cannot be read.
    let mut emit = |l: &ResultLine| -> anyhow::Result<()> {
        let mut out = std::io::stdout().lock();
        for f in result_frames::frames(l)? {
            writeln!(out, "{f}")?;
        }
        out.flush()?;
        Ok(())
    };
    agent::run(cfg, runner_id, state.clone(), &mut emit).await?;
    if state.hold_results(hold).await {
        tracing::info!("the operator has every result; exiting");
    } else {
        tracing::warn!(
            seconds = hold.as_secs(),
            "no confirmation from the operator within the hold; exiting (results stay in the log)"
        );
    }
    Ok(())
}

/// The verifier of an agent's control credentials. Fails closed: a missing key or scope is an
/// error naming its environment variable, never an agent that obeys anyone.
fn control_verifier(
    public_keys: Option<String>,
    (scope_env, scope): (&str, Option<String>),
) -> anyhow::Result<ControlVerifier> {
    let missing = |var: &str, flag: &str| {
        anyhow::anyhow!(
            "{var} is not set (nor --{flag}): the agent does not run without the operator's \
             control key and its scope, so that nobody else can drive it"
        )
    };
    let keys = public_keys
        .filter(|k| !k.trim().is_empty())
        .ok_or_else(|| {
            missing(
                runner_api::control_auth::PUBLIC_KEY_ENV,
                "control-public-key",
            )
        })?;
    let flag = match scope_env {
        runner_api::control_auth::RUN_UID_ENV => "run-uid",
        _ => "server-uid",
    };
    let scope = scope
        .filter(|s| !s.trim().is_empty())
        .ok_or_else(|| missing(scope_env, flag))?;
    ControlVerifier::new(&keys, &scope).map_err(anyhow::Error::msg)
}

fn read(p: &Path) -> anyhow::Result<RunnerResult> {
    let t = std::fs::read_to_string(p).with_context(|| format!("reading {}", p.display()))?;
    serde_json::from_str(&t).with_context(|| format!("{}: not a bench-runner result", p.display()))
}

fn write(p: &Path, r: &RunnerResult) -> anyhow::Result<()> {
    std::fs::write(p, serde_json::to_vec_pretty(r)?)
        .with_context(|| format!("writing {}", p.display()))
}

/// A runner id from the clock and pid; only needs to differ between runners of one run.
fn random_id() -> u16 {
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    let x = t.as_nanos() as u64 ^ (u64::from(std::process::id()) << 17);
    // One byte on the wire (see payload.rs), never 0.
    ((x ^ (x >> 16) ^ (x >> 32) ^ (x >> 48)) % 255) as u16 + 1
}

/// Runner id of an Indexed Job pod: completion index + 1 (ids of one run differ).
fn job_index_id() -> anyhow::Result<u16> {
    let raw = std::env::var("JOB_COMPLETION_INDEX")
        .context("--runner-id not given and JOB_COMPLETION_INDEX not set")?;
    let idx: u16 = raw
        .parse()
        .with_context(|| format!("JOB_COMPLETION_INDEX: not a small integer: {raw:?}"))?;
    idx.checked_add(1)
        .context("JOB_COMPLETION_INDEX: too large")
}
