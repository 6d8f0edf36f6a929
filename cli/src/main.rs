//! `kubectl msgbench` (krew naming: the binary `kubectl-msgbench` on PATH is the plugin).
#![forbid(unsafe_code)]

use anyhow::{Context, Result};
use clap::{Args, Parser, Subcommand};
use kubectl_msgbench::gate_cmd::{self, GateArgs};
use kubectl_msgbench::kube_flags::ClusterAccess;
use kubectl_msgbench::output::{self, Format, Picked, ReportOutput};
use kubectl_msgbench::selection::{self, Filenames, Selector};
use kubectl_msgbench::{browser, compare_cmd, gate, source, stats_cmd};
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

/// The runs `report` and `export` read: names, files or a selector.
#[derive(Args)]
struct Pick {
    /// BenchmarkRun names (with one -f: the name of a bench-runner result; a BenchmarkRun
    /// keeps its own).
    #[arg(value_name = "RUN")]
    runs: Vec<String>,
    #[command(flatten)]
    files: Filenames,
    #[command(flatten)]
    select: Selector,
}

#[derive(Subcommand)]
enum Command {
    /// A run's report on standard output: by default one self-contained HTML page (latency
    /// percentiles, throughput and p99 over time, paired ratios, and the tables).
    Report {
        #[command(flatten)]
        pick: Pick,
        /// Output format: html, md, json, yaml or csv.
        #[arg(short, long, value_name = "FORMAT", default_value = "html", value_parser = output::parse_report_output)]
        output: ReportOutput,
        /// Also render the page in headless Chromium and write a PNG here (e.g. a CI artifact);
        /// fails when the page logs an error or comes out blank.
        #[arg(long)]
        screenshot: Option<PathBuf>,
    },
    /// The raw figures on standard output: JSON by default.
    Export {
        #[command(flatten)]
        pick: Pick,
        /// Output format: json, yaml, csv, md or html.
        #[arg(short, long, value_enum, value_name = "FORMAT")]
        output: Option<Format>,
        /// Deprecated spelling of -o.
        #[arg(long, value_enum, hide = true, conflicts_with = "output")]
        format: Option<Format>,
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
        kind: stats_cmd::Kind,
    },
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
            pick,
            output,
            screenshot,
        } => report(pick, output, screenshot, access).await?,
        Command::Export {
            pick,
            output,
            format,
        } => {
            if format.is_some() {
                selection::deprecated("--format", "-o/--output");
            }
            let format = output.or(format).unwrap_or(Format::Json);
            let picked = pick_runs(&pick, access).await?;
            print!("{}", output::render(&picked, format)?);
        }
        Command::Compare {
            run_a,
            run_b,
            file_a,
            file_b,
        } => {
            let a = source::load(&run_a, access, file_a.as_deref()).await?;
            let b = source::load(&run_b, access, file_b.as_deref()).await?;
            print!("{}", compare_cmd::render(&a, &b)?);
        }
        Command::Gate(args) => return Ok(ExitCode::from(gate_cmd::run(&args, access).await?)),
        Command::Stats {
            what: Stats::Paired { kind },
        } => {
            let mut input = String::new();
            std::io::stdin()
                .read_to_string(&mut input)
                .context("reading stdin")?;
            print!("{}", stats_cmd::run(kind, &input)?);
        }
    }
    Ok(ExitCode::SUCCESS)
}

async fn pick_runs(pick: &Pick, access: &ClusterAccess) -> Result<Picked> {
    output::pick(&pick.runs, &pick.files.paths(), &pick.select, access).await
}

/// `report`: the format on standard output, or (deprecated `-o FILE`) HTML into that file.
async fn report(
    pick: Pick,
    output: ReportOutput,
    screenshot: Option<PathBuf>,
    access: &ClusterAccess,
) -> Result<()> {
    let picked = pick_runs(&pick, access).await?;
    let (format, file) = match output {
        ReportOutput::Format(f) => (f, None),
        ReportOutput::LegacyFile(path) => {
            selection::deprecated("report -o FILE", "-o html > FILE");
            (Format::Html, Some(path))
        }
    };
    if screenshot.is_some() && format != Format::Html {
        anyhow::bail!("--screenshot renders the HTML report: use it with -o html");
    }
    let text = output::render(&picked, format)?;
    match &file {
        Some(path) => {
            std::fs::write(path, &text).with_context(|| format!("writing {}", path.display()))?;
            eprintln!("wrote {}", path.display());
        }
        None => print!("{text}"),
    }
    if let Some(png) = screenshot {
        let bytes = browser::screenshot_checked(&text, browser::SCREENSHOT_SIZE)?;
        std::fs::write(&png, bytes).with_context(|| format!("writing {}", png.display()))?;
        eprintln!("wrote {}", png.display());
    }
    Ok(())
}
