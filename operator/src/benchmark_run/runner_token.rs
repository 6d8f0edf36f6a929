//! The run's runner token, read or created through the API (the pure Secret builder is in
//! `runner_access`): cached per run, never taken from a Secret the run does not own.
use super::identity::RunIdentity;
use super::runner_access::{new_token, secret_name, token_secret, TOKEN_KEY};
use crate::context::Context;
use crate::error::{Error, Result};
use k8s_openapi::api::core::v1::Secret;
use kube::api::PostParams;
use kube::Api;

/// The run's token: from the cache, else its Secret, else a new Secret. A Secret of that name
/// owned by something else is never used (it would hand our runners a foreign credential).
pub async fn ensure_token(ctx: &Context, id: &RunIdentity) -> Result<String> {
    let uid = id.owner_ref.uid.clone();
    if let Some(t) = ctx.runner_tokens.lock().expect("tokens").get(&uid) {
        return Ok(t.clone());
    }
    let api: Api<Secret> = Api::namespaced(ctx.client.clone(), &id.namespace);
    let name = secret_name(&id.name);
    let secret = match api.get_opt(&name).await? {
        Some(s) => s,
        None => match api
            .create(&PostParams::default(), &token_secret(id, &new_token()))
            .await
        {
            Ok(s) => s,
            Err(kube::Error::Api(e)) if e.code == 409 => api.get(&name).await?,
            Err(e) => return Err(e.into()),
        },
    };
    let owned = secret
        .metadata
        .owner_references
        .iter()
        .flatten()
        .any(|o| o.uid == uid);
    let token = secret
        .data
        .as_ref()
        .and_then(|d| d.get(TOKEN_KEY))
        .and_then(|b| String::from_utf8(b.0.clone()).ok())
        .filter(|t| owned && !t.is_empty())
        .ok_or_else(|| {
            Error::Build(format!(
                "Secret {name} exists but is not this run's runner token (owner or key `{TOKEN_KEY}` differs)"
            ))
        })?;
    ctx.runner_tokens
        .lock()
        .expect("tokens")
        .insert(uid, token.clone());
    Ok(token)
}
