//! Variants interleaved within one BenchmarkRun on the local cluster: the R1-vs-R2 sample
//! (config/samples, shortened) ends Succeeded with each round's randomised order recorded, the
//! trials run in that order with each variant's own stream replicas, and a paired comparison with
//! intervals, and a per-second timeline per variant that accounts for every delivery; its
//! `kubectl msgbench` report draws both variants and renders in headless Chromium, and its CSV
//! export reads back the exact status figures. A variant whose merged workload breaks a rule
//! fails the run before any pod.
use anyhow::{ensure, Context, Result};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, DynamicObject, ListParams};
use msgbench_crds::RunFailureReason;
use msgbench_e2e::cluster::repo_root;
use msgbench_e2e::kinds::{self, Kind};
use msgbench_e2e::runs::{field as s, finished};
use msgbench_e2e::{run, servers, wait, TestContext};
use serde_json::{json, Value};
use std::time::Duration;

/// The benchmark name the run's trend series carry.
const TREND_NAME: &str = "e2e-r1-vs-r2";

/// The repo's R1-vs-R2 sample, shortened to fit the one shared CPU: 4 rounds of 2 s.
fn sample() -> Result<String> {
    let path = repo_root().join("config/samples/benchmarkrun-variants-jetstream-r1-vs-r2.yaml");
    let mut o: Value = serde_norway::from_str(&std::fs::read_to_string(&path)?)?;
    let spec = o.pointer_mut("/spec").context("spec")?;
    let w = &mut spec["workload"];
    w["ratePerPublisher"] = json!(300);
    w["durationSeconds"] = json!(2);
    w["warmupSeconds"] = json!(0);
    w["drainSeconds"] = json!(1);
    w["jetstream"]["storage"] = json!("memory");
    spec["trials"] = json!(4);
    spec["settleSeconds"] = json!(1);
    spec["runners"]["resources"] =
        json!({"requests": {"cpu": "20m", "memory": "32Mi"}, "limits": {"memory": "128Mi"}});
    spec.as_object_mut()
        .context("spec")?
        .remove("ttlSecondsAfterFinished");
    // A stable name for its trend series (the object name is not one).
    o["metadata"]["labels"] = json!({"msgbench.dev/benchmark": TREND_NAME});
    Ok(serde_norway::to_string(&o)?)
}

#[tokio::test]
async fn r1_vs_r2_variants_interleave_and_compare_paired_rounds() {
    run("variants", body).await;
}

async fn body(ctx: TestContext) -> Result<()> {
    // Bad input first (no server needed): the override breaks a rule admission cannot see.
    let bad = r#"
apiVersion: msgbench.dev/v1alpha1
kind: BenchmarkRun
metadata: {name: bad-variant}
spec:
  target: {serverRef: {kind: PubSubServer, name: nowhere}}
  workload: {protocol: socketio, durationSeconds: 2, payloadBytes: 64}
  variants:
    - name: big
    - name: tiny
      workload: {payloadBytes: 20}
"#;
    kinds::create(&ctx.client, &ctx.ns, bad).await?;
    let api = Kind::BenchmarkRun.api(&ctx.client, &ctx.ns);
    let b = wait::until(
        &api,
        "bad-variant",
        Duration::from_secs(60),
        "bad-variant Failed",
        |o| o.data.pointer("/status/phase").and_then(Value::as_str) == Some("Failed"),
    )
    .await?;
    ensure!(
        s(&b, "/status/verdict/reason") == RunFailureReason::InvalidSpec.as_str()
            && s(&b, "/status/verdict/message")
                .as_str()
                .is_some_and(|m| m.contains("spec.variants[1].workload.payloadBytes")),
        "bad-variant: {}",
        s(&b, "/status/verdict")
    );
    let jobs: Api<Job> = Api::namespaced(ctx.client.clone(), &ctx.ns);
    let lp = ListParams::default().labels("app.kubernetes.io/instance=bad-variant");
    ensure!(
        jobs.list(&lp).await?.items.is_empty(),
        "an invalid run created a Job"
    );

    kinds::create(&ctx.client, &ctx.ns, &servers::js_memory("js3", 3, "none")).await?;
    servers::wait_ready(
        &ctx,
        Kind::JetStreamCluster,
        "js3",
        Duration::from_secs(240),
    )
    .await?;
    kinds::create(&ctx.client, &ctx.ns, &sample()?).await?;
    let br = finished(&ctx, "js-r1-vs-r2", Duration::from_secs(420)).await?;
    ensure!(
        s(&br, "/status/phase") == "Succeeded",
        "verdict {}",
        s(&br, "/status/verdict")
    );

    // The schedule: 4 rounds, each runs r1 and r2 once; balanced, so each goes first twice
    // (both orders occur: the order is drawn, not fixed).
    let schedule = s(&br, "/status/schedule")
        .as_array()
        .context("status.schedule")?;
    ensure!(schedule.len() == 4, "schedule {schedule:?}");
    let mut r1_first = 0;
    for (i, r) in schedule.iter().enumerate() {
        let order: Vec<&str> = r["order"]
            .as_array()
            .context("order")?
            .iter()
            .filter_map(Value::as_str)
            .collect();
        ensure!(r["round"] == i as i64 + 1, "round numbers {schedule:?}");
        let mut sorted = order.clone();
        sorted.sort();
        ensure!(sorted == ["r1", "r2"], "round {} ran {order:?}", i + 1);
        r1_first += usize::from(order[0] == "r1");
    }
    ensure!(
        r1_first == 2,
        "r1 went first in {r1_first} of 4 rounds: {schedule:?}"
    );

    // Per variant: every round's figures, placed as recorded, started in that order.
    let variants = s(&br, "/status/variants")
        .as_array()
        .context("status.variants")?;
    let names: Vec<&str> = variants.iter().filter_map(|v| v["name"].as_str()).collect();
    ensure!(names == ["r1", "r2"], "variants {names:?}");
    let start = |name: &str, round: i64| -> Option<String> {
        let v = variants.iter().find(|v| v["name"] == name)?;
        let t = v["trials"]
            .as_array()?
            .iter()
            .find(|t| t["trial"] == round)?;
        t["startTime"].as_str().map(String::from)
    };
    for v in variants {
        let r = &v["result"];
        ensure!(
            r["published"].as_u64().is_some_and(|p| p > 0)
                && r["deliveredRatio"].as_f64().is_some_and(|d| d >= 0.999),
            "{}: result {r}",
            v["name"]
        );
        timeline_accounts_for_every_delivery(v, 4)?;
        let trials = v["trials"].as_array().context("trials")?;
        ensure!(trials.len() == 4, "{}: trials {trials:?}", v["name"]);
        for t in trials {
            let round = t["trial"].as_i64().context("trial")?;
            let order = &schedule[round as usize - 1]["order"];
            let want = order
                .as_array()
                .context("order")?
                .iter()
                .position(|n| *n == v["name"]);
            ensure!(
                t["position"].as_u64() == want.map(|p| p as u64 + 1),
                "position of {t} in {order}"
            );
        }
    }
    for r in schedule {
        let round = r["round"].as_i64().context("round")?;
        let (a, b) = (
            r["order"][0].as_str().unwrap_or(""),
            r["order"][1].as_str().unwrap_or(""),
        );
        let (ta, tb) = (
            start(a, round).context("start a")?,
            start(b, round).context("start b")?,
        );
        ensure!(
            ta < tb,
            "round {round}: {a} started {ta}, not before {b} at {tb}"
        );
    }

    // Each variant's figures on the operator's /metrics (a variant run has no run-wide result).
    let metrics = msgbench_e2e::probe::operator_metrics(&ctx.client).await?;
    for v in ["r1", "r2"] {
        let series = format!(
            "msgbench_benchmark_receive_rate_messages_per_second{{benchmarkrun=\"js-r1-vs-r2\",namespace=\"{}\",variant=\"{v}\"}}",
            ctx.ns
        );
        ensure!(
            metrics.contains(&series),
            "no {series} on the operator's /metrics"
        );
        let trend = format!(
            "msgbench_benchmark_trend_delivery_rate_messages_per_second{{benchmark=\"{TREND_NAME}\",namespace=\"{}\",variant=\"{v}\"}}",
            ctx.ns
        );
        ensure!(
            metrics.contains(&trend),
            "no {trend} on the operator's /metrics"
        );
    }

    // What the runners were told: the schedule in the recorded order, each entry with its
    // variant's stream replicas (the agent runs exactly that: bench-runner tests/agent.rs).
    let cms: Api<ConfigMap> = Api::namespaced(ctx.client.clone(), &ctx.ns);
    let job = s(&br, "/status/jobName").as_str().context("jobName")?;
    let cm = cms.get(job).await?;
    let agent: Value = serde_norway::from_str(
        cm.data
            .as_ref()
            .and_then(|d| d.get("agent.yaml"))
            .context("agent.yaml")?,
    )?;
    let planned: Vec<(i64, String, u64)> = agent["schedule"]
        .as_array()
        .context("agent schedule")?
        .iter()
        .map(|t| {
            (
                t["round"].as_i64().unwrap_or(0),
                t["variant"].as_str().unwrap_or("").to_string(),
                t["workload"]["jetstream"]["replicas"].as_u64().unwrap_or(0),
            )
        })
        .collect();
    let recorded: Vec<(i64, String, u64)> = schedule
        .iter()
        .flat_map(|r| {
            let round = r["round"].as_i64().unwrap_or(0);
            r["order"]
                .as_array()
                .cloned()
                .unwrap_or_default()
                .into_iter()
                .map(move |n| {
                    let n = n.as_str().unwrap_or("").to_string();
                    let replicas = if n == "r1" { 1 } else { 2 };
                    (round, n, replicas)
                })
        })
        .collect();
    ensure!(
        planned == recorded,
        "agent schedule {planned:?} vs status {recorded:?}"
    );

    // The paired comparison: r2 against r1, intervals from the 4 rounds, a verdict per figure.
    let c = s(&br, "/status/variantComparison");
    ensure!(c["baseline"] == "r1" && c["rounds"] == 4, "comparison {c}");
    let figures = c["figures"].as_array().context("figures")?;
    let got: Vec<&str> = figures
        .iter()
        .filter_map(|f| f["figure"].as_str())
        .collect();
    ensure!(
        got == [
            "deliveryRate",
            "receiveRate",
            "publishRate",
            "p50Ms",
            "p99Ms"
        ],
        "figures {got:?}"
    );
    for f in figures {
        let e = &f["ratio"];
        let (lo, est, hi) = (
            e["ci95Low"].as_f64(),
            e["estimate"].as_f64(),
            e["ci95High"].as_f64(),
        );
        ensure!(
            matches!((lo, est, hi), (Some(l), Some(m), Some(h)) if l <= m && m <= h && l > 0.0),
            "ratio interval {f}"
        );
        ensure!(
            f["difference"]["ci95Low"].is_number(),
            "difference interval {f}"
        );
        ensure!(
            ["Better", "Worse", "NoSignificantDifference"]
                .contains(&f["verdict"].as_str().unwrap_or("")),
            "verdict {f}"
        );
    }
    // Open loop: the summary is the p99 difference (throughput is the offered rate).
    let summary = s(&br, "/status/headline/comparison").as_str().unwrap_or("");
    ensure!(
        summary.starts_with("r2-r1 p99 ") && summary.contains("ms ±"),
        "headline.comparison {summary:?}"
    );
    report_shows_both_variants(&br)?;
    eprintln!("variants: {summary}; {}", serde_json::to_string(c)?);
    trend_outlives_the_run(&ctx, &api).await
}

/// Deleting the run takes its per-run series off the operator's /metrics (pruned against the
/// controller's store), while its benchmark's trend series stay for Prometheus to keep.
async fn trend_outlives_the_run(ctx: &TestContext, api: &Api<DynamicObject>) -> Result<()> {
    api.delete("js-r1-vs-r2", &Default::default()).await?;
    wait::until_deleted(api, "js-r1-vs-r2", Duration::from_secs(60)).await?;
    let per_run = format!("benchmarkrun=\"js-r1-vs-r2\",namespace=\"{}\"", ctx.ns);
    let trend = format!(
        "msgbench_benchmark_trend_delivery_rate_messages_per_second{{benchmark=\"{TREND_NAME}\",namespace=\"{}\",variant=\"r2\"}}",
        ctx.ns
    );
    let metrics = wait::poll(
        Duration::from_secs(60),
        Duration::from_secs(2),
        "the deleted run's series pruned",
        || async {
            let m = msgbench_e2e::probe::operator_metrics(&ctx.client).await?;
            Ok((!m.contains(&per_run)).then_some(m))
        },
    )
    .await?;
    ensure!(metrics.contains(&trend), "{trend} went with the run object");
    Ok(())
}

/// `kubectl msgbench report` of this real run: one percentile curve, throughput line and p99
/// line per variant, the throughput line with one point per timeline sample, and the page renders
/// in headless Chromium without errors and not blank. The screenshot is kept with the e2e
/// artifacts for a person to look at.
fn report_shows_both_variants(br: &DynamicObject) -> Result<()> {
    use kubectl_msgbench::{browser, report_cmd, run_view::Run};
    let typed: msgbench_crds::BenchmarkRun = serde_json::from_value(serde_json::to_value(br)?)?;
    let run = Run::from_benchmark_run(typed);
    csv_export_round_trips(&run, br)?;
    let html = report_cmd::render(&run)?;
    for chart in ["latency-percentiles", "throughput-timeline", "p99-timeline"] {
        let fig = figure(&html, chart).with_context(|| format!("no chart {chart}"))?;
        ensure!(
            fig.contains("data-series=\"r1,r2\""),
            "{chart}: series not r1,r2"
        );
        for v in ["r1", "r2"] {
            let lines = series_lines(fig, v);
            ensure!(!lines.is_empty(), "{chart}: no line for {v}");
            if chart == "throughput-timeline" {
                let samples = s(br, "/status/variants")
                    .as_array()
                    .and_then(|vs| vs.iter().find(|x| x["name"] == v))
                    .and_then(|x| x["result"]["timeline"].as_array())
                    .map_or(0, Vec::len);
                ensure!(
                    lines.len() == 1 && point_count(lines[0]) == samples,
                    "{chart}: {v} drawn with {lines:?} for {samples} samples"
                );
            }
        }
    }
    let png = browser::screenshot_checked(&html, browser::SCREENSHOT_SIZE)?;
    let dir = msgbench_e2e::cluster::exported::artifacts_dir();
    std::fs::create_dir_all(&dir)?;
    std::fs::write(dir.join("variants-report.png"), png)?;
    Ok(())
}

/// `kubectl msgbench export --format csv` of this run: each variant's row reads back the exact
/// figures of its status (floats compared bit for bit).
fn csv_export_round_trips(run: &kubectl_msgbench::run_view::Run, br: &DynamicObject) -> Result<()> {
    let text = kubectl_msgbench::export::to_csv(run)?;
    let mut lines = text.lines();
    let header: Vec<&str> = lines.next().context("csv header")?.split(',').collect();
    let rows: Vec<Vec<&str>> = lines.map(|l| l.split(',').collect()).collect();
    ensure!(rows.len() == 2, "csv rows {rows:?}");
    for row in rows {
        let v = s(br, "/status/variants")
            .as_array()
            .and_then(|vs| vs.iter().find(|x| x["name"] == row[0]))
            .with_context(|| format!("csv row {row:?} names no variant"))?;
        for (column, field) in [
            ("receiveRate", "/receiveRate"),
            ("publishRate", "/publishRate"),
            ("published", "/published"),
            ("received", "/received"),
            ("deliveredRatio", "/deliveredRatio"),
            ("p50Ms", "/latency/p50Ms"),
            ("p99Ms", "/latency/p99Ms"),
            ("maxMs", "/latency/maxMs"),
        ] {
            let i = header.iter().position(|h| *h == column).context(column)?;
            let want = v["result"].pointer(field).and_then(Value::as_f64);
            let got = row.get(i).and_then(|c| c.parse::<f64>().ok());
            ensure!(
                got.is_some() && got.map(f64::to_bits) == want.map(f64::to_bits),
                "{}: csv {column} {got:?}, status {want:?}",
                row[0]
            );
        }
    }
    Ok(())
}

/// The `<figure>` of chart `kind` in a report.
fn figure<'a>(html: &'a str, kind: &str) -> Option<&'a str> {
    let at = html.find(&format!("data-chart=\"{kind}\""))?;
    let start = html[..at].rfind("<figure")?;
    let end = start + html[start..].find("</figure>")?;
    Some(&html[start..end])
}

/// The polylines of one series (the report tags each series' elements with its name).
fn series_lines<'a>(fig: &'a str, name: &str) -> Vec<&'a str> {
    let tag = format!("<polyline class=\"series\" data-series=\"{name}\"");
    fig.lines()
        .map(str::trim_start)
        .filter(|l| l.starts_with(&tag))
        .collect()
}

fn point_count(polyline: &str) -> usize {
    polyline
        .split_once("points=\"")
        .and_then(|(_, rest)| rest.split('"').next())
        .map_or(0, |p| p.split_whitespace().count())
}

/// A variant's timeline (kept in status for reports): one point a second of the 2 s rounds
/// (plus the drain), rates per round that add back up to every delivery, and a p99 where
/// messages arrived, bounded by the run's own maximum.
fn timeline_accounts_for_every_delivery(v: &Value, rounds: u32) -> Result<()> {
    let r = &v["result"];
    let points = r["timeline"].as_array().context("result.timeline")?;
    ensure!(
        (2..=6).contains(&points.len()) && points.iter().all(|p| p["seconds"] == 1),
        "{}: timeline {points:?}",
        v["name"]
    );
    let per_round: f64 = points
        .iter()
        .map(|p| p["receiveRate"].as_f64().unwrap_or(f64::NAN))
        .sum();
    let counted = per_round * f64::from(rounds);
    let received = r["received"].as_f64().context("received")?;
    // Rates are rounded to 0.1 msg/s per point and round.
    let slack = 0.05 * f64::from(rounds) * points.len() as f64 + 1.0;
    ensure!(
        (counted - received).abs() <= slack,
        "{}: timeline counts {counted} deliveries, result {received}",
        v["name"]
    );
    let max_ms = r["latency"]["maxMs"].as_f64().context("latency.maxMs")?;
    let p99s: Vec<f64> = points.iter().filter_map(|p| p["p99Ms"].as_f64()).collect();
    // Coarse buckets: a midpoint is within 6 % of the value it stands for.
    ensure!(
        !p99s.is_empty() && p99s.iter().all(|&p| p > 0.0 && p <= max_ms * 1.06 + 0.001),
        "{}: timeline p99 {p99s:?} vs max {max_ms} ms",
        v["name"]
    );
    Ok(())
}
