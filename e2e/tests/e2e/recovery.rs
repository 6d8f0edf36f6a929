//! Self-healing and cleanup: deleting a child (the client Service, the StatefulSet) brings it back
//! with a new UID and the server serving again; deleting the CR removes every child.
use anyhow::{ensure, Context, Result};
use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::Service;
use kube::api::{Api, DeleteParams};
use kube::ResourceExt;
use msgbench_e2e::kinds::{self, Kind};
use msgbench_e2e::servers::{self, Child};
use msgbench_e2e::{probe, run, wait, TestContext};
use std::time::Duration;

const NAME: &str = "heal";

const MANIFEST: &str = r#"
apiVersion: msgbench.dev/v1alpha1
kind: JetStreamCluster
metadata:
  name: heal
spec:
  replicas: 1
  jetstream:
    storage:
      type: memory
    maxMemoryStore: 32Mi
  resources:
    requests: {cpu: 10m, memory: 64Mi}
    limits: {memory: 256Mi}
"#;

#[tokio::test]
async fn deleted_children_come_back_and_cr_deletion_removes_them_all() {
    run("recovery", body).await;
}

async fn body(ctx: TestContext) -> Result<()> {
    kinds::create(&ctx.client, &ctx.ns, MANIFEST).await?;
    servers::wait_ready(&ctx, Kind::JetStreamCluster, NAME, Duration::from_secs(180)).await?;
    let before = servers::children(&ctx, NAME).await?;
    eprintln!("children: {before:?}");
    for kind in ["ConfigMap", "Service", "StatefulSet", "Pod"] {
        ensure!(
            before.iter().any(|c| c.kind == kind),
            "no {kind} among the children {before:?}"
        );
    }

    // Every Service (client and headless) and the StatefulSet, one at a time.
    let services: Vec<Child> = before
        .iter()
        .filter(|c| c.kind == "Service")
        .cloned()
        .collect();
    let svc_api = Api::<Service>::namespaced(ctx.client.clone(), &ctx.ns);
    for svc in &services {
        svc_api
            .delete(&svc.name, &DeleteParams::default())
            .await
            .with_context(|| format!("deleting Service {}", svc.name))?;
        recreated(&svc_api, svc).await?;
    }
    let sts = before
        .iter()
        .find(|c| c.kind == "StatefulSet")
        .cloned()
        .context("no StatefulSet")?;
    let sts_api = Api::<StatefulSet>::namespaced(ctx.client.clone(), &ctx.ns);
    sts_api
        .delete(&sts.name, &DeleteParams::background())
        .await
        .context("deleting the StatefulSet")?;
    let new_sts = recreated(&sts_api, &sts).await?;

    // Serving again: a Ready pod owned by the new StatefulSet answers its health endpoint.
    let new_uid = new_sts.uid().unwrap_or_default();
    let pod = wait::poll(
        Duration::from_secs(180),
        Duration::from_secs(2),
        "a Ready pod of the recreated StatefulSet",
        || {
            let (ctx, new_uid) = (ctx.clone(), new_uid.clone());
            async move {
                let pods = servers::server_pods(&ctx, NAME).await?;
                Ok(pods.into_iter().find(|p| {
                    p.owner_references().iter().any(|o| o.uid == new_uid)
                        && p.status
                            .as_ref()
                            .and_then(|s| s.conditions.as_ref())
                            .is_some_and(|cs| {
                                cs.iter().any(|c| c.type_ == "Ready" && c.status == "True")
                            })
                }))
            }
        },
    )
    .await?;
    let healthz = probe::pod_get(&ctx.client, &ctx.ns, &pod.name_any(), 8222, "/healthz").await?;
    ensure!(
        healthz.contains("ok"),
        "recreated server not healthy: {healthz}"
    );
    servers::wait_ready(&ctx, Kind::JetStreamCluster, NAME, Duration::from_secs(120)).await?;

    // Deleting the CR removes every child (owner references + garbage collection).
    Kind::JetStreamCluster
        .api(&ctx.client, &ctx.ns)
        .delete(NAME, &DeleteParams::background())
        .await
        .context("deleting the JetStreamCluster")?;
    wait::poll(
        Duration::from_secs(180),
        Duration::from_secs(2),
        "every child of the deleted CR gone",
        || {
            let ctx = ctx.clone();
            async move {
                let left = servers::children_including_terminating(&ctx, NAME).await?;
                if left.is_empty() {
                    Ok(Some(()))
                } else {
                    anyhow::bail!("still present: {left:?}")
                }
            }
        },
    )
    .await?;
    Ok(())
}

/// Wait until an object named like `old` exists again with a different UID.
async fn recreated<K>(api: &Api<K>, old: &Child) -> Result<K>
where
    K: kube::Resource
        + Clone
        + std::fmt::Debug
        + serde::de::DeserializeOwned
        + serde::Serialize
        + Send
        + 'static,
{
    let old_uid = old.uid.clone();
    let obj = wait::until(
        api,
        &old.name,
        Duration::from_secs(120),
        &format!("{} {} recreated", old.kind, old.name),
        move |o: &K| {
            o.meta().uid.as_deref() != Some(old_uid.as_str())
                && o.meta().deletion_timestamp.is_none()
        },
    )
    .await?;
    eprintln!(
        "{} {} recreated: uid {} -> {}",
        old.kind,
        old.name,
        old.uid,
        obj.meta().uid.clone().unwrap_or_default()
    );
    Ok(obj)
}

/// Strimzi's bar: children deleted while the operator is down come back when it returns.
#[tokio::test]
async fn children_deleted_while_operator_is_down_come_back() {
    run("recovery-operator-down", operator_down_body).await;
}

async fn operator_down_body(ctx: TestContext) -> Result<()> {
    kinds::create(
        &ctx.client,
        &ctx.ns,
        &MANIFEST.replace("name: heal", "name: heal2"),
    )
    .await?;
    let name = "heal2";
    servers::wait_ready(&ctx, Kind::JetStreamCluster, name, Duration::from_secs(180)).await?;
    let before = servers::children(&ctx, name).await?;
    let victims: Vec<Child> = before
        .iter()
        .filter(|c| c.kind == "Service" || c.kind == "ConfigMap")
        .cloned()
        .collect();
    ensure!(
        !victims.is_empty(),
        "no Service/ConfigMap children: {before:?}"
    );

    msgbench_e2e::harness::scale_operator(&ctx.client, 0, Duration::from_secs(90)).await?;
    // Whatever happens next, the operator comes back for the tests that follow.
    let outcome = async {
        let svc_api = Api::<Service>::namespaced(ctx.client.clone(), &ctx.ns);
        let cm_api =
            Api::<k8s_openapi::api::core::v1::ConfigMap>::namespaced(ctx.client.clone(), &ctx.ns);
        for v in &victims {
            match v.kind {
                "Service" => svc_api
                    .delete(&v.name, &DeleteParams::default())
                    .await
                    .map(|_| ())?,
                _ => cm_api
                    .delete(&v.name, &DeleteParams::default())
                    .await
                    .map(|_| ())?,
            }
            eprintln!("deleted {} {} while the operator is down", v.kind, v.name);
        }
        msgbench_e2e::harness::scale_operator(&ctx.client, 1, Duration::from_secs(120)).await?;
        for v in &victims {
            match v.kind {
                "Service" => recreated(&svc_api, v).await.map(|_| ())?,
                _ => recreated(&cm_api, v).await.map(|_| ())?,
            }
        }
        servers::wait_ready(&ctx, Kind::JetStreamCluster, name, Duration::from_secs(120)).await?;
        anyhow::Ok(())
    }
    .await;
    if outcome.is_err() {
        let _ =
            msgbench_e2e::harness::scale_operator(&ctx.client, 1, Duration::from_secs(120)).await;
    }
    outcome
}
