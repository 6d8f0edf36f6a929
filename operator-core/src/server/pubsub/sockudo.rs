//! The environment of a pusher PubSubServer (sockudo): one app whose credentials come from the
//! user's Secret through secretKeyRef (never a value), and nothing external: local adapter,
//! in-memory cache, app manager and rate limiter, no webhook queue. Connection and API rate
//! limits are off: sockudo's defaults (100 connections per app, 100 API requests a minute)
//! would cap any benchmark.
use crate::server_pod::{secret_env, value_env};
use crate::tuning::threads;
use k8s_openapi::api::core::v1::EnvVar;
use msgbench_crds::pubsub_server::{PubSubServerSpec, PUSHER_SECRET_KEYS};

/// Port of sockudo's Prometheus metrics.
pub const METRICS_PORT: i32 = 9601;

pub fn env(spec: &PubSubServerSpec) -> Vec<EnvVar> {
    let mut env = vec![
        value_env("HOST", "0.0.0.0".to_string()),
        value_env("PORT", spec.port.to_string()),
        value_env("ADAPTER_DRIVER", "local".into()),
        value_env("CACHE_DRIVER", "memory".into()),
        value_env("APP_MANAGER_DRIVER", "memory".into()),
        value_env("QUEUE_DRIVER", "none".into()),
        value_env("RATE_LIMITER_DRIVER", "memory".into()),
        value_env("RATE_LIMITER_ENABLED", "false".into()),
        // 0: no per-app connection limit (sockudo checks `limit > 0`).
        value_env("SOCKUDO_DEFAULT_APP_MAX_CONNECTIONS", "0".into()),
        value_env("METRICS_PORT", METRICS_PORT.to_string()),
    ];
    // sockudo's tokio runtime reads its worker count from here (as WORKER_THREADS elsewhere).
    if let Some(t) = threads(&spec.tuning, &spec.resources) {
        env.push(value_env("TOKIO_WORKER_THREADS", t.to_string()));
    }
    if let Some(app) = &spec.pusher {
        let vars = [
            "SOCKUDO_DEFAULT_APP_ID",
            "SOCKUDO_DEFAULT_APP_KEY",
            "SOCKUDO_DEFAULT_APP_SECRET",
        ];
        for (var, key) in vars.iter().zip(PUSHER_SECRET_KEYS) {
            env.push(secret_env(var, &app.secret_name, key));
        }
    }
    env
}

#[cfg(test)]
mod tests {
    use super::*;
    use msgbench_crds::pubsub_server::PubSubServer;

    #[test]
    fn the_app_comes_from_the_secret_by_reference_only() {
        let pss: PubSubServer = serde_json::from_value(serde_json::json!({
            "apiVersion": "msgbench.dev/v1alpha1", "kind": "PubSubServer",
            "metadata": {"name": "s", "namespace": "bench"},
            "spec": {"protocol": "pusher", "port": 6001, "pusher": {"secretName": "app"}},
        }))
        .unwrap();
        let env = env(&pss.spec);
        let value = |n: &str| env.iter().find(|e| e.name == n)?.value.clone();
        assert_eq!(value("PORT").as_deref(), Some("6001"));
        assert_eq!(value("RATE_LIMITER_ENABLED").as_deref(), Some("false"));
        let refs: Vec<(&str, &str, &str)> = env
            .iter()
            .filter_map(|e| {
                let r = e.value_from.as_ref()?.secret_key_ref.as_ref()?;
                assert!(e.value.is_none());
                Some((e.name.as_str(), r.name.as_str(), r.key.as_str()))
            })
            .collect();
        assert_eq!(
            refs,
            [
                ("SOCKUDO_DEFAULT_APP_ID", "app", "appId"),
                ("SOCKUDO_DEFAULT_APP_KEY", "app", "key"),
                ("SOCKUDO_DEFAULT_APP_SECRET", "app", "secret"),
            ]
        );
        let defaults = crate::operands::DefaultImages::default();
        assert_eq!(
            crate::server::pubsub::build::image(&pss.spec, &defaults),
            defaults.sockudo
        );
    }
}
