//! `kubectl msgbench` (krew naming: the binary `kubectl-msgbench` on PATH is the plugin).
#![forbid(unsafe_code)]

use anyhow::{Context, Result};
use clap::{Args, Parser, Subcommand, ValueEnum};
use kubectl_msgbench::cluster::ClusterAccess;
use kubectl_msgbench::gate_cmd::{self, GateArgs};
use kubectl_msgbench::{browser, compare, export, gate, report, source, stats};
use std::io::Read;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Parser)]
#[command(
    name = "kubectl msgbench",
    version,
    about = "Reports, exports, comparisons and CI gates of msgbench BenchmarkRuns"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
    #[command(flatten)]
    access: ClusterAccess,
}

/// Where a run is read from besides the cluster.
#[derive(Args)]
struct From {
    /// Read the run from this file instead of the cluster: a BenchmarkRun (YAML or JSON, as
    /// `kubectl get benchmarkrun X -o yaml` prints it) or a `bench-runner run --output` result.
    #[arg(long)]
    file: Option<PathBuf>,
}

#[derive(Subcommand)]
enum Command {
    /// One self-contained HTML file: latency percentiles, throughput and p99 over time, paired
    /// ratios, and the tables.
    Report {
        /// BenchmarkRun name (with --file: the name of a bench-runner result; a BenchmarkRun keeps its own).
        run: String,
        #[command(flatten)]
        from: From,
        /// Where to write the HTML.
        #[arg(short, long, default_value = "report.html")]
        output: PathBuf,
        /// Also render the page in headless Chromium and write a PNG here (e.g. a CI artifact);
        /// fails when the page logs an error or comes out blank.
        #[arg(long)]
        screenshot: Option<PathBuf>,
    },
    /// The raw figures on standard output.
    Export {
        /// BenchmarkRun name (with --file: the name of a bench-runner result; a BenchmarkRun keeps its own).
        run: String,
        #[command(flatten)]
        from: From,
        #[arg(long, value_enum)]
        format: Format,
    },
    /// Two runs' headline figures side by side with B/A (separate runs: indicative only).
    Compare {
        /// Run A: a BenchmarkRun name (with --file-a, as for report).
        run_a: String,
        /// Run B.
        run_b: String,
        /// Read run A from this file.
        #[arg(long)]
        file_a: Option<PathBuf>,
        /// Read run B from this file.
        #[arg(long)]
        file_b: Option<PathBuf>,
    },
    /// Waits until every named run has finished, then exits 0 when all passed, 1 when a run's
    /// verdict failed, 2 when a run is missing, unfinished at --timeout, or unreadable.
    Gate(GateArgs),
    /// The operator's statistics on numbers from standard input, as JSON (for bench/paired.py).
    Stats {
        #[command(subcommand)]
        what: Stats,
    },
}

#[derive(Subcommand)]
enum Stats {
    /// Paired comparisons: reads a JSON list of {"ours": [..], "theirs": [..]} (aligned by
    /// repeat; numbers or null), prints one line per comparison: {"n", "estimate", "low",
    /// "high", "min", "max"} (the 95 % Student-t interval; null where undefined).
    Paired {
        #[arg(long, value_enum)]
        kind: stats::Kind,
    },
}

#[derive(Clone, Copy, ValueEnum)]
enum Format {
    Json,
    Csv,
}

/// Errors as one line of causes (`a: b: c`), without the backtrace anyhow would print when
/// RUST_BACKTRACE is set: a plugin's user needs the reason, not the stack. The gate's errors
/// exit 2, as its undecided outcomes: 1 means a verdict failed.
#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    let cli = Cli::parse();
    let on_error = match cli.command {
        Command::Gate(_) => ExitCode::from(gate::UNDECIDED),
        _ => ExitCode::FAILURE,
    };
    match run(cli).await {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e:#}");
            on_error
        }
    }
}

async fn run(cli: Cli) -> Result<ExitCode> {
    let access = &cli.access;
    match cli.command {
        Command::Report {
            run,
            from,
            output,
            screenshot,
        } => {
            let run = source::load(&run, access, from.file.as_deref()).await?;
            let html = report::render(&run)?;
            std::fs::write(&output, &html)
                .with_context(|| format!("writing {}", output.display()))?;
            eprintln!("wrote {}", output.display());
            if let Some(png) = screenshot {
                let bytes = browser::screenshot_checked(&html, browser::SCREENSHOT_SIZE)?;
                std::fs::write(&png, bytes)
                    .with_context(|| format!("writing {}", png.display()))?;
                eprintln!("wrote {}", png.display());
            }
        }
        Command::Export { run, from, format } => {
            let run = source::load(&run, access, from.file.as_deref()).await?;
            let text = match format {
                Format::Json => export::to_json(&run)?,
                Format::Csv => export::to_csv(&run)?,
            };
            print!("{text}");
        }
        Command::Compare {
            run_a,
            run_b,
            file_a,
            file_b,
        } => {
            let a = source::load(&run_a, access, file_a.as_deref()).await?;
            let b = source::load(&run_b, access, file_b.as_deref()).await?;
            print!("{}", compare::render(&a, &b)?);
        }
        Command::Gate(args) => return Ok(ExitCode::from(gate_cmd::run(&args, access).await?)),
        Command::Stats {
            what: Stats::Paired { kind },
        } => {
            let mut input = String::new();
            std::io::stdin()
                .read_to_string(&mut input)
                .context("reading stdin")?;
            print!("{}", stats::run(kind, &input)?);
        }
    }
    Ok(ExitCode::SUCCESS)
}
