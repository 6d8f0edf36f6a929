//! Every scenario of `config/scenarios.yaml` on the local cluster: its server samples (fitted to
//! the one CPU), then its BenchmarkRun sample scaled down by `SCENARIO_SCALE` (see
//! `msgbench_e2e::scenarios`), one after another in catalogue order (a run that compares itself
//! with an earlier one comes after it); each must end Succeeded with every figure the catalogue
//! names present in its status. All runs are tried; the failures are reported together.
use anyhow::{Context, Result};
use msgbench_e2e::cluster::repo_root;
use msgbench_e2e::kinds::{self, Kind};
use msgbench_e2e::runs::{field, finished};
use msgbench_e2e::scenarios::{
    catalogue, fit_server, scale_from_env, scale_run, select, selection_from_env, Scenario,
};
use msgbench_e2e::{run, servers, TestContext};
use serde_json::Value;
use std::collections::BTreeSet;
use std::time::{Duration, Instant};

fn load(file: &str) -> Result<Value> {
    let path = repo_root().join("config/samples").join(file);
    let text = std::fs::read_to_string(&path).with_context(|| path.display().to_string())?;
    Ok(serde_norway::from_str(&text)?)
}

#[tokio::test]
async fn every_scenario_sample_succeeds_with_its_figures() {
    run("scenarios", body).await;
}

async fn body(ctx: TestContext) -> Result<()> {
    let scale = scale_from_env()?;
    let text = std::fs::read_to_string(repo_root().join("config/scenarios.yaml"))?;
    let (images, only) = selection_from_env();
    let (scenarios, left) = select(catalogue(&text)?, &images, only.as_deref());
    for (sc, why) in &left {
        eprintln!("scenario {}: not run: {why}", sc.sample);
    }
    anyhow::ensure!(!scenarios.is_empty(), "no scenario selected");
    let files: BTreeSet<&String> = scenarios.iter().flat_map(|s| &s.servers).collect();
    let mut ready = Vec::new();
    for f in files {
        let mut doc = load(f)?;
        fit_server(&mut doc)?;
        if let Some(secret) = doc
            .pointer("/spec/pusher/secretName")
            .and_then(Value::as_str)
        {
            pusher_app_secret(&ctx, secret).await?;
        }
        let kind = doc["kind"].as_str().context("kind")?.to_string();
        let name = doc["metadata"]["name"]
            .as_str()
            .context("name")?
            .to_string();
        kinds::create(&ctx.client, &ctx.ns, &serde_json::to_string(&doc)?).await?;
        ready.push((Kind::from_name(&kind).context("server kind")?, name));
    }
    for (kind, name) in &ready {
        servers::wait_ready(&ctx, *kind, name, Duration::from_secs(300)).await?;
    }
    let mut failures = Vec::new();
    for sc in &scenarios {
        let t = Instant::now();
        match one(&ctx, sc, scale).await {
            Ok(()) => eprintln!("scenario {}: ok in {:.0?}", sc.sample, t.elapsed()),
            Err(e) => {
                eprintln!(
                    "scenario {}: FAILED in {:.0?}: {e:#}",
                    sc.sample,
                    t.elapsed()
                );
                failures.push(format!("{} ({}): {e:#}", sc.sample, sc.scenario));
            }
        }
    }
    anyhow::ensure!(
        failures.is_empty(),
        "{} of {} scenarios failed:\n{}",
        failures.len(),
        scenarios.len(),
        failures.join("\n")
    );
    Ok(())
}

/// The Secret a pusher PubSubServer sample names (the sample asks its user to create it),
/// with a key and secret drawn for this test.
async fn pusher_app_secret(ctx: &TestContext, name: &str) -> Result<()> {
    use k8s_openapi::api::core::v1::Secret;
    use rand::distr::{Alphanumeric, SampleString};
    let draw = |n| Alphanumeric.sample_string(&mut rand::rng(), n);
    let secret: Secret = serde_json::from_value(serde_json::json!({
        "metadata": {"name": name},
        "stringData": {"appId": "msgbench", "key": draw(16), "secret": draw(32)},
    }))?;
    match kube::Api::<Secret>::namespaced(ctx.client.clone(), &ctx.ns)
        .create(&Default::default(), &secret)
        .await
    {
        // Two server samples may share one app (pinned and unpinned sockudo).
        Err(kube::Error::Api(e)) if e.code == 409 => Ok(()),
        r => r
            .map(|_| ())
            .with_context(|| format!("creating Secret {name}")),
    }
}

/// Applies one scaled sample and checks its outcome and figures.
async fn one(ctx: &TestContext, sc: &Scenario, scale: f64) -> Result<()> {
    let mut doc = load(&sc.sample)?;
    scale_run(&mut doc, scale)?;
    let name = doc["metadata"]["name"]
        .as_str()
        .context("name")?
        .to_string();
    kinds::create(&ctx.client, &ctx.ns, &serde_json::to_string(&doc)?).await?;
    let done = finished(ctx, &name, Duration::from_secs(420)).await?;
    let phase = field(&done, "/status/phase");
    anyhow::ensure!(
        phase == "Succeeded",
        "phase {phase}, verdict {}, conditions {}",
        field(&done, "/status/verdict"),
        kinds::conditions_summary(&done)
    );
    let missing: Vec<&String> = sc
        .figures
        .iter()
        .filter(|f| field(&done, f).is_null())
        .collect();
    anyhow::ensure!(
        missing.is_empty(),
        "figures missing from status: {missing:?}"
    );
    Ok(())
}
