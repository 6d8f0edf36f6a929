//! The operator's runner-control signing key (`runner_api::control_auth`), kept in one Secret in
//! the operator's own namespace so every replica and every restart signs with the same key
//! (runs in flight keep working across a leader change). That Secret is the only one the
//! operator reads: the chart grants `get` on it by name, in that namespace only.
//!
//! The Secret holds the current seed (`ed25519.seed`) and, after a rotation, the previous one
//! (`ed25519.previous.seed`). The operator signs every credential with both, and agent pods get
//! both public keys: pods made before the rotation (which know only the old key) and after it
//! keep working. A rotation is made by hand (see operator/RBAC.md): the operator does not
//! rewrite the Secret itself.
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::ByteString;
use kube::api::PostParams;
use kube::{Api, Client};
use runner_api::control_auth::{Claim, ControlSigner, PREVIOUS_SEED_KEY, SEED_KEY};
use std::collections::BTreeMap;

/// The seed under `key` in `secret`: `None` when absent, an error when not 32 bytes.
fn seed_at(secret: &Secret, key: &str) -> Result<Option<[u8; 32]>, String> {
    let Some(bytes) = secret.data.as_ref().and_then(|d| d.get(key)) else {
        return Ok(None);
    };
    let seed = bytes.0.clone().try_into();
    seed.map(Some)
        .map_err(|_| format!("key {key:?} is not 32 bytes"))
}

/// The signer of the seeds in `secret` (current, and previous if there is one).
pub fn signer_of(secret: &Secret) -> Result<ControlSigner, String> {
    let current = seed_at(secret, SEED_KEY)?.ok_or_else(|| format!("has no key {SEED_KEY:?}"))?;
    let signer = ControlSigner::from_seed(current);
    Ok(match seed_at(secret, PREVIOUS_SEED_KEY)? {
        Some(previous) => signer.with_previous(previous),
        None => signer,
    })
}

/// Signs one credential per request: for `scope`, the request's method and path, now, with a
/// fresh random nonce (an agent accepts each credential once, for that request only).
#[derive(Clone, Copy, Debug)]
pub struct RequestSigner<'a> {
    signer: &'a ControlSigner,
    scope: &'a str,
}

impl<'a> RequestSigner<'a> {
    pub fn new(signer: &'a ControlSigner, scope: &'a str) -> Self {
        Self { signer, scope }
    }

    /// The credential for `method path` (path with its query, as sent).
    pub fn credential(&self, method: &str, path: &str) -> String {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        let claim = Claim {
            scope: self.scope,
            method,
            path,
        };
        self.signer.credential(&claim, now, rand::random())
    }
}

/// A new key Secret named `name` holding `seed`.
pub fn key_secret(namespace: &str, name: &str, seed: [u8; 32]) -> Secret {
    Secret {
        metadata: ObjectMeta {
            name: Some(name.into()),
            namespace: Some(namespace.into()),
            labels: Some(BTreeMap::from([(
                "app.kubernetes.io/managed-by".to_string(),
                crate::runtime::CONTROLLER_NAME.to_string(),
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
    signer_of(&secret).map_err(|e| {
        anyhow::anyhow!("the control key Secret {namespace}/{name} {e}: delete it to have a new one made (runs in flight then fail)")
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_secret_round_trips_and_a_damaged_one_is_named() {
        let s = key_secret("msgbench-system", "k", [3; 32]);
        assert_eq!(s.immutable, Some(true));
        let signer = signer_of(&s).unwrap();
        assert_eq!(
            signer.public_keys(),
            ControlSigner::from_seed([3; 32]).public_key()
        );
        let mut short = s.clone();
        short
            .data
            .as_mut()
            .unwrap()
            .get_mut(SEED_KEY)
            .unwrap()
            .0
            .pop();
        assert!(signer_of(&short).unwrap_err().contains("32 bytes"));
        assert!(signer_of(&Secret::default())
            .unwrap_err()
            .contains(SEED_KEY));
    }

    /// A rotated Secret (current and previous seed): both public keys go to agent pods, the
    /// current one first; a damaged previous seed is named.
    #[test]
    fn a_rotated_secret_gives_both_keys() {
        let mut s = key_secret("msgbench-system", "k", [3; 32]);
        let data = s.data.as_mut().unwrap();
        data.insert(PREVIOUS_SEED_KEY.into(), ByteString(vec![2; 32]));
        let signer = signer_of(&s).unwrap();
        let want = ControlSigner::from_seed([3; 32]).with_previous([2; 32]);
        assert_eq!(signer.public_keys(), want.public_keys());
        assert!(signer.public_keys().contains(','));
        s.data
            .as_mut()
            .unwrap()
            .get_mut(PREVIOUS_SEED_KEY)
            .unwrap()
            .0
            .pop();
        assert!(signer_of(&s).unwrap_err().contains(PREVIOUS_SEED_KEY));
    }

    /// Each request gets its own credential, accepted for that request only.
    #[test]
    fn each_request_is_signed_for_itself() {
        use runner_api::control_auth::ControlVerifier;
        let signer = ControlSigner::from_seed([3; 32]);
        let per_request = RequestSigner::new(&signer, "uid-1");
        let (a, b) = (
            per_request.credential("GET", "/progress"),
            per_request.credential("GET", "/progress"),
        );
        assert_ne!(a, b, "a fresh nonce each time");
        let v = ControlVerifier::new(&signer.public_keys(), "uid-1").unwrap();
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs();
        assert_eq!(v.check(&a, "GET", "/progress", now), Ok(()));
        assert_eq!(v.check(&b, "GET", "/progress", now), Ok(()));
        assert!(v.check(&a, "GET", "/progress", now).is_err());
        let post = per_request.credential("POST", "/start");
        assert!(v.check(&post, "POST", "/stop", now).is_err());
    }
}
