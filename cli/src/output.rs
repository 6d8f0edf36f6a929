//! `-o FORMAT` of `report` and `export`, as kubectl's `-o`: the format, never a file; output
//! goes to standard output (redirect it to keep a file). Which runs: [`Picked`].
use anyhow::{bail, Context, Result};
use std::path::PathBuf;

use crate::kube_flags::ClusterAccess;
use crate::run_view::Run;
use crate::selection::{self, Selector};
use crate::{export, report_cmd, source};

/// What `-o` names.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// The figures from status, as JSON (a list when -l or several runs pick them).
    Json,
    /// The same as YAML.
    Yaml,
    /// Headline figures, one row per variant (and a `run` column for several runs).
    Csv,
    /// The self-contained HTML report with charts (one run).
    Html,
    /// The report's tables as Markdown (for a pull-request comment).
    Md,
}

/// `report -o`: a format, or (deprecated: before kubectl's meaning) the HTML file to write.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ReportOutput {
    Format(Format),
    LegacyFile(PathBuf),
}

/// Reads `report -o`: a format name; a value naming a file (with a `.` or `/`) is the old
/// meaning, kept for one minor version.
pub fn parse_report_output(text: &str) -> Result<ReportOutput, String> {
    use clap::ValueEnum;
    if let Ok(f) = Format::from_str(text, true) {
        return Ok(ReportOutput::Format(f));
    }
    if text.contains('.') || text.contains('/') {
        return Ok(ReportOutput::LegacyFile(PathBuf::from(text)));
    }
    Err(format!(
        "-o takes a format: json, yaml, csv, html or md (got {text:?})"
    ))
}

/// The runs a `report` or `export` names: `many` when the output is a list (a selector, or
/// more than one run), so a script reads one shape whatever matched.
pub struct Picked {
    pub runs: Vec<Run>,
    pub many: bool,
}

/// Loads the runs named (`names`), read from `files`, or matched by `sel`.
pub async fn pick(
    names: &[String],
    files: &[PathBuf],
    sel: &Selector,
    access: &ClusterAccess,
) -> Result<Picked> {
    let runs = match (names, files, &sel.selector) {
        ([], [], None) => bail!("name a run, give -f/--filename or -l/--selector"),
        (_, [_, ..], Some(_)) | ([_, ..], _, Some(_)) => {
            bail!("-l/--selector picks the runs: give no names or files with it")
        }
        (_, [], Some(labels)) => {
            let conn = access.connect().await?;
            let listed = selection::list(&conn, sel).await?;
            if listed.is_empty() {
                let at = selection::where_(&conn, sel);
                bail!("no BenchmarkRun matches -l {labels} {at}");
            }
            let mut runs = Vec::with_capacity(listed.len());
            for br in listed {
                let name = selection::display_name(&br, sel);
                let mut run = Run::from_benchmark_run(br);
                run.name = name;
                run.require_results()?;
                runs.push(run);
            }
            return Ok(Picked { runs, many: true });
        }
        ([name], [file], None) => vec![source::load(name, access, Some(file)).await?],
        ([_, _, ..], [_, ..], None) => {
            bail!("with -f, name at most one run (a bench-runner result's name)")
        }
        (_, [_, ..], None) => {
            let mut runs = Vec::with_capacity(files.len());
            for f in files {
                let run = source::from_file(f)?;
                run.require_results()?;
                runs.push(run);
            }
            runs
        }
        (names, [], None) => {
            let mut runs = Vec::with_capacity(names.len());
            for n in names {
                runs.push(source::load(n, access, None).await?);
            }
            runs
        }
    };
    let many = runs.len() > 1;
    Ok(Picked { runs, many })
}

/// `picked` in `format`.
pub fn render(picked: &Picked, format: Format) -> Result<String> {
    let runs = &picked.runs;
    Ok(match format {
        Format::Json | Format::Yaml => {
            let value = if picked.many {
                serde_json::Value::Array(runs.iter().map(export::to_value).collect())
            } else {
                export::to_value(&runs[0])
            };
            match format {
                Format::Json => serde_json::to_string_pretty(&value)? + "\n",
                _ => serde_norway::to_string(&value).context("writing YAML")?,
            }
        }
        Format::Csv if picked.many => export::to_csv_many(runs)?,
        Format::Csv => export::to_csv(&runs[0])?,
        Format::Html => match runs.as_slice() {
            [run] => report_cmd::render(run)?,
            _ => bail!(
                "-o html renders one run and {} were picked: name one, or use -o md",
                runs.len()
            ),
        },
        Format::Md => (runs.iter())
            .map(report_cmd::render_markdown)
            .collect::<Vec<_>>()
            .join("\n"),
    })
}
