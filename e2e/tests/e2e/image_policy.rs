//! The trust model's image bound (operator/RBAC.md): the shipped ValidatingAdmissionPolicy
//! (config/policies/allowed-images.yaml), bound to this test's namespace only, refuses a run
//! or a server whose image is not on its list, naming the image, and admits the defaults.
use anyhow::{bail, ensure, Context, Result};
use k8s_openapi::api::admissionregistration::v1::{
    ValidatingAdmissionPolicy, ValidatingAdmissionPolicyBinding,
};
use kube::api::{DeleteParams, PostParams};
use kube::Api;
use msgbench_e2e::cluster::repo_root;
use msgbench_e2e::{kinds, run, wait, TestContext};
use serde::Deserialize;
use std::time::Duration;

fn run_with(image: &str) -> String {
    format!(
        r#"
apiVersion: msgbench.dev/v1alpha1
kind: BenchmarkRun
metadata:
  name: policed
spec:
  target:
    serverRef: {{kind: JetStreamCluster, name: js3}}
  workload: {{protocol: nats, durationSeconds: 5}}
  runners: {{image: "{image}"}}
"#
    )
}

const SERVER: &str = r#"
apiVersion: msgbench.dev/v1alpha1
kind: PubSubServer
metadata:
  name: policed
spec:
  image: registry.example/anything:latest
"#;

#[tokio::test]
async fn images_outside_the_allowed_list_are_refused_at_admission() {
    run("image-policy", body).await;
}

async fn body(ctx: TestContext) -> Result<()> {
    let name = format!("msgbench-allowed-images-{}", ctx.ns);
    let (mut policy, mut binding) = shipped_policy()?;
    policy.metadata.name = Some(name.clone());
    binding.metadata.name = Some(name.clone());
    let bspec = binding.spec.as_mut().context("binding spec")?;
    bspec.policy_name = Some(name.clone());
    bspec.match_resources = Some(serde_json::from_value(serde_json::json!({
        "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": ctx.ns}}
    }))?);
    let policies: Api<ValidatingAdmissionPolicy> = Api::all(ctx.client.clone());
    let bindings: Api<ValidatingAdmissionPolicyBinding> = Api::all(ctx.client.clone());
    policies.create(&PostParams::default(), &policy).await?;
    bindings.create(&PostParams::default(), &binding).await?;
    let result = checks(&ctx).await;
    let _ = bindings.delete(&name, &DeleteParams::default()).await;
    let _ = policies.delete(&name, &DeleteParams::default()).await;
    result
}

async fn checks(ctx: &TestContext) -> Result<()> {
    // The API server picks a new policy up within a second or so: wait for the first refusal.
    let refused = wait::poll(
        Duration::from_secs(60),
        Duration::from_millis(500),
        "the policy refuses a foreign runner image",
        || async { Ok(dry_run(ctx, &run_with("evil.example/miner:1")).await?.err()) },
    )
    .await?;
    eprintln!("refused: {refused}");
    ensure!(
        refused.contains("evil.example/miner:1") && refused.contains("is not allowed"),
        "the refusal names the image and the rule: {refused}"
    );
    // msgbench's own runner image named explicitly, and a run that leaves the image to the
    // operator (the chart's `images`, chosen by whoever installed it, not by the run's author).
    let default = "ghcr.io/msgbench/bench-runner:0.1.0";
    if let Err(msg) = dry_run(ctx, &run_with(default)).await? {
        bail!("the default runner image was refused: {msg}");
    }
    let unset = run_with(default).replace(&format!("  runners: {{image: \"{default}\"}}\n"), "");
    ensure!(!unset.contains("runners:"), "{unset}");
    if let Err(msg) = dry_run(ctx, &unset).await? {
        bail!("a run leaving the image to the operator was refused: {msg}");
    }
    match dry_run(ctx, SERVER).await? {
        Ok(()) => bail!("a PubSubServer with a foreign image was admitted"),
        Err(msg) => ensure!(msg.contains("registry.example/anything"), "{msg}"),
    }
    Ok(())
}

fn shipped_policy() -> Result<(ValidatingAdmissionPolicy, ValidatingAdmissionPolicyBinding)> {
    let text = std::fs::read_to_string(repo_root().join("config/policies/allowed-images.yaml"))?;
    let mut docs = serde_norway::Deserializer::from_str(&text);
    let policy = ValidatingAdmissionPolicy::deserialize(docs.next().context("policy")?)?;
    let binding = ValidatingAdmissionPolicyBinding::deserialize(docs.next().context("binding")?)?;
    Ok((policy, binding))
}

async fn dry_run(ctx: &TestContext, manifest: &str) -> Result<std::result::Result<(), String>> {
    kinds::dry_run(&ctx.client, &ctx.ns, manifest).await
}
