//! Deletes a run's children (Jobs and their pods, ConfigMaps, NetworkPolicies) by label.
use crate::runtime::context::Context;
use crate::runtime::error::Result;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::api::networking::v1::NetworkPolicy;
use kube::api::{DeleteParams, ListParams, PropagationPolicy};
use kube::{Api, Resource, ResourceExt};
use msgbench_operator_core::run::runners::build::{self, RunIdentity};
use std::collections::BTreeMap;

/// Deletes this run's Jobs (pods go with them), ConfigMaps and NetworkPolicies whose labels
/// match `pick`.
pub async fn delete(
    ctx: &Context,
    id: &RunIdentity,
    pick: impl Fn(&BTreeMap<String, String>) -> bool,
) -> Result<()> {
    let sel = format!(
        "{}={},{}={}",
        msgbench_operator_core::meta::LABEL_NAME,
        build::KIND_LABEL,
        msgbench_operator_core::meta::LABEL_INSTANCE,
        id.name
    );
    let lp = ListParams::default().labels(&sel);
    let jobs: Api<Job> = Api::namespaced(ctx.client.clone(), &id.namespace);
    delete_matching(&jobs, &lp, &pick).await?;
    let cms: Api<ConfigMap> = Api::namespaced(ctx.client.clone(), &id.namespace);
    delete_matching(&cms, &lp, &pick).await?;
    let nps: Api<NetworkPolicy> = Api::namespaced(ctx.client.clone(), &id.namespace);
    delete_matching(&nps, &lp, &pick).await
}

async fn delete_matching<K>(
    api: &Api<K>,
    lp: &ListParams,
    pick: &impl Fn(&BTreeMap<String, String>) -> bool,
) -> Result<()>
where
    K: Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    let dp = DeleteParams {
        propagation_policy: Some(PropagationPolicy::Background),
        ..DeleteParams::default()
    };
    for o in api.list(lp).await?.items {
        if pick(o.labels()) {
            match api.delete(&o.name_any(), &dp).await {
                Err(kube::Error::Api(s)) if s.code == 404 => {}
                other => {
                    other?;
                }
            }
        }
    }
    Ok(())
}
