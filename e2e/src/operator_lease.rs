//! The operator's leader-election Lease and its replicas, as the leader tests watch them.
use crate::chart::{NAMESPACE, OPERATOR_DEPLOYMENT, OPERATOR_SELECTOR};
use crate::wait;
use anyhow::{Context, Result};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, ListParams};
use kube::Client;
use std::time::Duration;

/// The chart names the Lease after the operator Deployment.
pub const LEASE: &str = OPERATOR_DEPLOYMENT;
/// The operator's lease duration; a standby may take an abandoned Lease only after it.
pub const LEASE_SECONDS: i32 = 15;

/// The operator pods that may lead: not being deleted, not finished.
pub async fn operator_pods(client: &Client) -> Result<Vec<String>> {
    let mut names: Vec<String> = Api::<Pod>::namespaced(client.clone(), NAMESPACE)
        .list(&ListParams::default().labels(OPERATOR_SELECTOR))
        .await?
        .items
        .into_iter()
        // A pod that stepped down and exited can linger as a finished pod: not an operator.
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
    Api::<Lease>::namespaced(client.clone(), NAMESPACE)
        .get(LEASE)
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
        &Api::<Lease>::namespaced(client.clone(), NAMESPACE),
        LEASE,
        timeout,
        &format!("Lease {LEASE} held by one of {pods:?}"),
        move |l: &Lease| holder(l).is_some_and(|h| pods.contains(&h)),
    )
    .await?;
    holder(&lease).context("holder")
}
