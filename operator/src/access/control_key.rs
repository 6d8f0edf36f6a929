//! The operator's runner-control signing key (`runner_api::control_auth`), kept in one Secret in
//! the operator's own namespace so every replica and every restart signs with the same key
//! (runs in flight keep working across a leader change). That Secret is the only one the
//! operator reads: the chart grants `get` on it by name, in that namespace only.
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::ByteString;
use kube::api::PostParams;
use kube::{Api, Client};
use runner_api::control_auth::{ControlSigner, SEED_KEY};
use std::collections::BTreeMap;

/// The seed in `secret`, if it holds a well-formed one.
pub fn seed_of(secret: &Secret) -> Result<[u8; 32], String> {
    let bytes = secret
        .data
        .as_ref()
        .and_then(|d| d.get(SEED_KEY))
        .ok_or_else(|| format!("has no key {SEED_KEY:?}"))?;
    bytes
        .0
        .clone()
        .try_into()
        .map_err(|_| format!("key {SEED_KEY:?} is not 32 bytes"))
}

/// A new key Secret named `name` holding `seed`.
pub fn key_secret(namespace: &str, name: &str, seed: [u8; 32]) -> Secret {
    Secret {
        metadata: ObjectMeta {
            name: Some(name.into()),
            namespace: Some(namespace.into()),
            labels: Some(BTreeMap::from([(
                "app.kubernetes.io/managed-by".to_string(),
                crate::runtime::context::CONTROLLER_NAME.to_string(),
            )])),
            ..ObjectMeta::default()
        },
        type_: Some("Opaque".into()),
        data: Some(BTreeMap::from([(
            SEED_KEY.to_string(),
            ByteString(seed.to_vec()),
        )])),
        immutable: Some(true),
        ..Secret::default()
    }
}

/// The key from `namespace/name`, created first when missing. Two replicas starting together
/// both end up with whichever Secret was created first.
pub async fn load_or_create(
    client: Client,
    namespace: &str,
    name: &str,
) -> anyhow::Result<ControlSigner> {
    let api: Api<Secret> = Api::namespaced(client, namespace);
    let secret = match api.get_opt(name).await? {
        Some(s) => s,
        None => {
            let fresh = key_secret(namespace, name, rand::random());
            match api.create(&PostParams::default(), &fresh).await {
                Ok(s) => s,
                Err(kube::Error::Api(e)) if e.code == 409 => api.get(name).await?,
                Err(e) => return Err(e.into()),
            }
        }
    };
    let seed = seed_of(&secret).map_err(|e| {
        anyhow::anyhow!("the control key Secret {namespace}/{name} {e}: delete it to have a new one made (runs in flight then fail)")
    })?;
    Ok(ControlSigner::from_seed(seed))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_secret_round_trips_and_a_damaged_one_is_named() {
        let s = key_secret("msgbench-system", "k", [3; 32]);
        assert_eq!(s.immutable, Some(true));
        assert_eq!(seed_of(&s), Ok([3; 32]));
        let mut short = s.clone();
        short
            .data
            .as_mut()
            .unwrap()
            .get_mut(SEED_KEY)
            .unwrap()
            .0
            .pop();
        assert!(seed_of(&short).unwrap_err().contains("32 bytes"));
        assert!(seed_of(&Secret::default()).unwrap_err().contains(SEED_KEY));
    }
}
