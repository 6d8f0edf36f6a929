//! Every scenario of `config/scenarios.yaml` on the local cluster: its server samples (fitted to
//! the one CPU) or, for an `endpoint` sample, its plain manifests and their Secrets, then its BenchmarkRun sample scaled down by `SCENARIO_SCALE` (see
//! `msgbench_e2e::scenarios`), applied in catalogue order (a run that compares itself with an
//! earlier one comes after it), up to 12 at a time (runs on one server queue behind each
//! other) but those with faults, which run alone; each
//! must end Succeeded with every figure the catalogue names present in its status. All runs are tried; the failures are reported together.
use anyhow::{Context, Result};
use futures::StreamExt;
use msgbench_e2e::certs::{service_names, TestCa};
use msgbench_e2e::cluster::repo_root;
use msgbench_e2e::kinds::{self, Kind};
use msgbench_e2e::manifests;
use msgbench_e2e::runs::{field, finished};
use msgbench_e2e::scenarios::{
    catalogue, fit_server, scale_from_env, scale_run, select, selection_from_env, SampleSecret,
    Scenario,
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
    let team = team_servers(&ctx, &scenarios).await?;
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
    for (kind, name) in &team {
        manifests::wait_ready(&ctx.client, &ctx.ns, kind, name).await?;
    }
    // Runs without faults a few at once, applied strictly in catalogue order (the operator
    // queues runs that share a server in the order they were applied, and a run comparing
    // itself with a baseline waits for it); runs with faults one at a time, alone, so nothing
    // else competes for the CPU around their faults.
    let mut failures = Vec::new();
    let (alone, together): (Vec<&Scenario>, Vec<&Scenario>) =
        scenarios.iter().partition(|sc| has_faults(sc));
    let mut in_flight = futures::stream::FuturesUnordered::new();
    for sc in together {
        while in_flight.len() >= IN_FLIGHT {
            failures.extend(in_flight.next().await.flatten());
        }
        match apply(&ctx, sc, scale).await {
            Ok(name) => in_flight.push(outcome(&ctx, sc, name, Instant::now())),
            Err(e) => failures.push(format!("{} ({}): {e:#}", sc.sample, sc.scenario)),
        }
    }
    while let Some(done) = in_flight.next().await {
        failures.extend(done);
    }
    for sc in alone {
        match apply(&ctx, sc, scale).await {
            Ok(name) => failures.extend(outcome(&ctx, sc, name, Instant::now()).await),
            Err(e) => failures.push(format!("{} ({}): {e:#}", sc.sample, sc.scenario)),
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

/// The servers a team runs without msgbench that the selected `endpoint` samples target: their
/// Secrets (as each sample's header tells its user to make them), then their plain manifests.
/// Returns their Deployments and StatefulSets, to wait for.
async fn team_servers(ctx: &TestContext, scenarios: &[Scenario]) -> Result<Vec<(String, String)>> {
    // Entries sharing a server list its Secrets and manifests again: each is made once.
    let mut wanted = BTreeSet::new();
    let secrets: Vec<Value> = (scenarios.iter().flat_map(|s| &s.secrets))
        .filter(|want| wanted.insert(&want.name))
        .map(|want| sample_secret(want, &ctx.ns))
        .collect::<Result<_>>()?;
    msgbench_e2e::secrets::create(ctx, secrets).await?;
    let files: BTreeSet<&String> = scenarios.iter().flat_map(|s| &s.manifests).collect();
    let mut workloads = Vec::new();
    for f in files {
        workloads.extend(manifests::create_sample(&ctx.client, &ctx.ns, f).await?);
    }
    Ok(workloads)
}

/// A sample's Secret with fresh values: a certificate from a CA of its own for `tlsFor`, random
/// strings for `drawn` keys.
fn sample_secret(want: &SampleSecret, ns: &str) -> Result<Value> {
    use rand::distr::{Alphanumeric, SampleString};
    let mut data = serde_json::Map::new();
    for key in &want.drawn {
        let value = Alphanumeric.sample_string(&mut rand::rng(), 24);
        data.insert(key.clone(), value.into());
    }
    let mut secret = serde_json::json!({"metadata": {"name": want.name}});
    if let Some(svc) = &want.tls_for {
        let ca = TestCa::new(&format!("{svc}-ca"))?;
        let mut names = service_names(svc, ns);
        names.push(svc.clone());
        let issued = ca.issue(&names)?;
        data.insert("tls.crt".into(), issued.cert.into());
        data.insert("tls.key".into(), issued.key.into());
        data.insert("ca.crt".into(), ca.pem.into());
        secret["type"] = "kubernetes.io/tls".into();
    }
    secret["stringData"] = data.into();
    Ok(secret)
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

/// Runs without faults in flight at once. Runs on one server queue behind each other (the
/// target lock), so this is what lets the queues of different servers (JetStream, MQTT,
/// WebSocket, Pub/Sub) drain side by side: at most one run per server is active, four or so on
/// the one-CPU node, their latency thresholds only warning here. At 3, the JetStream queue held
/// every slot and the module took 12 minutes.
const IN_FLIGHT: usize = 12;

fn has_faults(sc: &Scenario) -> bool {
    load(&sc.sample).is_ok_and(|doc| {
        doc.pointer("/spec/faults")
            .and_then(Value::as_array)
            .is_some_and(|f| !f.is_empty())
    })
}

/// Applies one scaled sample; its name.
async fn apply(ctx: &TestContext, sc: &Scenario, scale: f64) -> Result<String> {
    let mut doc = load(&sc.sample)?;
    scale_run(&mut doc, scale)?;
    let name = doc["metadata"]["name"]
        .as_str()
        .context("name")?
        .to_string();
    kinds::create(&ctx.client, &ctx.ns, &serde_json::to_string(&doc)?).await?;
    Ok(name)
}

/// Waits for an applied sample and checks its outcome and figures: `None` if it passed, else
/// the failure (each is printed as it ends).
async fn outcome(ctx: &TestContext, sc: &Scenario, name: String, t: Instant) -> Option<String> {
    match check(ctx, sc, &name).await {
        Ok(()) => {
            eprintln!("scenario {}: ok in {:.0?}", sc.sample, t.elapsed());
            None
        }
        Err(e) => {
            eprintln!(
                "scenario {}: FAILED in {:.0?}: {e:#}",
                sc.sample,
                t.elapsed()
            );
            Some(format!("{} ({}): {e:#}", sc.sample, sc.scenario))
        }
    }
}

async fn check(ctx: &TestContext, sc: &Scenario, name: &str) -> Result<()> {
    let done = finished(ctx, name, Duration::from_secs(420)).await?;
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
