//! Credentials for targets that require them (a JetStreamCluster or an MqttBroker with
//! `spec.auth`, a PubSubServer with protocol pusher), pure. The
//! runner container reads each from the server's own Secret through `secretKeyRef` environment
//! variables; the agent config (a ConfigMap) names only the variables. The operator never reads
//! the Secret, so it needs no read access to Secrets.
use crate::server_pod::{mount, secret_volume};
use k8s_openapi::api::core::v1::{EnvVar, EnvVarSource, SecretKeySelector, Volume, VolumeMount};
use msgbench_crds::jetstream_cluster::{NatsAuth, NatsAuthMode};
use runner_api::agent::{TargetAuth, TargetTls};

/// What the runner pods take from the targets' Secrets: environment variables (credentials)
/// and read-only volumes (TLS CAs), all by reference.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RunnerSecrets {
    pub env: Vec<EnvVar>,
    pub volumes: Vec<Volume>,
    pub mounts: Vec<VolumeMount>,
}

/// Where runner pods mount each TLS target's CA: `<dir>/<n>/ca.crt`.
pub const TLS_CA_DIR: &str = "/etc/msgbench/tls";

/// For each distinct TLS target (URL, Secret): where the agent finds its CA, and the volume
/// and mount that put it there. Only `ca.crt`: the server's key never reaches a runner.
pub fn runner_tls<'a>(
    targets: impl IntoIterator<Item = (&'a str, &'a str)>,
) -> (Vec<TargetTls>, Vec<Volume>, Vec<VolumeMount>) {
    let (mut config, mut volumes, mut mounts) = (Vec::<TargetTls>::new(), Vec::new(), Vec::new());
    for (url, secret) in targets {
        if config.iter().any(|t| t.target == url) {
            continue;
        }
        let (name, dir) = (
            format!("tls-ca-{}", config.len()),
            format!("{TLS_CA_DIR}/{}", config.len()),
        );
        volumes.push(secret_volume(&name, secret, &["ca.crt"]));
        mounts.push(mount(&name, &dir, true));
        config.push(TargetTls {
            target: url.into(),
            ca_file: Some(format!("{dir}/ca.crt")),
            ..TargetTls::default()
        });
    }
    (config, volumes, mounts)
}

/// The Secret a target's clients authenticate with.
#[derive(Clone, Debug, PartialEq)]
pub enum TargetSecret {
    /// A JetStreamCluster's `spec.auth`.
    Nats(NatsAuth),
    /// A PubSubServer's Pusher app (`spec.pusher.secretName`).
    PusherApp { secret_name: String },
    /// An MqttBroker's user (`spec.auth.secretName`): sent in MQTT CONNECT.
    MqttUser { secret_name: String },
}

impl TargetSecret {
    /// The Secret's name and (variable suffix, Secret key) pairs: the suffixes are what
    /// `runner_api::target::Credentials::from_env` reads.
    fn variables(&self) -> (&str, &'static [(&'static str, &'static str)]) {
        match self {
            TargetSecret::Nats(a) => (
                &a.secret_name,
                match a.mode {
                    NatsAuthMode::Token => &[("TOKEN", "token")],
                    NatsAuthMode::UserPassword => {
                        &[("USERNAME", "username"), ("PASSWORD", "password")]
                    }
                    NatsAuthMode::Nkey => &[("NKEY_SEED", "seed")],
                },
            ),
            TargetSecret::MqttUser { secret_name } => (
                secret_name,
                &[("USERNAME", "username"), ("PASSWORD", "password")],
            ),
            TargetSecret::PusherApp { secret_name } => (
                secret_name,
                &[
                    ("PUSHER_APP_ID", "appId"),
                    ("PUSHER_KEY", "key"),
                    ("PUSHER_SECRET", "secret"),
                ],
            ),
        }
    }
}

/// For each distinct target URL with credentials: where the agent finds them, and the
/// environment variables that fill them in.
pub fn runner_auth<'a>(
    targets: impl IntoIterator<Item = (&'a str, &'a TargetSecret)>,
) -> (Vec<TargetAuth>, Vec<EnvVar>) {
    let (mut config, mut env) = (Vec::<TargetAuth>::new(), Vec::new());
    for (url, auth) in targets {
        if config.iter().any(|a| a.target == url) {
            continue;
        }
        let prefix = format!("MSGBENCH_AUTH_{}", config.len());
        env.extend(auth.env(&prefix));
        config.push(TargetAuth {
            target: url.to_string(),
            env_prefix: prefix,
            ..TargetAuth::default()
        });
    }
    (config, env)
}

impl TargetSecret {
    /// `<prefix>_<SUFFIX>` for each of the Secret's keys, by reference.
    pub fn env(&self, prefix: &str) -> Vec<EnvVar> {
        let (secret, keys) = self.variables();
        (keys.iter())
            .map(|(suffix, key)| secret_env(&format!("{prefix}_{suffix}"), secret, key))
            .collect()
    }
}

/// `name` from `key` of Secret `secret` (required), never a value.
pub fn secret_env(name: &str, secret: &str, key: &str) -> EnvVar {
    EnvVar {
        name: name.into(),
        value_from: Some(EnvVarSource {
            secret_key_ref: Some(SecretKeySelector {
                name: secret.into(),
                key: key.into(),
                optional: Some(false),
            }),
            ..EnvVarSource::default()
        }),
        ..EnvVar::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn auth(secret: &str, mode: NatsAuthMode) -> TargetSecret {
        TargetSecret::Nats(NatsAuth {
            secret_name: secret.into(),
            mode,
        })
    }

    #[test]
    fn each_tls_target_gets_its_own_ca_and_only_the_ca() {
        let (config, volumes, mounts) = runner_tls([
            ("tls://a:4222", "a-tls"),
            ("tls://a:4222", "a-tls"),
            ("tls://b:4222", "b-tls"),
        ]);
        let files: Vec<(&str, &str)> = config
            .iter()
            .map(|c| (c.target.as_str(), c.ca_file.as_deref().unwrap_or_default()))
            .collect();
        assert_eq!(
            files,
            [
                ("tls://a:4222", "/etc/msgbench/tls/0/ca.crt"),
                ("tls://b:4222", "/etc/msgbench/tls/1/ca.crt")
            ]
        );
        let b = volumes[1].secret.as_ref().unwrap();
        assert_eq!(b.secret_name.as_deref(), Some("b-tls"));
        let keys: Vec<&str> = b.items.iter().flatten().map(|i| i.key.as_str()).collect();
        assert_eq!(keys, ["ca.crt"], "never the server's key");
        assert_eq!(
            (mounts[1].mount_path.as_str(), mounts[1].read_only),
            ("/etc/msgbench/tls/1", Some(true))
        );
    }

    #[test]
    fn each_target_gets_its_own_variables_from_its_own_secret_and_no_value() {
        let (a, b) = (
            auth("js-token", NatsAuthMode::Token),
            auth("js-users", NatsAuthMode::UserPassword),
        );
        let p = TargetSecret::PusherApp {
            secret_name: "sockudo-app".into(),
        };
        let m = TargetSecret::MqttUser {
            secret_name: "mqtt-user".into(),
        };
        let (config, env) = runner_auth([
            ("nats://a:4222", &a),
            ("nats://b:4222", &b),
            ("nats://a:4222", &a),
            ("ws://p:6001", &p),
            ("mqtt://m:1883", &m),
        ]);
        let prefixes: Vec<(&str, &str)> = config
            .iter()
            .map(|c| (c.target.as_str(), c.env_prefix.as_str()))
            .collect();
        assert_eq!(
            prefixes,
            [
                ("nats://a:4222", "MSGBENCH_AUTH_0"),
                ("nats://b:4222", "MSGBENCH_AUTH_1"),
                ("ws://p:6001", "MSGBENCH_AUTH_2"),
                ("mqtt://m:1883", "MSGBENCH_AUTH_3")
            ]
        );
        let refs: Vec<(String, String, String)> = env
            .iter()
            .map(|e| {
                assert!(e.value.is_none(), "a value never appears in the pod spec");
                let r = e
                    .value_from
                    .as_ref()
                    .unwrap()
                    .secret_key_ref
                    .as_ref()
                    .unwrap();
                (e.name.clone(), r.name.clone(), r.key.clone())
            })
            .collect();
        let row = |n: &str, s: &str, k: &str| (n.to_string(), s.to_string(), k.to_string());
        assert_eq!(
            refs,
            [
                row("MSGBENCH_AUTH_0_TOKEN", "js-token", "token"),
                row("MSGBENCH_AUTH_1_USERNAME", "js-users", "username"),
                row("MSGBENCH_AUTH_1_PASSWORD", "js-users", "password"),
                row("MSGBENCH_AUTH_2_PUSHER_APP_ID", "sockudo-app", "appId"),
                row("MSGBENCH_AUTH_2_PUSHER_KEY", "sockudo-app", "key"),
                row("MSGBENCH_AUTH_2_PUSHER_SECRET", "sockudo-app", "secret"),
                row("MSGBENCH_AUTH_3_USERNAME", "mqtt-user", "username"),
                row("MSGBENCH_AUTH_3_PASSWORD", "mqtt-user", "password"),
            ]
        );
    }
}
