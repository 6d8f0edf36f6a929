//! Apply a desired child set with server-side apply (one field manager, forced), skip children
//! that are already as desired, and delete children of this instance that are no longer desired.
//! Generated Secrets are created (never applied, read or deleted) before the workloads.

use super::subset::is_contained;
use crate::runtime::error::Result;
use crate::runtime::metrics::Metrics;
use crate::runtime::CONTROLLER_NAME;
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::NamespaceResourceScope;
use kube::api::{DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::{Api, Client, Resource, ResourceExt};
use msgbench_operator_core::meta::{stamp_hash, Owner, ANNOTATION_APPLIED_HASH};
use msgbench_operator_core::pod_observer::PodObservation;
use msgbench_operator_core::server::children::{secret_missing, GeneratedSecret};
use serde::de::DeserializeOwned;
use serde::Serialize;
use std::collections::HashSet;
use std::fmt::Debug;
use std::sync::Mutex;

pub use msgbench_operator_core::server::children::{Applied, Children};

/// Generated Secrets this process has created or found there (`<owner uid>/<name>`). The
/// operator may create Secrets but not read them, so each is created once per process (a 409
/// says it exists) and again only when the kubelet reports it missing: a steady server costs
/// no request. One short string per server object seen.
#[derive(Default)]
pub struct CreatedSecrets(Mutex<HashSet<String>>);

impl CreatedSecrets {
    fn contains(&self, key: &str) -> bool {
        self.0
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .contains(key)
    }
    fn insert(&self, key: String) {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).insert(key);
    }
}

/// `pods`: what the kubelet said of the current pods (a generated Secret it cannot find is
/// created again); `created`: the process's memory of generated Secrets.
pub async fn apply_children(
    client: &Client,
    owner: &Owner,
    children: Children,
    metrics: &Metrics,
    pods: &PodObservation,
    created: &CreatedSecrets,
) -> Result<Applied> {
    let mut out = Applied::default();
    // Before the workloads: their pods reference these.
    for secret in &children.generated_secrets {
        create_secret(client, owner, secret, pods, created, metrics, &mut out).await?;
    }
    // Config and networking before the workloads that mount/use them.
    sync_kind(client, owner, children.config_maps, metrics, &mut out).await?;
    sync_kind(client, owner, children.services, metrics, &mut out).await?;
    sync_kind(client, owner, children.network_policies, metrics, &mut out).await?;
    sync_kind(
        client,
        owner,
        children.pod_disruption_budgets,
        metrics,
        &mut out,
    )
    .await?;
    out.stateful_sets = sync_kind(client, owner, children.stateful_sets, metrics, &mut out).await?;
    out.deployments = sync_kind(client, owner, children.deployments, metrics, &mut out).await?;
    Ok(out)
}

/// Creates `secret` with a fresh random value unless this process knows it exists. The value
/// goes to the API server only: never logged, never in status.
async fn create_secret(
    client: &Client,
    owner: &Owner,
    secret: &GeneratedSecret,
    pods: &PodObservation,
    created: &CreatedSecrets,
    metrics: &Metrics,
    out: &mut Applied,
) -> Result<()> {
    let name = secret.name();
    let key = format!("{}/{name}", owner.owner_ref.uid);
    if created.contains(&key) && !secret_missing(pods, name) {
        return Ok(());
    }
    // 192 bits, hex: safe inside a route URL without escaping.
    let value = hex::encode(rand::random::<[u8; 24]>());
    let api: Api<Secret> = Api::namespaced(client.clone(), &owner.namespace);
    match api
        .create(&PostParams::default(), &secret.with_value(&value))
        .await
    {
        Ok(_) => {
            tracing::info!(%name, "created generated Secret");
            metrics.child_written(owner.kind_label, "create");
            out.applied += 1;
        }
        Err(kube::Error::Api(e)) if e.code == 409 => {}
        Err(e) => return Err(e.into()),
    }
    created.insert(key);
    Ok(())
}

async fn sync_kind<T>(
    client: &Client,
    owner: &Owner,
    desired: Vec<T>,
    metrics: &Metrics,
    out: &mut Applied,
) -> Result<Vec<T>>
where
    T: Resource<DynamicType = (), Scope = NamespaceResourceScope>
        + Clone
        + Debug
        + Serialize
        + DeserializeOwned,
{
    let api: Api<T> = Api::namespaced(client.clone(), &owner.namespace);
    let live = api
        .list(&ListParams::default().labels(&owner.children_selector()))
        .await?
        .items;
    let mut current = Vec::with_capacity(desired.len());
    for mut want in desired {
        let hash = stamp_hash(&mut want)?;
        let name = want.name_any();
        if let Some(have) = live.iter().find(|o| o.name_any() == name) {
            let same_hash = have.annotations().get(ANNOTATION_APPLIED_HASH) == Some(&hash);
            if same_hash
                && is_contained(&serde_json::to_value(&want)?, &serde_json::to_value(have)?)
            {
                current.push(have.clone());
                continue;
            }
        }
        let params = PatchParams::apply(CONTROLLER_NAME).force();
        let applied = api.patch(&name, &params, &Patch::Apply(&want)).await?;
        tracing::info!(kind = T::kind(&()).as_ref(), %name, "applied child");
        metrics.child_written(owner.kind_label, "apply");
        out.applied += 1;
        current.push(applied);
    }
    // Orphans: ours by label AND by controller owner reference, but no longer desired.
    for stale in live.iter().filter(|o| {
        !current.iter().any(|c| c.name_any() == o.name_any())
            && o.owner_references()
                .iter()
                .any(|r| r.uid == owner.owner_ref.uid)
    }) {
        let name = stale.name_any();
        api.delete(&name, &DeleteParams::background()).await?;
        tracing::info!(kind = T::kind(&()).as_ref(), %name, "deleted orphaned child");
        metrics.child_written(owner.kind_label, "delete");
        out.deleted += 1;
    }
    Ok(current)
}
