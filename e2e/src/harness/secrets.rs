//! Secrets a test makes, and checks that a secret value never shows where people and tools look.
use crate::TestContext;
use anyhow::{ensure, Result};
use k8s_openapi::api::core::v1::{ConfigMap, Event, Pod, Secret};
use kube::api::{Api, ListParams, LogParams, PostParams};
use kube::ResourceExt;

/// Creates Secrets in the test namespace, each given as its JSON (`metadata.name`, `type`,
/// `stringData`): the Secrets a test's servers and runs name.
pub async fn create(
    ctx: &TestContext,
    secrets: impl IntoIterator<Item = serde_json::Value>,
) -> Result<()> {
    use anyhow::Context;
    let api = Api::<Secret>::namespaced(ctx.client.clone(), &ctx.ns);
    for s in secrets {
        let secret: Secret = serde_json::from_value(s)?;
        let name = secret.name_any();
        (api.create(&PostParams::default(), &secret).await)
            .with_context(|| format!("creating Secret {name}"))?;
    }
    Ok(())
}

/// Fails naming the place where `token` (a secret value) shows up: the BenchmarkRun
/// (`run_json`), any ConfigMap or Event of the test namespace, the logs of run `run`'s runner
/// pods, or the operator's log.
pub async fn never_shown(ctx: &TestContext, token: &str, run: &str, run_json: &str) -> Result<()> {
    ensure!(
        !run_json.contains(token),
        "the token is in the BenchmarkRun"
    );
    let lp = ListParams::default();
    for cm in Api::<ConfigMap>::namespaced(ctx.client.clone(), &ctx.ns)
        .list(&lp)
        .await?
    {
        let text = serde_json::to_string(&cm.data)?;
        ensure!(
            !text.contains(token),
            "the token is in ConfigMap {}",
            cm.name_any()
        );
    }
    for ev in Api::<Event>::namespaced(ctx.client.clone(), &ctx.ns)
        .list(&lp)
        .await?
    {
        ensure!(
            !ev.message.unwrap_or_default().contains(token),
            "the token is in an Event"
        );
    }
    let runners = logs_of(ctx, &ctx.ns, &format!("app.kubernetes.io/instance={run}")).await?;
    ensure!(runners.0 > 0, "no runner pod left to read");
    ensure!(!runners.1.contains(token), "the token is in a runner log");
    let operator = logs_of(
        ctx,
        crate::chart::namespace(),
        "app.kubernetes.io/name=msgbench,app.kubernetes.io/component=operator",
    )
    .await?;
    ensure!(operator.0 > 0, "no operator pod to read");
    ensure!(
        !operator.1.contains(token),
        "the token is in the operator's log"
    );
    Ok(())
}

/// How many pods matched, and all their containers' logs together.
pub async fn logs_of(ctx: &TestContext, ns: &str, selector: &str) -> Result<(usize, String)> {
    let pods: Api<Pod> = Api::namespaced(ctx.client.clone(), ns);
    let list = pods.list(&ListParams::default().labels(selector)).await?;
    let mut all = String::new();
    for p in &list.items {
        let lp = LogParams {
            container: p
                .spec
                .as_ref()
                .and_then(|s| s.containers.first())
                .map(|c| c.name.clone()),
            ..LogParams::default()
        };
        all.push_str(&pods.logs(&p.name_any(), &lp).await?);
    }
    Ok((list.items.len(), all))
}
