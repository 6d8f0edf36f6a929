//! Waiting on conditions with deadlines — never sleeping and hoping.
use anyhow::{anyhow, bail, Result};
use kube::api::Api;
use kube::runtime::wait::await_condition;
use kube::Resource;
use serde::de::DeserializeOwned;
use serde::Serialize;
use std::fmt::Debug;
use std::future::Future;
use std::time::{Duration, Instant};

/// Watch `name` until `cond` holds; on timeout the error names `what` and shows the last state.
pub async fn until<K>(
    api: &Api<K>,
    name: &str,
    timeout: Duration,
    what: &str,
    cond: impl Fn(&K) -> bool + Send + 'static,
) -> Result<K>
where
    K: Resource + Clone + Debug + DeserializeOwned + Serialize + Send + 'static,
{
    let watch = await_condition(api.clone(), name, move |o: Option<&K>| o.is_some_and(&cond));
    match tokio::time::timeout(timeout, watch).await {
        Ok(Ok(Some(obj))) => Ok(obj),
        Ok(Ok(None)) => bail!("{what}: {name} was deleted while waiting"),
        Ok(Err(e)) => Err(anyhow!(e).context(format!("{what}: watching {name}"))),
        Err(_) => {
            let last = match api.get_opt(name).await {
                Ok(Some(o)) => status_json(&o),
                Ok(None) => "object does not exist".into(),
                Err(e) => format!("cannot read it: {e}"),
            };
            bail!("{what}: not reached within {timeout:?}; last state of {name}: {last}")
        }
    }
}

/// Watch `name` until it no longer exists.
pub async fn until_deleted<K>(api: &Api<K>, name: &str, timeout: Duration) -> Result<()>
where
    K: Resource + Clone + Debug + DeserializeOwned + Send + 'static,
{
    let watch = await_condition(api.clone(), name, |o: Option<&K>| o.is_none());
    match tokio::time::timeout(timeout, watch).await {
        Ok(Ok(_)) => Ok(()),
        Ok(Err(e)) => Err(anyhow!(e).context(format!("watching deletion of {name}"))),
        Err(_) => bail!("{name} still exists after {timeout:?}"),
    }
}

/// Re-evaluate `probe` every `interval` until it yields `Some`, for states no watch can deliver
/// (pod-proxy responses, sets of objects). The last error or observation goes into the timeout error.
pub async fn poll<T, F, Fut>(
    timeout: Duration,
    interval: Duration,
    what: &str,
    mut probe: F,
) -> Result<T>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<Option<T>>>,
{
    let deadline = Instant::now() + timeout;
    loop {
        let last = match probe().await {
            Ok(Some(v)) => return Ok(v),
            Ok(None) => "condition not met".to_string(),
            Err(e) => format!("{e:#}"),
        };
        if Instant::now() + interval > deadline {
            bail!("{what}: not reached within {timeout:?} (last: {last})");
        }
        tokio::time::sleep(interval).await;
    }
}

fn status_json<K: Serialize>(obj: &K) -> String {
    let v = serde_json::to_value(obj).unwrap_or_default();
    let shown = v.get("status").unwrap_or(&v).to_string();
    truncate(&shown, 3000)
}

pub fn truncate(s: &str, max: usize) -> String {
    if s.len() <= max {
        return s.to_string();
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}… ({} bytes more)", &s[..end], s.len() - end)
}
