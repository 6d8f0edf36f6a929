//! `export` round-trips the status figures exactly; `compare` puts two runs side by side and
//! says why the ratio is only indicative. The binary is driven as a user runs it.
mod common;

use kubectl_msgbench::export::{to_csv, to_json, CSV_HEADER};
use kubectl_msgbench::{compare_cmd, source};
use msgbench_crds::benchmark_run::RunResult;
use std::process::Command;

fn run(fixture: &str) -> kubectl_msgbench::run_view::Run {
    source::from_file(&common::fixture(fixture)).unwrap()
}

/// Every headline figure of a CSV row equals the status value it came from, bit for bit.
fn assert_row(row: &csv::StringRecord, name: &str, r: &RunResult, trials: usize) {
    let get = |col: &str| &row[CSV_HEADER.iter().position(|c| *c == col).unwrap()];
    let f = |col: &str| get(col).parse::<f64>().unwrap();
    let u = |col: &str| get(col).parse::<u64>().unwrap();
    assert_eq!(get("variant"), name);
    assert_eq!(u("trials"), trials as u64);
    assert_eq!(f("receiveRate").to_bits(), r.receive_rate.to_bits());
    assert_eq!(f("publishRate").to_bits(), r.publish_rate.to_bits());
    assert_eq!(f("deliveredRatio").to_bits(), r.delivered_ratio.to_bits());
    let counts = [
        r.published,
        r.received,
        r.expected,
        r.errors,
        r.duplicates,
        r.out_of_order,
    ];
    let cols = [
        "published",
        "received",
        "expected",
        "errors",
        "duplicates",
        "outOfOrder",
    ];
    for (col, want) in cols.iter().zip(counts) {
        assert_eq!(u(col), want, "{col}");
    }
    let l = r.latency.as_ref().unwrap();
    let lat = [l.p50_ms, l.p90_ms, l.p95_ms, l.p99_ms, l.p999_ms, l.max_ms];
    for (col, want) in ["p50Ms", "p90Ms", "p95Ms", "p99Ms", "p999Ms", "maxMs"]
        .iter()
        .zip(lat)
    {
        assert_eq!(f(col).to_bits(), want.to_bits(), "{col}");
    }
    assert_eq!(
        get("generatorSaturated").parse::<bool>().unwrap(),
        r.generator_saturated
    );
}

fn parse_csv(text: &str) -> Vec<csv::StringRecord> {
    let mut rd = csv::Reader::from_reader(text.as_bytes());
    assert_eq!(
        rd.headers().unwrap(),
        &csv::StringRecord::from(CSV_HEADER.to_vec())
    );
    rd.records().map(Result::unwrap).collect()
}

#[test]
fn csv_round_trips_the_headline_figures_exactly() {
    let v = run("variants-run.yaml");
    let rows = parse_csv(&to_csv(&v).unwrap());
    assert_eq!(rows.len(), 2);
    for (row, var) in rows.iter().zip(&v.status.variants) {
        assert_row(row, &var.name, var.result.as_ref().unwrap(), 3);
        assert_eq!(&row[1], var.target);
    }
    let p = run("plain-run.yaml");
    let rows = parse_csv(&to_csv(&p).unwrap());
    assert_eq!(rows.len(), 1);
    assert_row(&rows[0], "nats-plain", p.status.result.as_ref().unwrap(), 3);
    let r = run("runner-result.json");
    let rows = parse_csv(&to_csv(&r).unwrap());
    assert_row(
        &rows[0],
        "runner-result",
        r.status.result.as_ref().unwrap(),
        1,
    );
}

#[test]
fn floats_with_long_expansions_survive_the_csv() {
    let mut p = run("plain-run.yaml");
    let r = p.status.result.as_mut().unwrap();
    r.receive_rate = 0.1 + 0.2;
    r.latency.as_mut().unwrap().p99_ms = 1.0 / 3.0;
    r.delivered_ratio = f64::MIN_POSITIVE;
    let rows = parse_csv(&to_csv(&p).unwrap());
    assert_row(&rows[0], "nats-plain", p.status.result.as_ref().unwrap(), 3);
}

#[test]
fn a_missing_latency_is_an_empty_cell_not_zero() {
    let mut p = run("plain-run.yaml");
    p.status.result.as_mut().unwrap().latency = None;
    let rows = parse_csv(&to_csv(&p).unwrap());
    assert_eq!(
        &rows[0][CSV_HEADER.iter().position(|c| *c == "p99Ms").unwrap()],
        ""
    );
}

#[test]
fn json_carries_the_status_figures_unchanged() {
    let v = run("variants-run.yaml");
    let json: serde_json::Value = serde_json::from_str(&to_json(&v).unwrap()).unwrap();
    let variants: Vec<msgbench_crds::benchmark_run::VariantResult> =
        serde_json::from_value(json["variants"].clone()).unwrap();
    assert_eq!(variants, v.status.variants);
    let vc = serde_json::from_value(json["variantComparison"].clone()).unwrap();
    assert_eq!(v.status.variant_comparison, Some(vc));
    assert!(json.get("result").is_none(), "no null fields: {json}");
    let p = run("plain-run.yaml");
    let json: serde_json::Value = serde_json::from_str(&to_json(&p).unwrap()).unwrap();
    assert_eq!(json["trials"].as_array().unwrap().len(), 3);
    let r: RunResult = serde_json::from_value(json["result"].clone()).unwrap();
    assert_eq!(Some(r), p.status.result);
}

#[test]
fn compare_pairs_variants_by_name_with_b_over_a_and_the_caveat() {
    let a = run("variants-run.yaml");
    let mut b = a.clone();
    b.name = "again".into();
    b.status.variants[1].result.as_mut().unwrap().receive_rate *= 2.0;
    let out = compare_cmd::render(&a, &b).unwrap();
    assert!(
        out.contains("variant r1") && out.contains("variant r2"),
        "{out}"
    );
    let r2 = &out[out.find("variant r2").unwrap()..];
    let line = r2.lines().find(|l| l.contains("receiveRate")).unwrap();
    assert!(line.trim_end().ends_with("2.000"), "{line}");
    assert!(out.contains("did not run interleaved") && out.contains("spec.variants"));
}

#[test]
fn compare_of_runs_without_shared_variants_uses_their_results() {
    let out = compare_cmd::render(&run("plain-run.yaml"), &run("runner-result.json")).unwrap();
    assert!(out.contains("\nrun\n"), "{out}");
    assert!(out.contains("indicative only"));
    let e = compare_cmd::render(&run("variants-run.yaml"), &run("plain-run.yaml")).unwrap_err();
    assert!(e.to_string().contains("variants (r1, r2)"), "{e}");
}

fn cli(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_kubectl-msgbench"))
        .args(args)
        .output()
        .unwrap()
}

#[test]
fn the_binary_exports_reports_and_refuses_a_run_without_results() {
    let f = common::fixture("variants-run.yaml");
    let f = f.to_str().unwrap();
    let out = cli(&["export", "-f", f, "-o", "csv"]);
    assert!(out.status.success(), "{out:?}");
    assert_eq!(
        String::from_utf8(out.stdout).unwrap(),
        to_csv(&run("variants-run.yaml")).unwrap()
    );

    // A bench-runner result carries no name: RUN names it.
    let rr = common::fixture("runner-result.json");
    let out = cli(&[
        "export",
        "mine",
        "--filename",
        rr.to_str().unwrap(),
        "-o",
        "csv",
    ]);
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        text.lines()
            .nth(1)
            .unwrap()
            .starts_with("mine,nats://x:4222,1,"),
        "{text}"
    );

    // kubectl's -o: the report goes to standard output in the format named.
    let out = cli(&["report", "-f", f]);
    assert!(out.status.success(), "{out:?}");
    let html = String::from_utf8(out.stdout).unwrap();
    assert!(html.contains("data-chart=\"paired-ratios\""));
    let out = cli(&["report", "-f", f, "-o", "md"]);
    let md = String::from_utf8(out.stdout).unwrap();
    assert!(md.starts_with("## msgbench report: "), "{md}");
    assert!(md.contains("| "), "tables: {md}");
    let out = cli(&["report", "-f", f, "-o", "yaml"]);
    let yaml: serde_json::Value = serde_norway::from_slice(&out.stdout).unwrap();
    assert_eq!(
        yaml,
        serde_json::from_str::<serde_json::Value>(&to_json(&run("variants-run.yaml")).unwrap())
            .unwrap()
    );

    // Several runs: one list (JSON), one table with a run column (CSV); one HTML page only.
    let plain = common::fixture("plain-run.yaml");
    let two = ["export", "-f", f, "-f", plain.to_str().unwrap()];
    let out = cli(&[&two[..], &["-o", "json"]].concat());
    let list: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(list.as_array().map(Vec::len), Some(2), "{list}");
    let out = cli(&[&two[..], &["-o", "csv"]].concat());
    let csv = String::from_utf8(out.stdout).unwrap();
    assert!(csv.starts_with("run,variant,target,"), "{csv}");
    let out = cli(&[&two[..], &["-o", "html"]].concat());
    assert!(!out.status.success());
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(
        err.contains("-o html renders one run and 2 were picked"),
        "{err}"
    );
    let out = cli(&["export", "-f", f, "-o", "pdf"]);
    assert!(!out.status.success(), "an unknown format is refused");

    let dir = tempfile::tempdir().unwrap();
    let mut br = common::plain_run();
    br.status.as_mut().unwrap().result = None;
    br.status.as_mut().unwrap().phase = Some(msgbench_crds::benchmark_run::Phase::Running);
    let pending = dir.path().join("pending.yaml");
    std::fs::write(&pending, serde_norway::to_string(&br).unwrap()).unwrap();
    let out = cli(&["export", "-f", pending.to_str().unwrap(), "-o", "json"]);
    assert!(!out.status.success());
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(
        err.contains("BenchmarkRun nats-plain has no results yet (phase Running)"),
        "{err}"
    );
    assert!(
        !err.contains("panicked") && !err.contains("backtrace"),
        "{err}"
    );
}

/// The old flags (`--file`, `--format`, `report -o FILE`) work for one minor version and say
/// on standard error what replaces them.
#[test]
fn old_flags_still_work_with_a_warning() {
    let f = common::fixture("variants-run.yaml");
    let f = f.to_str().unwrap();
    let out = cli(&["export", "x", "--file", f, "--format", "csv"]);
    assert!(out.status.success(), "{out:?}");
    assert_eq!(
        String::from_utf8(out.stdout).unwrap(),
        to_csv(&run("variants-run.yaml")).unwrap()
    );
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(err.contains("warning: --format is deprecated"), "{err}");
    assert!(err.contains("warning: --file is deprecated"), "{err}");

    let dir = tempfile::tempdir().unwrap();
    let html = dir.path().join("r.html");
    let out = cli(&["report", "x", "--file", f, "-o", html.to_str().unwrap()]);
    assert!(out.status.success(), "{out:?}");
    assert!(out.stdout.is_empty());
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(
        err.contains("warning: report -o FILE is deprecated"),
        "{err}"
    );
    assert!(std::fs::read_to_string(&html)
        .unwrap()
        .contains("data-chart=\"paired-ratios\""));
}
