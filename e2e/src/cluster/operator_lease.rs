//! The operator's leader-election Lease and its replicas, as the leader tests watch them.
use crate::chart::{self, OPERATOR_SELECTOR};
use crate::harness::scale_operator;
use crate::wait;
use anyhow::{ensure, Context, Result};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, ListParams};
use kube::Client;
use std::time::Duration;

/// The chart names the Lease after the operator Deployment.
pub fn lease_name() -> &'static str {
    chart::operator_deployment()
}
/// The operator's lease duration; a standby may take an abandoned Lease only after it.
pub const LEASE_SECONDS: i32 = 15;

/// The operator pods that may lead: not being deleted, not finished.
pub async fn operator_pods(client: &Client) -> Result<Vec<String>> {
    let mut names: Vec<String> = Api::<Pod>::namespaced(client.clone(), chart::namespace())
        .list(&ListParams::default().labels(OPERATOR_SELECTOR))
        .await?
        .items
        .into_iter()
        // A pod that exited (its controllers would not stop after a step-down) can linger as a
        // finished pod: not an operator.
        .filter(|p| {
            p.metadata.deletion_timestamp.is_none()
                && !matches!(
                    p.status.as_ref().and_then(|s| s.phase.as_deref()),
                    Some("Succeeded" | "Failed")
                )
        })
        .filter_map(|p| p.metadata.name)
        .collect();
    names.sort();
    Ok(names)
}

pub fn holder(l: &Lease) -> Option<String> {
    l.spec.as_ref()?.holder_identity.clone()
}

pub async fn lease(client: &Client) -> Result<Lease> {
    Api::<Lease>::namespaced(client.clone(), chart::namespace())
        .get(lease_name())
        .await
        .context("reading the operator Lease")
}

/// Waits until the Lease names one of `pods` as its holder; returns that pod.
pub async fn lease_held_by_one_of(
    client: &Client,
    pods: &[String],
    timeout: Duration,
) -> Result<String> {
    let pods = pods.to_vec();
    let lease = wait::until(
        &Api::<Lease>::namespaced(client.clone(), chart::namespace()),
        lease_name(),
        timeout,
        &format!("Lease {} held by one of {pods:?}", lease_name()),
        move |l: &Lease| holder(l).is_some_and(|h| pods.contains(&h)),
    )
    .await?;
    holder(&lease).context("holder")
}

/// Scales the operator to two replicas and waits for one to hold the Lease: (leader, standby).
pub async fn two_replicas(client: &Client) -> Result<(String, String)> {
    scale_operator(client, 2, Duration::from_secs(180)).await?;
    let pods = operator_pods(client).await?;
    ensure!(pods.len() == 2, "two operator pods, found {pods:?}");
    let leader = lease_held_by_one_of(client, &pods, Duration::from_secs(60)).await?;
    let standby = pods
        .iter()
        .find(|p| **p != leader)
        .cloned()
        .context("standby")?;
    Ok((leader, standby))
}

/// Back to one operator replica, holding the Lease within `timeout` (what the tests after a
/// leader test expect: the CPU pinning tests need the node).
pub async fn one_leading_replica(client: &Client, timeout: Duration) -> Result<String> {
    scale_operator(client, 1, Duration::from_secs(180)).await?;
    let pods = operator_pods(client).await?;
    lease_held_by_one_of(client, &pods, timeout).await
}
