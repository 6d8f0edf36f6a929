use super::*;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use msgbench_crds::benchmark_run::{LatencySummary, VariantResult, Verdict};

fn run(labels: &[(&str, &str)], generate_name: Option<&str>, ns: &str) -> BenchmarkRun {
    let mut br: BenchmarkRun = serde_json::from_value(serde_json::json!({
        "apiVersion": "msgbench.dev/v1alpha1", "kind": "BenchmarkRun",
        "metadata": {"name": "nightly-x7k2p", "namespace": ns},
        "spec": {"target": {"serverRef": {"kind": "JetStreamCluster", "name": "js"}},
                 "workload": {"protocol": "nats"}}
    }))
    .unwrap();
    br.metadata.generate_name = generate_name.map(String::from);
    br.metadata.labels = Some(
        labels
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
    );
    br
}

fn finished(at_ms: i64, rate: f64, phase: Phase) -> BenchmarkRunStatus {
    BenchmarkRunStatus {
        phase: Some(phase),
        completion_time: Some(Time(
            k8s_openapi::jiff::Timestamp::from_millisecond(at_ms).unwrap(),
        )),
        verdict: Some(Verdict {
            reason: "Test".into(),
            message: None,
        }),
        variants: [("r1", rate), ("r2", rate / 2.0)]
            .map(|(name, rate)| VariantResult {
                name: name.into(),
                result: Some(RunResult {
                    receive_rate: rate,
                    delivery_rate: Some(rate),
                    latency: Some(LatencySummary {
                        p99_ms: 4.0,
                        ..LatencySummary::default()
                    }),
                    ..RunResult::default()
                }),
                ..VariantResult::default()
            })
            .into(),
        ..BenchmarkRunStatus::default()
    }
}

#[test]
fn the_benchmark_name_is_the_label_else_the_generate_name_never_the_object_name() {
    let labelled = run(&[(BENCHMARK_LABEL, "r1-vs-r2")], Some("nightly-"), "ns");
    assert_eq!(benchmark_name(&labelled).as_deref(), Some("r1-vs-r2"));
    let generated = run(&[], Some("nightly-"), "ns");
    assert_eq!(benchmark_name(&generated).as_deref(), Some("nightly"));
    assert_eq!(benchmark_name(&run(&[], None, "ns")), None);
}

#[test]
fn only_a_finished_run_gives_points_one_per_variant() {
    let mut st = finished(1_700_000_000_000, 1000.0, Phase::Succeeded);
    let pts = points(&st);
    assert_eq!(pts.len(), 2);
    assert_eq!(
        (pts[1].variant.as_str(), pts[1].delivery_rate),
        ("r2", Some(500.0))
    );
    assert_eq!((pts[0].p99_seconds, pts[0].passed), (Some(0.004), true));
    assert_eq!(pts[0].finished_seconds, 1_700_000_000.0);
    st.phase = Some(Phase::Running);
    assert!(points(&st).is_empty(), "a running run is not a trend point");
}

/// The trend series as scraped (they live in the first registry any test gave them).
fn render() -> String {
    let g = TREND_GAUGES
        .get()
        .and_then(Option::as_ref)
        .expect("trend gauges");
    crate::benchmark_run::metrics::render_families(&g.all())
}

#[test]
fn the_latest_finished_run_wins_and_an_older_one_changes_nothing() {
    let reg = Registry::new();
    let br = run(&[(BENCHMARK_LABEL, "trend-order")], None, "ns-trend");
    observe_run(&reg, &br, &finished(2_000_000, 900.0, Phase::Succeeded));
    // An older run of the same benchmark, reconciled later (e.g. after a restart).
    observe_run(&reg, &br, &finished(1_000_000, 100.0, Phase::Failed));
    let text = render();
    let l = r#"{benchmark="trend-order",namespace="ns-trend",variant="r1"}"#;
    for line in [
        format!("benchmark_trend_delivery_rate_messages_per_second{l} 900"),
        format!("benchmark_trend_delivery_rate{l} 900"),
        format!("benchmark_trend_passed{l} 1"),
        r#"benchmark_trend_latency_seconds{benchmark="trend-order",namespace="ns-trend",quantile="0.99",variant="r1"} 0.004"#
            .to_string(),
        format!("benchmark_trend_latency_p99_seconds{l} 0.004"),
        format!("benchmark_trend_finished_timestamp_seconds{l} 2000"),
    ] {
        assert!(text.contains(&line), "missing {line} in\n{text}");
    }
    // A newer run replaces it.
    observe_run(&reg, &br, &finished(3_000_000, 50.0, Phase::Failed));
    let g = TREND_GAUGES.get().and_then(Option::as_ref).unwrap();
    let labels = ["ns-trend", "trend-order", "r1"];
    assert_eq!(g.delivery_rate.get(&labels), 50.0);
    assert_eq!(g.passed.with_label_values(&labels).get(), 0.0);
}

#[test]
fn past_capacity_the_longest_finished_go_first() {
    let key = |b: &str| ("ns".to_string(), b.to_string(), String::new());
    let latest: BTreeMap<SeriesKey, f64> = [("a", 30.0), ("b", 10.0), ("c", 20.0)]
        .map(|(b, t)| (key(b), t))
        .into();
    assert_eq!(beyond_capacity(&latest, 1), [key("b"), key("c")]);
    assert!(beyond_capacity(&latest, 3).is_empty());
}
