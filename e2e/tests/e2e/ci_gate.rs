//! The user guide's CI gate, exactly as it is written there (`GATE_DOC`), run as a shell process
//! against the cluster: for a run that fails (a missing target, `targetReadyTimeoutSeconds: 3`) it exits
//! non-zero within 10 s of the run's completionTime — instead of hanging until its timeout — and
//! for a run that passes it exits 0.
use anyhow::{bail, ensure, Context, Result};
use k8s_openapi::jiff::Timestamp;
use msgbench_crds::RunFailureReason;
use msgbench_e2e::cluster::{kubeconfig_path, repo_root};
use msgbench_e2e::kinds::{self, Kind};
use msgbench_e2e::runs::{field as s, finished};
use msgbench_e2e::{run, servers, TestContext};
use std::process::{ExitStatus, Stdio};
use std::time::Duration;

/// The page of the user guide that shows the gate.
const GATE_DOC: &str = "docs/src/guide/reports-and-gate.md";

/// The name the documented gate uses; replaced by the test's run name.
const DOC_RUN: &str = "benchmarkrun/js-r2";

const FAILING_RUN: &str = r#"
apiVersion: msgbench.dev/v1alpha1
kind: BenchmarkRun
metadata:
  name: gate-fails
spec:
  target:
    serverRef: {kind: JetStreamCluster, name: does-not-exist}
  workload: {protocol: nats, ratePerPublisher: 10, durationSeconds: 1}
  targetReadyTimeoutSeconds: 3
"#;

const PASSING_RUN: &str = r#"
apiVersion: msgbench.dev/v1alpha1
kind: BenchmarkRun
metadata:
  name: gate-passes
spec:
  target:
    serverRef: {kind: JetStreamCluster, name: gate-js}
  workload: {protocol: nats, topicPrefix: gate, publishers: 1, subscribers: 1, payloadBytes: 64, ratePerPublisher: 50, durationSeconds: 2, drainSeconds: 1}
  runners:
    count: 1
    resources:
      requests: {cpu: 10m, memory: 32Mi}
      limits: {memory: 128Mi}
  barrierTimeoutSeconds: 60
  thresholds:
    - {metric: deliveredRatio, op: ge, value: 0.99}
"#;

#[tokio::test]
async fn the_documented_ci_gate_fails_fast_on_a_failed_run_and_passes_a_passed_one() {
    run("ci-gate", body).await;
}

/// The gate's command lines from the user guide's CI-gate block (`kubectl wait benchmarkrun/js-r2 …`),
/// comments removed.
fn readme_gate() -> Result<Vec<String>> {
    let doc = std::fs::read_to_string(repo_root().join(GATE_DOC))?;
    let lines: Vec<String> = doc
        .lines()
        .filter(|l| l.starts_with(&format!("kubectl wait {DOC_RUN} ")))
        .map(|l| l.split(" #").next().unwrap_or(l).trim().to_string())
        .collect();
    ensure!(
        (1..=2).contains(&lines.len()),
        "{GATE_DOC}: expected the CI gate as 1 or 2 `kubectl wait {DOC_RUN}` lines, found {lines:?}"
    );
    Ok(lines)
}

/// Runs the gate for `name` in the test's namespace as `bash -e` would in CI; returns its exit
/// status, output and the wall-clock time it exited.
async fn gate(
    ctx: &TestContext,
    name: &str,
    limit: Duration,
) -> Result<(ExitStatus, String, Timestamp)> {
    let script: Vec<String> = readme_gate()?
        .iter()
        .map(|l| {
            format!(
                "{} -n {}",
                l.replace(DOC_RUN, &format!("benchmarkrun/{name}")),
                ctx.ns
            )
        })
        .collect();
    eprintln!("gate for {name}:\n  {}", script.join("\n  "));
    let path = format!(
        "{}:{}",
        msgbench_e2e::cluster::exported::tools_bin().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let child = tokio::process::Command::new("bash")
        .arg("-ec")
        .arg(script.join("\n"))
        .env("KUBECONFIG", kubeconfig_path())
        .env("PATH", path)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .context("starting bash")?;
    let out = match tokio::time::timeout(limit, child.wait_with_output()).await {
        Ok(out) => out?,
        Err(_) => bail!("the gate for {name} did not exit within {limit:?}"),
    };
    let exited = Timestamp::now();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    Ok((out.status, text, exited))
}

async fn body(ctx: TestContext) -> Result<()> {
    kinds::create(
        &ctx.client,
        &ctx.ns,
        &servers::js_memory("gate-js", 1, "none"),
    )
    .await?;

    // A failed run: the gate, started while the run waits for its target, exits non-zero
    // within seconds of completionTime (its own timeout is 15 minutes).
    kinds::create(&ctx.client, &ctx.ns, FAILING_RUN).await?;
    let (status, out, exited) = gate(&ctx, "gate-fails", Duration::from_secs(120)).await?;
    let run = finished(&ctx, "gate-fails", Duration::from_secs(10)).await?;
    ensure!(
        s(&run, "/status/verdict/reason") == RunFailureReason::TargetNotFound.as_str(),
        "verdict {}",
        s(&run, "/status/verdict")
    );
    ensure!(!status.success(), "the gate passed a failed run: {out}");
    let completed: Timestamp = s(&run, "/status/completionTime")
        .as_str()
        .context("completionTime")?
        .parse()?;
    // completionTime has whole seconds: the lag is at most 1 s more than measured.
    let lag = exited.duration_since(completed);
    println!("gate exited {status} {lag:#} after the failed run's completionTime");
    ensure!(
        lag.as_secs_f64() < 10.0,
        "the gate took {lag:#} after completionTime {completed} to fail"
    );

    // A passed run: the gate exits 0.
    servers::wait_ready(
        &ctx,
        Kind::JetStreamCluster,
        "gate-js",
        Duration::from_secs(240),
    )
    .await?;
    kinds::create(&ctx.client, &ctx.ns, PASSING_RUN).await?;
    let (status, out, _) = gate(&ctx, "gate-passes", Duration::from_secs(300)).await?;
    let run = finished(&ctx, "gate-passes", Duration::from_secs(10)).await?;
    ensure!(
        status.success(),
        "the gate failed a run that ended {} ({}): {out}",
        s(&run, "/status/phase"),
        s(&run, "/status/verdict")
    );
    ensure!(
        s(&run, "/status/phase") == "Succeeded",
        "phase {}, verdict {}",
        s(&run, "/status/phase"),
        s(&run, "/status/verdict")
    );
    Ok(())
}
