//! `bench-runner run | merge | report | fault-agent | agent | delete-streams`.
#![forbid(unsafe_code)]
mod cli;

use anyhow::Context;
use bench_runner::fault_agent::{self, FaultAgent};
use bench_runner::refusal::scrub;
use bench_runner::{agent, engine, report, stream_sweep, termination, RunOptions};
use clap::Parser;
use cli::{Cli, Cmd, DeleteStreams, RunArgs};
use runner_api::agent::{AgentConfig, ResultLine};
use runner_api::control_auth::ControlVerifier;
use runner_api::result::RunnerResult;
use runner_api::result_frames;
use runner_api::target::{Credentials, TokenPlacement};
use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};

fn main() -> std::process::ExitCode {
    // Diagnostics go to stderr only (stdout carries results), coloured only on a terminal: a
    // pod log shows plain text.
    // tungstenite traces each WebSocket request whole, a token in it: never above info there.
    let quiet = "tungstenite::handshake::client=info"
        .parse()
        .expect("a valid directive");
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env().add_directive(quiet))
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
            // No client is known to echo a credential into an error; should one, it is cut out.
            let secrets = termination::env_secrets(std::env::vars());
            let secrets: Vec<&str> = secrets.iter().map(String::as_str).collect();
            eprintln!("bench-runner: {}", scrub(&format!("{e:#}"), &secrets));
            if let Some(p) = termination_log {
                let mut t = termination::of(&e);
                t.message = scrub(&t.message, &secrets);
                termination::write(&t, &p);
            }
            std::process::ExitCode::from(2)
        }
    }
}

fn real_main(cmd: Cmd, termination_log: Option<&Path>) -> anyhow::Result<u8> {
    match cmd {
        Cmd::Run(args) => run(args),
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
            lazyfs_control,
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
            let lazyfs = bench_runner::fault_power::LazyFsControl {
                socket: lazyfs_control,
                ..Default::default()
            };
            let agent = FaultAgent::with_lazyfs(&process, Path::new("/proc"), auth, net, lazyfs);
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

/// `run`: one workload against one target, standalone.
fn run(a: RunArgs) -> anyhow::Result<u8> {
    let text = std::fs::read_to_string(&a.file)
        .with_context(|| format!("reading {}", a.file.display()))?;
    let w = engine::parse_workload(&text)
        .with_context(|| format!("{}: not a valid workload", a.file.display()))?;
    let token_placement = match (a.token_header, a.token_query) {
        (Some(h), _) => Some(TokenPlacement::Header(h)),
        (None, Some(q)) => Some(TokenPlacement::Query(q)),
        (None, None) => None,
    };
    let opts = RunOptions {
        runner_id: a.runner_id.unwrap_or_else(random_id),
        runners: bench_runner::payload::MAX_RUNNER,
        run_tag: 0,
        progress: std::io::stderr().is_terminal(),
        gate: None,
        setup: Default::default(),
        connect_timeout: std::time::Duration::from_secs(u64::from(a.connect_timeout_seconds)),
        // Never on the command line (it shows in `ps`): from the environment only.
        credentials: Credentials::from_env("MSGBENCH", |k| std::env::var(k).ok()),
        tls: a.tls.files(a.tls_ca_file),
        token_placement,
        live: None,
        client: a.client,
    };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let r = rt.block_on(engine::run(w, &a.target, opts))?;
    print!("{}", report::render(&r));
    if let Some(o) = a.output {
        write(&o, &r)?;
    }
    Ok(if a.fail_if_saturated && r.generator.saturated {
        3
    } else {
        0
    })
}

/// `delete-streams`: the JSON line on stdout, the summary on stderr and in the termination log.
fn delete_streams(a: DeleteStreams, termination_log: Option<&Path>) -> anyhow::Result<u8> {
    // Never on the command line (it shows in `ps`): from the environment only.
    let auth = Credentials::from_env(&a.auth_env_prefix, |k| std::env::var(k).ok());
    let target = stream_sweep::target(&a.url, auth, &a.tls.files(a.ca_file))?;
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
