//! The report of each kind of input: one series per variant, the points the status holds,
//! the right percentile axis, and nothing fetched from a network.
mod common;
#[path = "common/svg.rs"]
mod svg;

use kubectl_msgbench::{report_cmd, run_view, source};
use svg::{declared_series, figure, points, tagged, texts};

fn report_of(fixture: &str) -> (run_view::Run, String) {
    let run = source::from_file(&common::fixture(fixture)).unwrap();
    let html = report_cmd::render(&run).unwrap();
    (run, html)
}

#[test]
fn the_percentile_chart_has_one_curve_per_variant_over_the_right_decades() {
    let (run, html) = report_of("variants-run.yaml");
    let fig = figure(&html, "latency-percentiles");
    assert_eq!(declared_series(fig), ["r1", "r2"]);
    for v in &run.status.variants {
        let lines = tagged(fig, "polyline", &v.name);
        assert_eq!(lines.len(), 1, "{}: {lines:?}", v.name);
        let h = v.result.as_ref().unwrap().histogram.as_deref().unwrap();
        let curve = run_view::percentile_curve(h).unwrap();
        assert_eq!(points(lines[0]).len(), curve.len(), "{}", v.name);
        // 3000 samples: the curve ends at log10(3000) = 3.48 decades, at the maximum.
        let last = curve.last().unwrap();
        assert!((last.0 - 3000f64.log10()).abs() < 1e-12, "{last:?}");
        let max_ms = v.result.as_ref().unwrap().latency.as_ref().unwrap().max_ms;
        assert!(
            (last.1 - max_ms).abs() <= max_ms * 0.001,
            "{last:?} vs {max_ms}"
        );
        // Percentiles never decrease along q.
        assert!(curve.windows(2).all(|w| w[1].1 >= w[0].1));
    }
    // So the axis runs to 4 decades: 0% .. 99.99%, and no further.
    let labels = texts(fig);
    for l in ["0%", "90%", "99%", "99.9%", "99.99%"] {
        assert!(labels.iter().any(|t| t == l), "no tick {l}: {labels:?}");
    }
    assert!(!labels.iter().any(|t| t == "99.999%"), "{labels:?}");
}

#[test]
fn timeline_charts_have_one_point_per_sample_with_data_and_gaps_not_zeros() {
    let (run, html) = report_of("variants-run.yaml");
    let rates = figure(&html, "throughput-timeline");
    let p99 = figure(&html, "p99-timeline");
    for v in &run.status.variants {
        let t = &v.result.as_ref().unwrap().timeline;
        assert_eq!(t.len(), common::TIMELINE_SECONDS as usize);
        let lines = tagged(rates, "polyline", &v.name);
        assert_eq!(lines.len(), 1, "{}", v.name);
        assert_eq!(points(lines[0]).len(), t.len());
        let with_p99 = t.iter().filter(|s| s.p99_ms.is_some()).count();
        let segments = tagged(p99, "polyline", &v.name);
        let drawn: usize = segments.iter().map(|l| points(l).len()).sum();
        assert_eq!(drawn, with_p99, "{}", v.name);
    }
    // r2 had no deliveries in one second: its p99 line breaks there instead of dropping to 0.
    assert_eq!(tagged(p99, "polyline", "r1").len(), 1);
    assert_eq!(tagged(p99, "polyline", "r2").len(), 2);
    let r2 = &run.status.variants[1].result.as_ref().unwrap().timeline;
    assert_eq!(r2[common::R2_GAP_SECOND as usize].p99_ms, None);
}

#[test]
fn paired_ratios_show_every_round_and_the_interval_per_figure() {
    let (run, html) = report_of("variants-run.yaml");
    let fig = figure(&html, "paired-ratios");
    let names = declared_series(fig);
    assert_eq!(
        names,
        [
            "r2 deliveryRate",
            "r2 receiveRate",
            "r2 publishRate",
            "r2 p50Ms",
            "r2 p99Ms"
        ]
    );
    for n in &names {
        assert_eq!(tagged(fig, "circle", n).len(), 3, "{n}: one dot per round");
        assert_eq!(tagged(fig, "polyline", n).len(), 1, "{n}: one interval");
        assert_eq!(tagged(fig, "rect", n).len(), 1, "{n}: one estimate");
    }
    // The per-round ratios are variant ÷ baseline of the same round.
    let rows = kubectl_msgbench::paired_rows::ratio_rows(&run.status);
    let (r1, r2) = (
        &run.status.variants[0].trials,
        &run.status.variants[1].trials,
    );
    let want: Vec<f64> = r1
        .iter()
        .zip(r2)
        .map(|(a, b)| b.receive_rate / a.receive_rate)
        .collect();
    assert_eq!(rows[1].rounds.iter().map(|r| r.1).collect::<Vec<_>>(), want);
    let delivery: Vec<f64> = r1
        .iter()
        .zip(r2)
        .map(|(a, b)| b.delivery_rate.unwrap() / a.delivery_rate.unwrap())
        .collect();
    assert_eq!(
        rows[0].rounds.iter().map(|r| r.1).collect::<Vec<_>>(),
        delivery
    );
    for l in ["r2 deliveryRate", "r2 receiveRate", "r2 p99Ms"] {
        assert!(texts(fig).iter().any(|t| t == l), "no row label {l}");
    }
}

#[test]
fn tables_carry_the_demo_figures() {
    let (run, html) = report_of("variants-run.yaml");
    let vc = run.status.variant_comparison.as_ref().unwrap();
    let short = |v: f64| {
        format!("{v:.4}")
            .trim_end_matches('0')
            .trim_end_matches('.')
            .to_string()
    };
    for f in &vc.figures {
        let (lo, hi) = (f.ratio.ci95_low.unwrap(), f.ratio.ci95_high.unwrap());
        let cell = format!("{} [{}, {}]", short(f.ratio.estimate), short(lo), short(hi));
        assert!(html.contains(&cell), "{}: {cell}", f.figure);
        assert!(html.contains(&format!("{:?}", f.verdict)));
    }
    for v in &run.status.variants {
        assert!(html.contains(&v.headline.p99), "{}", v.name);
        let t = &v.trials[0];
        let per_round = format!("{}/{}ms", t.delivery_rate.unwrap(), t.p99_ms);
        assert!(html.contains(&per_round), "{per_round}");
    }
    assert!(html.contains("r2/r1 0.64× ±0.04"));
    assert!(html.contains("1: r1 r2 | 2: r2 r1 | 3: r1 r2"));
}

#[test]
fn the_report_needs_no_network() {
    for f in ["variants-run.yaml", "plain-run.yaml", "runner-result.json"] {
        let (_, html) = report_of(f);
        let stripped = html.replace("xmlns=\"http://www.w3.org/2000/svg\"", "");
        for bad in [
            "http://", "https://", "<script", "<link", "@import", "url(", "<img",
        ] {
            assert!(!stripped.contains(bad), "{f}: {bad}");
        }
        assert!(html.matches("<svg").count() >= 3, "{f}: charts inline");
    }
}

#[test]
fn a_run_without_variants_is_one_series_with_its_trials() {
    let (run, html) = report_of("plain-run.yaml");
    for kind in ["latency-percentiles", "throughput-timeline", "p99-timeline"] {
        let fig = figure(&html, kind);
        assert_eq!(declared_series(fig), ["nats-plain"], "{kind}");
        assert_eq!(tagged(fig, "polyline", "nats-plain").len(), 1, "{kind}");
    }
    assert!(!html.contains("data-chart=\"paired-ratios\""));
    assert!(html.contains("<b>Target:</b> JetStreamCluster/js3"));
    for t in &run.status.trials {
        assert!(html.contains(&format!("<td>{}</td>", t.receive_rate)));
        assert!(html.contains(&format!("<td>{}</td>", t.delivery_rate.unwrap())));
    }
}

#[test]
fn a_runner_result_file_reports_the_figures_the_operator_would_write() {
    let (run, html) = report_of("runner-result.json");
    let r = common::runner_result();
    assert_eq!(
        run.status.result,
        Some(runner_api::status_form::to_status(&r, 1))
    );
    let fig = figure(&html, "p99-timeline");
    let lines = tagged(fig, "polyline", "runner-result");
    assert_eq!(points(lines[0]).len(), 20);
}

#[test]
fn a_run_without_results_is_a_clear_error() {
    let mut br = common::plain_run();
    let status = br.status.as_mut().unwrap();
    status.result = None;
    status.phase = Some(msgbench_crds::benchmark_run::Phase::Running);
    let yaml = serde_norway::to_string(&br).unwrap();
    let run = source::parse(&yaml, "x").unwrap();
    let e = run.require_results().unwrap_err().to_string();
    assert_eq!(
        e,
        "BenchmarkRun nats-plain has no results yet (phase Running)"
    );
}

#[test]
fn credentials_in_a_target_url_are_not_printed() {
    let mut br = common::variants_run();
    br.status.as_mut().unwrap().variants[0].target = "nats://admin:s3cret@nats:4222".into();
    let run = source::parse(&serde_norway::to_string(&br).unwrap(), "x").unwrap();
    let html = report_cmd::render(&run).unwrap();
    assert!(!html.contains("s3cret") && !html.contains("admin"));
    assert!(html.contains("nats://***@nats:4222"));
}

#[test]
fn faults_get_a_cost_row_per_variant_and_a_row_per_execution_saying_why_when_absent() {
    use msgbench_crds::benchmark_run::{FaultEffect, FaultRecord, FaultSummary};
    let mut run = source::from_file(&common::fixture("variants-run.yaml")).unwrap();
    run.status.faults = vec![
        FaultRecord {
            trial: 1,
            variant: Some("r1".into()),
            pod: Some("js3-2".into()),
            offset_seconds: Some(10.05),
            effect: Some(FaultEffect {
                before_receive_rate: 975.5,
                lowest_receive_rate: 0.0,
                recovery: "not back to 95 % of 975.5 msg/s in the 20 s".into(),
                ..FaultEffect::default()
            }),
            ..FaultRecord::default()
        },
        FaultRecord {
            trial: 2,
            variant: Some("r2".into()),
            message: Some("not done: no server pod with ordinal 3".into()),
            ..FaultRecord::default()
        },
    ];
    let r1 = run.status.variants[0].result.as_mut().unwrap();
    r1.lost_acked = Some(45_409);
    r1.acked_not_kept = Some(1_170);
    r1.acked_not_kept_from = Some(msgbench_crds::benchmark_run::AckedNotKeptFrom::StreamGone);
    r1.publish_stall_ms = Some(5001.6);
    r1.faults = Some(FaultSummary {
        executed: 1,
        ..FaultSummary::default()
    });
    let html = report_cmd::render(&run).unwrap();
    let table = |class: &str| {
        let start = html.find(&format!("<table class=\"{class}\">")).unwrap();
        html[start..start + html[start..].find("</table>").unwrap()].to_string()
    };
    let costs = table("fault-costs");
    assert!(
        costs.contains("<td>45409</td>") && costs.contains("5001.6 ms"),
        "{costs}"
    );
    assert!(costs.contains("0 of 1"), "{costs}");
    assert!(costs.contains("<th>acked, not kept</th>"), "{costs}");
    assert!(costs.contains("<td>1170 (stream gone)</td>"), "{costs}");
    assert!(
        costs.contains("unavailable: not a JetStream run, or its stream could not be read back"),
        "{costs}"
    );
    // r2 has no acked figures in the fixture: said, not zero.
    assert!(
        costs.contains("unavailable: the server does not acknowledge"),
        "{costs}"
    );
    let execs = table("faults");
    assert_eq!(
        execs.matches("<tr>").count(),
        3,
        "head + 2 executions: {execs}"
    );
    assert!(
        execs.contains("js3-2") && execs.contains("unavailable: not back in the measured phase"),
        "{execs}"
    );
    assert!(
        execs.contains("unavailable: not done: no server pod with ordinal 3"),
        "{execs}"
    );
    // Without faults there is no such section.
    run.status.faults.clear();
    assert!(!report_cmd::render(&run).unwrap().contains("fault-costs"));
}

#[test]
fn sessions_are_a_table_row_each_with_unavailable_figures_saying_why() {
    let (run, html) = report_of("plain-run.yaml");
    let r = run.status.result.as_ref().unwrap();
    let table = html
        .split("<table class=\"segments\">")
        .nth(1)
        .expect("a segments table")
        .split("</table>")
        .next()
        .unwrap();
    let rows: Vec<&str> = table.split("<tr>").skip(2).collect();
    assert_eq!(rows.len(), 3, "warm-up and two sessions: {table}");
    for (row, want) in rows
        .iter()
        .zip([r.warmup.as_ref().unwrap(), &r.sessions[0], &r.sessions[1]])
    {
        assert!(row.starts_with(&format!("<td>{}</td>", want.name)), "{row}");
        let l = want.latency.as_ref().unwrap();
        assert!(
            row.contains(&format!("<td>{} ms</td>", l.stddev_ms)),
            "{row}"
        );
        assert!(row.contains(&format!("<td>{} ms</td>", l.max_ms)), "{row}");
    }
    // Session 2 has no publish acks: said so, not 0 ms.
    assert!(
        rows[2].contains("unavailable: no publish acks"),
        "{}",
        rows[2]
    );
    assert!(!rows[1].contains("unavailable"), "{}", rows[1]);
    // A run without sessions or stages has no such table.
    let (_, html) = report_of("variants-run.yaml");
    assert!(!html.contains("class=\"segments\""));
}
