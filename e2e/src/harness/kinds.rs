//! The msgbench.dev kinds as dynamic resources, so the suite tests the API server's view of the
//! CRDs (exactly what users send) rather than the Rust types.
use anyhow::{Context, Result};
use kube::api::{Api, DynamicObject, PostParams};
use kube::core::ApiResource;
use kube::Client;
use serde_json::Value;

pub const GROUP: &str = "msgbench.dev";
pub const VERSION: &str = "v1alpha1";

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    JetStreamCluster,
    MqttBroker,
    PubSubServer,
    BenchmarkRun,
}

impl Kind {
    pub fn name(self) -> &'static str {
        match self {
            Kind::JetStreamCluster => "JetStreamCluster",
            Kind::MqttBroker => "MqttBroker",
            Kind::PubSubServer => "PubSubServer",
            Kind::BenchmarkRun => "BenchmarkRun",
        }
    }

    pub fn plural(self) -> &'static str {
        match self {
            Kind::JetStreamCluster => "jetstreamclusters",
            Kind::MqttBroker => "mqttbrokers",
            Kind::PubSubServer => "pubsubservers",
            Kind::BenchmarkRun => "benchmarkruns",
        }
    }

    pub fn from_name(kind: &str) -> Option<Kind> {
        [
            Kind::JetStreamCluster,
            Kind::MqttBroker,
            Kind::PubSubServer,
            Kind::BenchmarkRun,
        ]
        .into_iter()
        .find(|k| k.name() == kind)
    }

    pub fn api_resource(self) -> ApiResource {
        ApiResource {
            group: GROUP.into(),
            version: VERSION.into(),
            api_version: format!("{GROUP}/{VERSION}"),
            kind: self.name().into(),
            plural: self.plural().into(),
        }
    }

    pub fn api(self, client: &Client, ns: &str) -> Api<DynamicObject> {
        Api::namespaced_with(client.clone(), ns, &self.api_resource())
    }
}

/// Parse a manifest (YAML) into a dynamic object of one of the msgbench kinds.
pub fn parse(manifest: &str) -> Result<(Kind, DynamicObject)> {
    let obj: DynamicObject = serde_norway::from_str(manifest).context("parsing manifest YAML")?;
    let kind = obj
        .types
        .as_ref()
        .and_then(|t| Kind::from_name(&t.kind))
        .context("manifest kind is not one of the msgbench.dev kinds")?;
    Ok((kind, obj))
}

/// Create a manifest in `ns` (its own namespace, if any, is replaced).
pub async fn create(client: &Client, ns: &str, manifest: &str) -> Result<DynamicObject> {
    let (kind, mut obj) = parse(manifest)?;
    obj.metadata.namespace = Some(ns.into());
    let name = obj.metadata.name.clone().unwrap_or_default();
    match kind
        .api(client, ns)
        .create(&PostParams::default(), &obj)
        .await
    {
        Ok(o) => Ok(o),
        Err(kube::Error::Api(s)) if s.code == 404 => anyhow::bail!(
            "creating {} {name}: the API server does not serve {}.{GROUP} (CRDs not installed?)",
            kind.name(),
            kind.plural()
        ),
        Err(e) => Err(e).with_context(|| format!("creating {} {name}", kind.name())),
    }
}

/// Server-side dry run of `manifest` in `ns` with strict field validation (like `kubectl
/// apply`): `Ok(Err(message))` when admission refuses it (schema, CEL, an admission policy).
pub async fn dry_run(
    client: &Client,
    ns: &str,
    manifest: &str,
) -> Result<std::result::Result<(), String>> {
    let (kind, mut obj) = parse(manifest)?;
    obj.metadata.namespace = Some(ns.into());
    let uri = format!(
        "/apis/{GROUP}/v1alpha1/namespaces/{ns}/{}?dryRun=All&fieldValidation=Strict",
        kind.plural()
    );
    let req = http::Request::post(&uri)
        .header("content-type", "application/json")
        .body(serde_json::to_vec(&obj)?)?;
    match client.request::<Value>(req).await {
        Ok(_) => Ok(Ok(())),
        // 422: schema/CEL; 400: strict decoding; 403: an admission policy.
        Err(kube::Error::Api(s)) if [400, 403, 422].contains(&s.code) => Ok(Err(s.message)),
        Err(e) => anyhow::bail!("dry run failed for another reason than admission: {e}"),
    }
}

/// `status.conditions[type]` of a dynamic object.
pub fn condition<'a>(obj: &'a DynamicObject, type_: &str) -> Option<&'a Value> {
    obj.data
        .pointer("/status/conditions")?
        .as_array()?
        .iter()
        .find(|c| c.get("type").and_then(Value::as_str) == Some(type_))
}

/// Ready=True for the object's current generation (a stale Ready from an older spec does not count).
pub fn is_ready(obj: &DynamicObject) -> bool {
    is_true_now(obj, "Ready")
}

/// Condition `type_` is True for the object's current generation, as `kubectl wait` judges it.
pub fn is_true_now(obj: &DynamicObject, type_: &str) -> bool {
    let Some(ready) = condition(obj, type_) else {
        return false;
    };
    let current = match (
        ready.get("observedGeneration").and_then(Value::as_i64),
        obj.data
            .pointer("/status/observedGeneration")
            .and_then(Value::as_i64),
        obj.metadata.generation,
    ) {
        (Some(seen), _, Some(gen)) | (None, Some(seen), Some(gen)) => seen >= gen,
        _ => true,
    };
    current && ready.get("status").and_then(Value::as_str) == Some("True")
}

/// A one-line summary of the conditions, for timeout messages.
pub fn conditions_summary(obj: &DynamicObject) -> String {
    obj.data
        .pointer("/status/conditions")
        .and_then(Value::as_array)
        .map(|cs| {
            cs.iter()
                .map(|c| {
                    format!(
                        "{}={} ({}: {})",
                        c.get("type").and_then(Value::as_str).unwrap_or("?"),
                        c.get("status").and_then(Value::as_str).unwrap_or("?"),
                        c.get("reason").and_then(Value::as_str).unwrap_or(""),
                        c.get("message").and_then(Value::as_str).unwrap_or("")
                    )
                })
                .collect::<Vec<_>>()
                .join("; ")
        })
        .unwrap_or_else(|| "no conditions".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn obj(status: serde_json::Value, generation: i64) -> DynamicObject {
        let mut o: DynamicObject = serde_json::from_value(serde_json::json!({
            "apiVersion": "msgbench.dev/v1alpha1", "kind": "JetStreamCluster",
            "metadata": {"name": "x", "generation": generation}, "status": status
        }))
        .unwrap();
        o.metadata.generation = Some(generation);
        o
    }

    #[test]
    fn ready_needs_true_for_the_current_generation() {
        let ready = |gen_seen: i64| {
            serde_json::json!({"conditions": [
            {"type": "Ready", "status": "True", "observedGeneration": gen_seen, "reason": "AllReady"}]})
        };
        assert!(is_ready(&obj(ready(2), 2)));
        assert!(
            !is_ready(&obj(ready(1), 2)),
            "a Ready from the previous spec does not count"
        );
        let not = serde_json::json!({"conditions": [{"type": "Ready", "status": "False", "observedGeneration": 2}]});
        assert!(!is_ready(&obj(not, 2)));
        assert!(!is_ready(&obj(serde_json::json!({}), 1)));
    }

    #[test]
    fn parse_accepts_only_msgbench_kinds() {
        assert!(parse(
            "apiVersion: msgbench.dev/v1alpha1\nkind: MqttBroker\nmetadata: {name: a}\n"
        )
        .is_ok());
        assert!(parse("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n").is_err());
    }
}
