//! The Grafana dashboard (config/dashboards/msgbench-operator.json) graphs only metrics msgbench
//! really exports: every metric name in every PromQL expression (panel targets and template
//! variable queries) must be a series of the operator's registry or of a runner's live one
//! (`bench_runner::live_metrics`), with each labelled family touched once through its public
//! methods so it shows in `gather()`. Histograms are
//! series only as `_bucket`, `_sum` and `_count`. The process series (`process_*`) come from
//! the standard process collector beside the `msgbench_` registry (`Metrics::gather`).
use msgbench_crds::benchmark_run::{LatencySummary, RunResult, Verdict};
use msgbench_operator::benchmark_run::metrics as run_metrics;
use msgbench_operator::runtime::metrics::Metrics;
use prometheus::proto::{MetricFamily, MetricType};
use serde_json::Value;
use std::collections::BTreeSet;
use std::path::PathBuf;
use std::sync::OnceLock;

fn dashboard_path() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../config/dashboards/msgbench-operator.json")
}

/// Series names on the operator's `/metrics` and a runner's. Built once: the BenchmarkRun gauges register in
/// the first registry that observes a run (a process-wide `OnceLock`).
fn exported() -> &'static BTreeSet<String> {
    static NAMES: OnceLock<BTreeSet<String>> = OnceLock::new();
    NAMES.get_or_init(|| {
        let metrics = Metrics::default();
        drop(metrics.reconcile_started("JetStreamCluster")); // counter + histogram observation
        metrics.reconcile_failed("JetStreamCluster", "Kube");
        metrics.child_written("StatefulSet", "apply");
        metrics.status_written("JetStreamCluster");
        msgbench_operator::runtime::leader::ElectionMetrics::register(&metrics);
        let result = RunResult {
            receive_rate: 1000.0,
            latency: Some(LatencySummary {
                p50_ms: 1.0,
                p99_ms: 2.0,
                ..LatencySummary::default()
            }),
            ..RunResult::default()
        };
        let verdict = Verdict {
            reason: "Succeeded".into(),
            message: None,
        };
        run_metrics::observe(
            &metrics.registry,
            "ns",
            "run",
            ("", i64::MAX),
            &result,
            true,
        );
        trend_of_a_finished_run(&metrics, result, verdict);
        // A runner's: one trial's series exist (at 0) once the trial starts.
        let runner = bench_runner::live_metrics::LiveMetrics::default();
        runner.trial(1, "", 1);
        series_names(
            metrics
                .gather()
                .into_iter()
                .chain(runner.registry().gather()),
        )
    })
}

/// A finished run of a labelled benchmark, so the trend series exist.
fn trend_of_a_finished_run(metrics: &Metrics, result: RunResult, verdict: Verdict) {
    use msgbench_crds::benchmark_run::{BenchmarkRun, BenchmarkRunStatus, Phase};
    let run: BenchmarkRun = serde_json::from_value(serde_json::json!({
        "apiVersion": "msgbench.dev/v1alpha1", "kind": "BenchmarkRun",
        "metadata": {"name": "nightly-1", "namespace": "ns",
                     "labels": {"msgbench.dev/benchmark": "nightly"}},
        "spec": {"target": {"serverRef": {"kind": "JetStreamCluster", "name": "js"}},
                 "workload": {"protocol": "nats"}}
    }))
    .expect("a BenchmarkRun");
    let status = BenchmarkRunStatus {
        phase: Some(Phase::Succeeded),
        completion_time: serde_json::from_value(serde_json::json!("2026-11-26T00:00:00Z")).ok(),
        verdict: Some(verdict),
        result: Some(RunResult {
            delivery_rate: Some(result.receive_rate),
            ..result
        }),
        ..BenchmarkRunStatus::default()
    };
    msgbench_operator::benchmark_run::metrics::trend::observe_run(&metrics.registry, &run, &status);
}

/// The series names of `families`: a histogram's `_bucket`, `_sum`, `_count`, a summary's too.
/// A family whose HELP says it is deprecated (an old name kept for one minor version) is left
/// out: the dashboard must use the current names.
fn series_names(families: impl Iterator<Item = MetricFamily>) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    for family in families.filter(|f| !f.help().starts_with("Deprecated")) {
        let name = family.name();
        match family.get_field_type() {
            MetricType::HISTOGRAM => {
                names.extend(["_bucket", "_sum", "_count"].map(|s| format!("{name}{s}")))
            }
            MetricType::SUMMARY => {
                names.extend(["", "_sum", "_count"].map(|s| format!("{name}{s}")))
            }
            _ => {
                names.insert(name.to_string());
            }
        }
    }
    names
}

/// PromQL keywords that are neither metric nor function names.
const KEYWORDS: &[&str] = &[
    "and",
    "or",
    "unless",
    "bool",
    "offset",
    "by",
    "without",
    "on",
    "ignoring",
    "group_left",
    "group_right",
    "inf",
    "nan",
];
/// Followed by a parenthesised list of label names, not an expression.
const LABEL_LISTS: &[&str] = &[
    "by",
    "without",
    "on",
    "ignoring",
    "group_left",
    "group_right",
];

/// Metric names in one PromQL expression: identifiers outside label matchers (`{…}`), ranges
/// (`[…]`), strings, label lists (`by (…)`), Grafana variables (`$x`, `${x}`) and numbers, that
/// are not keywords and not function calls.
fn metric_names(expr: &str) -> Vec<String> {
    let chars: Vec<char> = expr.chars().collect();
    let ident = |c: char| c.is_ascii_alphanumeric() || c == '_' || c == ':';
    let skip_to = |mut i: usize, close: char| {
        while i < chars.len() && chars[i] != close {
            if chars[i] == '"' || chars[i] == '\'' || chars[i] == '`' {
                let q = chars[i];
                i += 1;
                while i < chars.len() && chars[i] != q {
                    i += if chars[i] == '\\' { 2 } else { 1 };
                }
            }
            i += 1;
        }
        i + 1
    };
    let mut names = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        match c {
            '{' => i = skip_to(i + 1, '}'),
            '[' => i = skip_to(i + 1, ']'),
            '"' | '\'' | '`' => i = skip_to(i + 1, c),
            '$' => {
                i += 1;
                if chars.get(i) == Some(&'{') {
                    i = skip_to(i + 1, '}');
                }
                while i < chars.len() && ident(chars[i]) {
                    i += 1;
                }
            }
            c if c.is_ascii_digit()
                || (c == '.' && chars.get(i + 1).is_some_and(char::is_ascii_digit)) =>
            {
                // Numbers and durations: 0.99, 1e3, 5m.
                while i < chars.len() && (ident(chars[i]) || chars[i] == '.') {
                    i += 1;
                }
            }
            c if ident(c) => {
                let start = i;
                while i < chars.len() && ident(chars[i]) {
                    i += 1;
                }
                let word: String = chars[start..i].iter().collect();
                let mut next = i;
                while next < chars.len() && chars[next].is_whitespace() {
                    next += 1;
                }
                // An aggregation may put its label list first: `sum by (kind) (…)`.
                let rest: String = chars[next..].iter().collect();
                let call = chars.get(next) == Some(&'(')
                    || ["by", "without"].iter().any(|k| {
                        rest.strip_prefix(k)
                            .is_some_and(|r| r.trim_start().starts_with('('))
                    });
                if LABEL_LISTS.contains(&word.as_str()) && call {
                    i = skip_to(next + 1, ')');
                } else if !call && !KEYWORDS.contains(&word.to_ascii_lowercase().as_str()) {
                    names.push(word);
                }
            }
            _ => i += 1,
        }
    }
    names
}

/// Every PromQL text in the dashboard: each `expr`, and each query variable's query (Grafana's
/// `label_values(metric, label)` names a label second, so only its first argument counts).
fn expressions(dashboard: &Value) -> Vec<String> {
    fn walk(v: &Value, out: &mut Vec<String>) {
        match v {
            Value::Object(m) => {
                for (k, v) in m {
                    match (k.as_str(), v) {
                        ("expr", Value::String(s)) => out.push(s.clone()),
                        _ => walk(v, out),
                    }
                }
            }
            Value::Array(a) => a.iter().for_each(|v| walk(v, out)),
            _ => {}
        }
    }
    let mut out = Vec::new();
    walk(dashboard, &mut out);
    let variables = dashboard["templating"]["list"].as_array().cloned();
    for var in variables.unwrap_or_default() {
        if var["type"] != "query" {
            continue;
        }
        let query = var["query"]["query"].as_str().or(var["query"].as_str());
        let query = query.unwrap_or_default().trim();
        match query
            .strip_prefix("label_values(")
            .and_then(|q| q.strip_suffix(')'))
        {
            // label_values(label): no metric; label_values(metric, label): the metric.
            Some(args) => {
                if let Some((metric, _label)) = args.rsplit_once(',') {
                    out.push(metric.to_string());
                }
            }
            None => out.push(query.to_string()),
        }
    }
    out
}

/// (expression, name) for every name the registry does not export.
fn unknown_names(dashboard: &Value, known: &BTreeSet<String>) -> Vec<(String, String)> {
    let mut unknown = Vec::new();
    for expr in expressions(dashboard) {
        for name in metric_names(&expr) {
            if !known.contains(&name) {
                unknown.push((expr.clone(), name));
            }
        }
    }
    unknown
}

fn load_dashboard() -> Value {
    let path = dashboard_path();
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{} is not JSON: {e}", path.display()))
}

#[test]
fn every_metric_on_the_dashboard_is_exported_by_the_operator() {
    let dashboard = load_dashboard();
    let known = exported();
    let exprs = expressions(&dashboard);
    assert!(exprs.len() >= 10, "only {} expressions found", exprs.len());
    for expr in &exprs {
        assert!(
            !metric_names(expr).is_empty(),
            "no metric name found in {expr:?}: the extractor or the expression is wrong"
        );
    }
    let unknown = unknown_names(&dashboard, known);
    assert!(
        unknown.is_empty(),
        "the dashboard uses metrics the operator does not export:\n{}\nexported: {known:?}",
        unknown
            .iter()
            .map(|(e, n)| format!("  {n} in {e}"))
            .collect::<Vec<_>>()
            .join("\n")
    );
}

#[test]
fn the_registry_exports_the_families_the_dashboard_needs() {
    // Guards the check above against a registry that gathers nothing (then every name would be
    // unknown, but an empty `known` must not be mistaken for a broken dashboard either).
    let known = exported();
    for name in [
        "msgbench_reconcile_total",
        "msgbench_reconcile_duration_seconds_bucket",
        "msgbench_benchmark_passed",
        "msgbench_benchmark_latency_seconds",
        "msgbench_benchmark_receive_rate_messages_per_second",
        "msgbench_benchmark_trend_latency_seconds",
        // The standard process collector's, unprefixed.
        "process_resident_memory_bytes",
        "process_cpu_seconds_total",
        "process_open_fds",
        "process_start_time_seconds",
        // A runner's live series.
        "msgbench_runner_messages_sent_total",
        "msgbench_runner_messages_received_total",
        "msgbench_runner_errors_total",
        "msgbench_runner_send_lag_seconds_total",
        "msgbench_runner_generator_lag_seconds",
        "msgbench_runner_latency_seconds_bucket",
    ] {
        assert!(known.contains(name), "{name} not gathered: {known:?}");
    }
    assert!(
        !known.contains("msgbench_reconcile_duration_seconds"),
        "a histogram has no series under its bare name"
    );
    assert!(
        !known.contains("msgbench_benchmark_latency_p99_seconds"),
        "a deprecated name is not one the dashboard may use"
    );
}

#[test]
fn an_unknown_or_misspelt_metric_is_reported() {
    let dashboard = serde_json::json!({
        "panels": [{"targets": [
            {"expr": "sum by (kind) (rate(msgbench_reconcile_total[$__rate_interval]))"},
            {"expr": "rate(msgbench_reconcile_totals[5m])"},
            {"expr": "msgbench_reconcile_duration_seconds"},
        ]}],
        "templating": {"list": [
            {"type": "query", "query": {"query": "label_values(msgbench_nope, namespace)"}},
            {"type": "datasource", "query": "prometheus"},
        ]},
    });
    let unknown: Vec<String> = unknown_names(&dashboard, exported())
        .into_iter()
        .map(|(_, n)| n)
        .collect();
    assert_eq!(
        unknown,
        [
            "msgbench_reconcile_totals",
            "msgbench_reconcile_duration_seconds",
            "msgbench_nope"
        ]
    );
}

#[test]
fn names_are_found_outside_labels_functions_strings_and_variables() {
    let expr = r#"histogram_quantile(0.99, sum by (kind, le) (rate(a_bucket{kind=~"x|y", error!="by"}[$__rate_interval] offset 5m)))
        / on (kind) group_left (verb) b:recorded_total * 1e3 > bool ${threshold} unless c"#;
    assert_eq!(metric_names(expr), ["a_bucket", "b:recorded_total", "c"]);
    assert_eq!(
        metric_names("sum(rate(x[5m])) by (kind) / ignoring(le) y"),
        ["x", "y"]
    );
}
