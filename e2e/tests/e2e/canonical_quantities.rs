//! A server whose spec writes quantities the API server canonicalises (`0.01` CPU comes back
//! as `10m`, `0.125Gi` as `128Mi`) must not be re-applied on every reconcile: the operator's
//! own child-write counter stays flat while it reconciles the unchanged object again and again
//! (the fake API of the unit tests returns what it was given, so only a real one shows this).
use anyhow::{Context, Result};
use k8s_openapi::api::apps::v1::Deployment;
use kube::api::{Patch, PatchParams};
use kube::Api;
use msgbench_e2e::kinds::Kind;
use msgbench_e2e::{probe, run, servers, wait, TestContext};
use serde_json::json;
use std::time::Duration;

const MANIFEST: &str = r#"
apiVersion: msgbench.dev/v1alpha1
kind: PubSubServer
metadata:
  name: quantities
spec:
  protocol: socketio
  database: memory
  resources:
    requests: {cpu: "0.01", memory: "0.03125Gi"}
    limits: {memory: "0.125Gi"}
"#;

#[tokio::test]
async fn unchanged_children_with_non_canonical_quantities_are_not_rewritten() {
    run("quantities", body).await;
}

async fn body(ctx: TestContext) -> Result<()> {
    msgbench_e2e::kinds::create(&ctx.client, &ctx.ns, MANIFEST).await?;
    servers::wait_ready(
        &ctx,
        Kind::PubSubServer,
        "quantities",
        Duration::from_secs(180),
    )
    .await?;
    let before = counters(&ctx).await?;
    eprintln!("after Ready: {before:?}");
    // Each annotation on the child Deployment wakes the operator (it watches its children),
    // which then compares the whole desired Deployment with the live one.
    let deployments: Api<Deployment> = Api::namespaced(ctx.client.clone(), &ctx.ns);
    let mut seen = before;
    for i in 0..3 {
        let patch = json!({"metadata": {"annotations": {"e2e.msgbench.dev/poke": i.to_string()}}});
        deployments
            .patch("quantities", &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .context("annotate the Deployment")?;
        let last = seen.reconciles;
        seen = wait::poll(
            Duration::from_secs(60),
            Duration::from_millis(500),
            "the operator reconciles the PubSubServer again",
            || async {
                let c = counters(&ctx).await?;
                Ok((c.reconciles > last).then_some(c))
            },
        )
        .await?;
    }
    eprintln!("after 3 more reconciles: {seen:?}");
    anyhow::ensure!(
        seen.applies == before.applies,
        "{} child applies for an unchanged PubSubServer over {} reconciles (quantities compared \
         as text?)",
        seen.applies - before.applies,
        seen.reconciles - before.reconciles
    );
    Ok(())
}

#[derive(Clone, Copy, Debug)]
struct Counters {
    reconciles: u64,
    applies: u64,
}

/// PubSubServer reconciles and child applies, summed over the running operator pods.
async fn counters(ctx: &TestContext) -> Result<Counters> {
    let text = probe::operator_metrics(&ctx.client).await?;
    Ok(Counters {
        reconciles: sample(
            &text,
            "msgbench_reconcile_total",
            &[r#"kind="pubsubserver""#],
        ),
        applies: sample(
            &text,
            "msgbench_child_writes_total",
            &[r#"kind="pubsubserver""#, r#"verb="apply""#],
        ),
    })
}

/// The value of metric `name` on the line holding every one of `labels` (0 when absent).
fn sample(text: &str, name: &str, labels: &[&str]) -> u64 {
    text.lines()
        .filter(|l| l.starts_with(&format!("{name}{{")))
        .filter(|l| labels.iter().all(|want| l.contains(want)))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .map(|v| v as u64)
        .sum()
}
