//! `kubectl msgbench gate RUN...` (or `-l SELECTOR`, `-A`): reads the runs until every one is
//! finished or the deadline passes (or, with `-f`, once from files), lets [`gate::decide`] judge them,
//! prints its lines and writes the JUnit and Markdown files. Exit 0: every run passed; 1: a
//! run's verdict failed; 2: a run missing, unfinished at the deadline, or unreadable.
use anyhow::{bail, Context, Result};
use k8s_openapi::jiff::SignedDuration;
use msgbench_crds::benchmark_run::BenchmarkRun;
use std::path::{Path, PathBuf};
use std::time::Duration;
use tokio::time::Instant;

use crate::gate::{self, decide, Fetched, GateOutcome, Observed, UNDECIDED};
use crate::kube_flags::{ClusterAccess, Connection};
use crate::run_view::Run;
use crate::selection::{self, Filenames, Selector};
use crate::{junit, source, summary};

/// One API request's limit: a hung connection must not outlast the deadline by much.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);
/// The shortest interval between reads, whatever `--interval` says.
const MIN_INTERVAL: Duration = Duration::from_millis(100);

#[derive(clap::Args, Debug)]
pub struct GateArgs {
    /// BenchmarkRun names, in the namespace `-n` picks.
    #[arg(value_name = "RUN", required_unless_present_any = ["filename", "file", "selector"])]
    pub runs: Vec<String>,
    /// Judge the BenchmarkRuns in these files instead (read once: no waiting). Every run -l
    /// matches (-A: in every namespace) must pass: one JUnit testsuite per run.
    #[command(flatten)]
    pub files: Filenames,
    #[command(flatten)]
    pub select: Selector,
    /// How long to wait for every run to finish, e.g. 90s, 20m, 1h30m (0: look once).
    #[arg(long, default_value = "20m", value_parser = parse_duration)]
    pub timeout: Duration,
    /// How often the runs are read while waiting.
    #[arg(long, default_value = "5s", value_parser = parse_duration)]
    pub interval: Duration,
    /// Also write the outcome as JUnit XML: a testsuite per run, a testcase per threshold.
    #[arg(long, value_name = "FILE.xml")]
    pub junit: Option<PathBuf>,
    /// Also write a Markdown summary for a pull-request comment or CI job summary.
    #[arg(long, value_name = "FILE.md")]
    pub summary: Option<PathBuf>,
}

/// Runs the gate; the exit code is the decision's. An error (no cluster access, a file that
/// cannot be written) is the caller's to turn into exit 2.
pub async fn run(args: &GateArgs, access: &ClusterAccess) -> Result<u8> {
    let files = args.files.paths();
    let picks = [
        !args.runs.is_empty(),
        !files.is_empty(),
        args.select.selector.is_some(),
    ];
    if picks.iter().filter(|p| **p).count() > 1 {
        bail!("name runs, -f/--filename files or a -l/--selector: one of the three");
    }
    let (runs, outcome, deadline_passed) = if files.is_empty() {
        wait(args, access).await?
    } else {
        let runs: Vec<Observed> = files.iter().map(|p| from_file(p)).collect();
        // A file does not change: a run it shows unfinished stays so, and the gate cannot
        // decide (not a timeout: nothing was waited for).
        let mut outcome = decide(&runs, false);
        outcome.code.get_or_insert(UNDECIDED);
        (runs, outcome, false)
    };
    for l in &outcome.lines {
        println!("{l}");
    }
    write_outputs(args, &runs, &outcome, deadline_passed)?;
    Ok(outcome.code.unwrap_or(UNDECIDED)) // `wait` returns only with a code
}

fn write_outputs(
    args: &GateArgs,
    runs: &[Observed],
    outcome: &GateOutcome,
    deadline_passed: bool,
) -> Result<()> {
    if let Some(path) = &args.junit {
        write(path, &junit::render(runs, deadline_passed)?)?;
    }
    if let Some(path) = &args.summary {
        write(path, &summary::render(runs, outcome))?;
    }
    Ok(())
}

fn write(path: &Path, text: &str) -> Result<()> {
    std::fs::write(path, text).with_context(|| format!("writing {}", path.display()))?;
    eprintln!("wrote {}", path.display());
    Ok(())
}

/// A BenchmarkRun from a file, named as it names itself; an unreadable file is named by its
/// path. A bench-runner result has figures but no verdict or thresholds: nothing to gate on.
fn from_file(path: &Path) -> Observed {
    let unreadable = |message: String| Observed {
        name: path.display().to_string(),
        fetched: Fetched::Error {
            message,
            retry: false,
        },
    };
    match source::from_file(path) {
        Ok(run) if run.origin == source::RUNNER_RESULT_ORIGIN => unreadable(format!(
            "{} is a bench-runner result: it has no verdict or thresholds to gate on",
            path.display()
        )),
        Ok(run) => Observed {
            name: run.name.clone(),
            fetched: Fetched::Found(Box::new(run)),
        },
        Err(e) => unreadable(format!("{e:#}")),
    }
}

/// Reads every unfinished run each `--interval` until [`decide`] answers; the last read is
/// at or after the deadline, so a run that finished just before it is seen finished.
async fn wait(
    args: &GateArgs,
    access: &ClusterAccess,
) -> Result<(Vec<Observed>, GateOutcome, bool)> {
    let conn = access.connect().await?;
    let api: kube::Api<BenchmarkRun> = kube::Api::namespaced(conn.client.clone(), &conn.namespace);
    let deadline = Instant::now() + args.timeout;
    let not_read = Fetched::Error {
        message: "not read yet".into(),
        retry: true,
    };
    let mut runs: Vec<Observed> = (args.runs.iter())
        .map(|name| Observed {
            name: name.clone(),
            fetched: not_read.clone(),
        })
        .collect();
    let mut shown: Vec<String> = vec![];
    // On the first read an error is a setup problem (address, credentials): not retried.
    let mut retry = false;
    loop {
        if args.select.selector.is_some() {
            read_selected(&conn, &args.select, &mut runs, retry).await?;
        }
        for o in runs.iter_mut().filter(|_| args.select.selector.is_none()) {
            if !gate::judge(&o.fetched).finished() {
                o.fetched = fetch(&api, &conn.namespace, &o.name, retry).await;
            }
        }
        retry = true;
        let deadline_passed = Instant::now() >= deadline;
        let outcome = decide(&runs, deadline_passed);
        if outcome.code.is_some() {
            return Ok((runs, outcome, deadline_passed));
        }
        progress(&outcome.lines, &mut shown);
        let left = deadline.saturating_duration_since(Instant::now());
        tokio::time::sleep(args.interval.max(MIN_INTERVAL).min(left)).await;
    }
}

/// Reads every run `-l` matches in one list request. A run seen before and gone since is
/// missing; a failed list keeps what was seen (retried until the deadline) except on the first
/// read, where it is a setup problem. No match at all on the first read is an error: the gate
/// never passes on nothing.
async fn read_selected(
    conn: &Connection,
    sel: &Selector,
    runs: &mut Vec<Observed>,
    retry: bool,
) -> Result<()> {
    let listed = match selection::list(conn, sel).await {
        Ok(listed) => listed,
        Err(e) if retry => {
            for o in runs
                .iter_mut()
                .filter(|o| !gate::judge(&o.fetched).finished())
            {
                o.fetched = Fetched::Error {
                    message: format!("{e:#}"),
                    retry: true,
                };
            }
            return Ok(());
        }
        Err(e) => return Err(e),
    };
    if listed.is_empty() && !retry {
        bail!(
            "no BenchmarkRun matches -l {} {}",
            sel.selector.as_deref().unwrap_or_default(),
            selection::where_(conn, sel)
        );
    }
    let mut seen: Vec<Observed> = (listed.into_iter())
        .map(|br| Observed {
            name: selection::display_name(&br, sel),
            fetched: Fetched::Found(Box::new(Run::from_benchmark_run(br))),
        })
        .collect();
    let gone: Vec<Observed> = (runs.iter())
        .filter(|o| !seen.iter().any(|s| s.name == o.name))
        .map(|o| Observed {
            name: o.name.clone(),
            fetched: Fetched::Missing(format!(
                "BenchmarkRun {} matched -l before and is gone",
                o.name
            )),
        })
        .collect();
    seen.extend(gone);
    *runs = seen;
    Ok(())
}

/// Reads one run; `retry` whether an error that may pass (no answer, overload) is retried.
async fn fetch(api: &kube::Api<BenchmarkRun>, namespace: &str, name: &str, retry: bool) -> Fetched {
    let what = format!("reading BenchmarkRun {name} in namespace {namespace}");
    match tokio::time::timeout(REQUEST_TIMEOUT, api.get_opt(name)).await {
        Ok(Ok(Some(br))) => Fetched::Found(Box::new(Run::from_benchmark_run(br))),
        Ok(Ok(None)) => {
            Fetched::Missing(format!("no BenchmarkRun {name} in namespace {namespace}"))
        }
        Ok(Err(e)) => Fetched::Error {
            retry: retry && transient(&e),
            message: format!("{what}: {}", api_error(e)),
        },
        Err(_) => Fetched::Error {
            message: format!("{what}: no answer within {}s", REQUEST_TIMEOUT.as_secs()),
            retry,
        },
    }
}

/// Errors a later request may not get: the connection, the server being overloaded or
/// restarting. A refusal (401, 403), a bad request or a response that does not parse is final.
fn transient(e: &kube::Error) -> bool {
    match e {
        kube::Error::Api(s) => s.code == 429 || s.code >= 500,
        kube::Error::HyperError(_) | kube::Error::Service(_) => true,
        _ => false,
    }
}

/// The API server's own words for a Status error, else the error with its causes (each
/// once: kube's and hyper's errors repeat their source in their own text).
fn api_error(e: kube::Error) -> String {
    if let kube::Error::Api(s) = &e {
        return format!("{} ({} {})", s.message, s.code, s.reason);
    }
    let mut out = e.to_string();
    let mut source = std::error::Error::source(&e);
    while let Some(s) = source {
        let text = s.to_string();
        if !out.contains(&text) {
            out = format!("{out}: {text}");
        }
        source = s.source();
    }
    out
}

/// Prints a run's line on standard error when it changes, so a CI log shows the progress.
fn progress(lines: &[String], shown: &mut Vec<String>) {
    for l in lines {
        if !shown.contains(l) {
            eprintln!("gate: {l}");
        }
    }
    *shown = lines.to_vec();
}

/// A Go-style duration as `kubectl wait --timeout` takes it (`90s`, `20m`, `1h30m`); `0` alone
/// is allowed, as there.
pub fn parse_duration(text: &str) -> Result<Duration> {
    if text.trim() == "0" {
        return Ok(Duration::ZERO);
    }
    let d: SignedDuration = text
        .trim()
        .parse()
        .with_context(|| format!("{text:?} is not a duration such as 90s, 20m or 1h30m"))?;
    if d.is_negative() {
        bail!("{text:?}: a duration cannot be negative");
    }
    Ok(d.unsigned_abs())
}

#[cfg(test)]
mod tests {
    use super::parse_duration;
    use std::time::Duration;

    #[test]
    fn durations_read_as_kubectl_wait_reads_them() {
        let s = Duration::from_secs;
        assert_eq!(parse_duration("20m").unwrap(), s(1200));
        assert_eq!(parse_duration("90s").unwrap(), s(90));
        assert_eq!(parse_duration("1h30m").unwrap(), s(5400));
        assert_eq!(parse_duration("0").unwrap(), s(0));
        assert_eq!(parse_duration("250ms").unwrap(), Duration::from_millis(250));
        assert!(parse_duration("soon").is_err());
        assert!(parse_duration("-5s").is_err());
    }
}
