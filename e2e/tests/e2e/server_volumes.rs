//! Server volumes follow the CR: a JetStreamCluster with file storage gets one PVC per server,
//! owned through its StatefulSet's retention policy (whenDeleted: Delete), and deleting the CR
//! deletes the PVCs, so the PVs return to the pool instead of piling up.
use anyhow::{ensure, Result};
use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::PersistentVolumeClaim;
use kube::api::{Api, DeleteParams, ListParams};
use msgbench_e2e::kinds::{self, Kind};
use msgbench_e2e::{run, servers, wait, TestContext};
use std::time::Duration;

const SERVER: &str = r#"
apiVersion: msgbench.dev/v1alpha1
kind: JetStreamCluster
metadata:
  name: vol-js
spec:
  replicas: 1
  jetstream:
    storage:
      type: file
      size: 64Mi
  resources:
    requests: {cpu: 10m, memory: 64Mi}
    limits: {memory: 256Mi}
  placement:
    podAntiAffinity: none
"#;

#[tokio::test]
async fn deleting_a_server_cr_deletes_its_volume_claims() {
    run("server-volumes", body).await;
}

async fn body(ctx: TestContext) -> Result<()> {
    kinds::create(&ctx.client, &ctx.ns, SERVER).await?;
    servers::wait_ready(
        &ctx,
        Kind::JetStreamCluster,
        "vol-js",
        Duration::from_secs(240),
    )
    .await?;

    let sts: Api<StatefulSet> = Api::namespaced(ctx.client.clone(), &ctx.ns);
    let set = sts
        .list(&ListParams::default().labels(&servers::instance_selector("vol-js")))
        .await?
        .items;
    ensure!(set.len() == 1, "one StatefulSet, found {}", set.len());
    let policy = set[0]
        .spec
        .as_ref()
        .and_then(|s| s.persistent_volume_claim_retention_policy.clone())
        .unwrap_or_default();
    ensure!(
        policy.when_deleted.as_deref() == Some("Delete")
            && policy.when_scaled.as_deref() == Some("Retain"),
        "retention policy {policy:?}"
    );

    let pvcs: Api<PersistentVolumeClaim> = Api::namespaced(ctx.client.clone(), &ctx.ns);
    let lp = ListParams::default().labels("app.kubernetes.io/instance=vol-js");
    let claims = pvcs.list(&lp).await?.items;
    ensure!(
        claims.len() == 1,
        "one PVC per server, found {}",
        claims.len()
    );
    let bound = claims[0].status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Bound");
    ensure!(bound, "PVC bound: {:?}", claims[0].status);

    Kind::JetStreamCluster
        .api(&ctx.client, &ctx.ns)
        .delete("vol-js", &DeleteParams::foreground())
        .await?;
    wait::poll(
        Duration::from_secs(120),
        Duration::from_secs(1),
        "PVCs of vol-js deleted with the CR",
        || {
            let (pvcs, lp) = (pvcs.clone(), lp.clone());
            async move {
                let left: Vec<String> = pvcs
                    .list(&lp)
                    .await?
                    .items
                    .into_iter()
                    .filter_map(|p| p.metadata.name)
                    .collect();
                if left.is_empty() {
                    Ok(Some(()))
                } else {
                    anyhow::bail!("left: {left:?}")
                }
            }
        },
    )
    .await
}
