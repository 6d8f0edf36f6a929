//! One fresh namespace per test: created before, deleted after a pass, kept (with a diagnostics
//! dump) after a failure or panic.
use crate::{chart, cluster, diagnostics};
use anyhow::{Context, Result};
use futures::FutureExt;
use k8s_openapi::api::core::v1::{Namespace, Pod};
use kube::api::{Api, DeleteParams, ListParams, ObjectMeta, PostParams};
use kube::Client;
use std::collections::BTreeMap;
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::time::Duration;

/// Label on every namespace the suite creates, so leftovers can be found and removed.
pub use crate::cluster::exported::e2e_namespace_label as e2e_label;

#[derive(Clone)]
pub struct TestContext {
    pub client: Client,
    /// The test's own namespace.
    pub ns: String,
    pub test: String,
}

/// Run `body` in a fresh namespace with the operator installed. Panics (failing the test) when the
/// body errors or panics, after dumping diagnostics and keeping the namespace for inspection.
pub async fn run<F, Fut>(test: &str, body: F)
where
    F: FnOnce(TestContext) -> Fut,
    Fut: Future<Output = Result<()>>,
{
    if let Err(e) = run_inner(test, body).await {
        panic!("e2e test {test} failed: {e:#}");
    }
}

async fn run_inner<F, Fut>(test: &str, body: F) -> Result<()>
where
    F: FnOnce(TestContext) -> Fut,
    Fut: Future<Output = Result<()>>,
{
    let client = cluster::client().await?;
    // helm blocks; keep it off the async workers (whose thread is not the test's: name it here).
    let module = chart::test_module();
    if let Err(e) = tokio::task::spawn_blocking(move || chart::ensure_installed(&module)).await? {
        let dir = diagnostics::dump(&client, chart::namespace()).await;
        anyhow::bail!("{e:#}\n(operator diagnostics in {})", dir.display());
    }
    let ns = create_namespace(&client, test).await?;
    let ctx = TestContext {
        client: client.clone(),
        ns: ns.clone(),
        test: test.into(),
    };
    let outcome = AssertUnwindSafe(body(ctx)).catch_unwind().await;
    let failure = match outcome {
        Ok(Ok(())) => None,
        Ok(Err(e)) => Some(format!("{e:#}")),
        Err(panic) => Some(
            panic
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_else(|| "panic".into()),
        ),
    };
    match failure {
        None => {
            delete_namespace(&client, &ns).await;
            Ok(())
        }
        Some(msg) => {
            let dir = diagnostics::dump(&client, &ns).await;
            anyhow::bail!(
                "{msg}\n(namespace {ns} kept for inspection; diagnostics in {})",
                dir.display()
            )
        }
    }
}

async fn create_namespace(client: &Client, test: &str) -> Result<String> {
    let suffix: u32 = rand::random::<u32>() % 0x10_0000;
    let base: String = test
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_lowercase()
            } else {
                '-'
            }
        })
        .take(40)
        .collect();
    let name = format!("e2e-{}-{suffix:05x}", base.trim_matches('-'));
    let ns = Namespace {
        metadata: ObjectMeta {
            name: Some(name.clone()),
            labels: Some(BTreeMap::from([
                (e2e_label().to_string(), "true".to_string()),
                (
                    "msgbench.dev/e2e-test".to_string(),
                    base.trim_matches('-').to_string(),
                ),
            ])),
            ..Default::default()
        },
        ..Default::default()
    };
    Api::<Namespace>::all(client.clone())
        .create(&PostParams::default(), &ns)
        .await
        .with_context(|| format!("creating namespace {name}"))?;
    Ok(name)
}

async fn delete_namespace(client: &Client, ns: &str) {
    if let Err(e) = Api::<Namespace>::all(client.clone())
        .delete(ns, &DeleteParams::background())
        .await
    {
        eprintln!("warning: deleting namespace {ns}: {e}");
    }
}

/// Delete every namespace earlier e2e runs left behind (failed tests keep theirs) except `keep`, and
/// wait until no pod of theirs is left — a test that needs the node's whole allocatable CPU calls this first.
pub async fn remove_leftover_namespaces(
    client: &Client,
    keep: &str,
    timeout: Duration,
) -> Result<()> {
    let api = Api::<Namespace>::all(client.clone());
    let mut leftovers = Vec::new();
    let labelled = ListParams::default().labels(&format!("{}=true", e2e_label()));
    for n in api.list(&labelled).await?.items {
        let Some(ns) = n.metadata.name.filter(|n| n != keep) else {
            continue;
        };
        // One being deleted (a passed test's, deleted in the background) needs only the wait.
        if n.metadata.deletion_timestamp.is_none() {
            eprintln!(
                "removing leftover e2e namespace {ns} (its diagnostics were saved when it failed)"
            );
            let _ = api.delete(&ns, &DeleteParams::background()).await;
        }
        leftovers.push(ns);
    }
    // What the caller needs is their pods' CPU back. Their other objects may take minutes more
    // (finished_runs leaves ~190 MiB of BenchmarkRun status for the namespace controller).
    for ns in &leftovers {
        let pods = Api::<Pod>::namespaced(client.clone(), ns);
        crate::wait::poll(
            timeout,
            Duration::from_secs(2),
            &format!("no pods left in {ns}"),
            || {
                let pods = pods.clone();
                async move {
                    Ok(pods
                        .list(&ListParams::default())
                        .await?
                        .items
                        .is_empty()
                        .then_some(()))
                }
            },
        )
        .await?;
    }
    Ok(())
}

/// Scale the operator Deployment to `replicas` and wait until exactly that many pods are available.
pub async fn scale_operator(client: &Client, replicas: i32, timeout: Duration) -> Result<()> {
    use k8s_openapi::api::apps::v1::Deployment;
    use kube::api::{Patch, PatchParams};
    let api = Api::<Deployment>::namespaced(client.clone(), chart::namespace());
    let name = chart::operator_deployment();
    api.patch_scale(
        name,
        &PatchParams::default(),
        &Patch::Merge(serde_json::json!({"spec": {"replicas": replicas}})),
    )
    .await
    .with_context(|| format!("scaling {name} to {replicas}"))?;
    crate::wait::until(
        &api,
        name,
        timeout,
        &format!("operator scaled to {replicas}"),
        move |d: &Deployment| {
            let s = d.status.clone().unwrap_or_default();
            s.observed_generation >= d.metadata.generation
                && s.replicas.unwrap_or(0) == replicas
                && s.available_replicas.unwrap_or(0) == replicas
        },
    )
    .await?;
    Ok(())
}

/// The operator container's memory limit, in bytes, as the installed Deployment sets it.
pub async fn operator_memory_limit(client: &Client) -> Result<i64> {
    use k8s_openapi::api::apps::v1::Deployment;
    let d = Api::<Deployment>::namespaced(client.clone(), chart::namespace())
        .get(chart::operator_deployment())
        .await
        .context("reading the operator Deployment")?;
    let q = d
        .spec
        .and_then(|s| s.template.spec)
        .and_then(|s| s.containers.into_iter().next())
        .and_then(|c| c.resources?.limits?.get("memory").cloned())
        .context("the operator has no memory limit")?;
    // The chart writes Mi.
    let mib: i64 =
        q.0.strip_suffix("Mi")
            .context("memory limit not in Mi")?
            .parse()?;
    Ok(mib * 1048576)
}
