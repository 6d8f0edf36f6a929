//! The servers' environment: their names and routes, Go runtime limits, and references to the
//! TLS and auth Secrets (never a value).
use super::super::nats_conf::{self, CLUSTER_PORT};
use crate::server_pod::{secret_env, tls_env, value_env};
use crate::tuning::{bytes, threads};
use k8s_openapi::api::core::v1::{EnvVar, EnvVarSource, ObjectFieldSelector};
use msgbench_crds::jetstream_cluster::{JetStreamClusterSpec, NatsAuthMode};

pub(super) fn env(spec: &JetStreamClusterSpec, headless: &str, namespace: &str) -> Vec<EnvVar> {
    let mut env = vec![
        EnvVar {
            name: "SERVER_NAME".into(),
            value_from: Some(EnvVarSource {
                field_ref: Some(ObjectFieldSelector {
                    field_path: "metadata.name".into(),
                    ..ObjectFieldSelector::default()
                }),
                ..EnvVarSource::default()
            }),
            ..EnvVar::default()
        },
        value_env(
            "CLUSTER_ADVERTISE",
            format!("$(SERVER_NAME).{headless}.{namespace}.svc:{CLUSTER_PORT}"),
        ),
    ];
    // nats-server once ignored the CPU limit (nats-server #2586): say it explicitly.
    if let Some(t) = threads(&spec.tuning, &spec.resources) {
        env.push(value_env("GOMAXPROCS", t.to_string()));
    }
    // Let the Go GC work harder before the container hits its memory limit.
    let mem_limit = (spec.resources.limits.as_ref())
        .and_then(|l| l.memory.as_ref())
        .and_then(bytes);
    if let Some(m) = mem_limit {
        env.push(value_env("GOMEMLIMIT", (m / 10 * 9).to_string()));
    }
    if let Some(tls) = &spec.tls {
        env.extend(tls_env(&tls.secret_name));
    }
    env.extend(auth_env(spec));
    env
}

/// The credentials the servers check clients against, from the user's Secret.
fn auth_env(spec: &JetStreamClusterSpec) -> Vec<EnvVar> {
    let Some(auth) = &spec.auth else {
        return Vec::new();
    };
    let keys: &[(&str, &str)] = match auth.mode {
        NatsAuthMode::Token => &[("NATS_TOKEN", "token")],
        NatsAuthMode::UserPassword => &[("NATS_USER", "username"), ("NATS_PASSWORD", "password")],
        // The servers need the public key only; the seed stays with the clients.
        NatsAuthMode::Nkey => &[("NATS_NKEY", "nkey")],
    };
    (keys.iter())
        .map(|(var, key)| secret_env(var, &auth.secret_name, key))
        .collect()
}

/// The route password by reference, then every route's URL with it (`nats_conf::route_url`).
/// None for a single server (no cluster block).
pub(super) fn route_env(name: &str, namespace: &str, headless: &str, replicas: i32) -> Vec<EnvVar> {
    if replicas <= 1 {
        return Vec::new();
    }
    let password = secret_env(
        nats_conf::ROUTE_PASSWORD_ENV,
        &nats_conf::route_secret_name(name),
        nats_conf::ROUTE_SECRET_KEY,
    );
    let routes = (0..replicas).map(|i| {
        value_env(
            &nats_conf::route_env(i),
            nats_conf::route_url(name, namespace, headless, i),
        )
    });
    std::iter::once(password).chain(routes).collect()
}
