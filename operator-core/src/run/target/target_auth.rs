//! Credentials and TLS material for targets that require them (a JetStreamCluster or an
//! MqttBroker with `spec.auth`, a PubSubServer with protocol pusher, an endpoint's
//! `auth`/`tls`), pure. The
//! runner container reads each from the server's own Secret through `secretKeyRef` environment
//! variables; the agent config (a ConfigMap) names only the variables. The operator never reads
//! the Secret, so it needs no read access to Secrets.
use crate::server_pod::{mount, secret_env};
use k8s_openapi::api::core::v1::{
    ConfigMapProjection, EnvVar, KeyToPath, ProjectedVolumeSource, SecretProjection, Volume,
    VolumeMount, VolumeProjection,
};
use msgbench_crds::benchmark_run::{EndpointAuth, EndpointAuthMode, EndpointTls};
use msgbench_crds::jetstream_cluster::{NatsAuth, NatsAuthMode};
use msgbench_crds::mqtt_broker::MqttBrokerSpec;
use runner_api::agent::{TargetAuth, TargetTls};

/// What the runner pods take from the targets' Secrets: environment variables (credentials)
/// and read-only volumes (TLS CAs), all by reference.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RunnerSecrets {
    pub env: Vec<EnvVar>,
    pub volumes: Vec<Volume>,
    pub mounts: Vec<VolumeMount>,
}

/// Where runner pods mount each TLS target's material: `<dir>/<n>/ca.crt`, and with a client
/// certificate `<dir>/<n>/tls.crt` and `<dir>/<n>/tls.key`.
pub const TLS_CA_DIR: &str = "/etc/msgbench/tls";

/// Where a target's CA certificate is, by reference.
#[derive(Clone, Debug, PartialEq)]
pub enum CaRef {
    Secret { name: String, key: String },
    ConfigMap { name: String, key: String },
}

/// How runners verify a TLS target and prove themselves to it: names only, never contents.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct TlsSource {
    /// Unset: the runner's own roots (the public web PKI).
    pub ca: Option<CaRef>,
    /// A `kubernetes.io/tls` Secret with the client's `tls.crt` and `tls.key`.
    pub client_secret: Option<String>,
    /// The name the server's certificate must carry, when not the URL's host.
    pub server_name: Option<String>,
}

impl TlsSource {
    /// A msgbench server's: the `ca.crt` of its own TLS Secret (cert-manager's layout).
    pub fn server_secret(secret: &str) -> TlsSource {
        TlsSource {
            ca: Some(CaRef::Secret {
                name: secret.into(),
                key: "ca.crt".into(),
            }),
            ..TlsSource::default()
        }
    }

    /// An endpoint's `tls`.
    pub fn of_endpoint(t: &EndpointTls) -> TlsSource {
        let ca = t.ca.as_ref().and_then(|c| {
            let key = c.key.clone();
            match (&c.secret_name, &c.config_map_name) {
                (Some(name), _) => Some(CaRef::Secret {
                    name: name.clone(),
                    key,
                }),
                (None, Some(name)) => Some(CaRef::ConfigMap {
                    name: name.clone(),
                    key,
                }),
                (None, None) => None,
            }
        });
        TlsSource {
            ca,
            client_secret: t.client_secret_name.clone(),
            server_name: t.server_name.clone(),
        }
    }

    /// The projections of one volume holding what the runner needs, and nothing else (never
    /// a server's key): `ca.crt`, `tls.crt`, `tls.key`.
    fn projections(&self) -> Vec<VolumeProjection> {
        let item = |key: &str, path: &str| KeyToPath {
            key: key.into(),
            path: path.into(),
            ..KeyToPath::default()
        };
        let secret = |name: &str, items: Vec<KeyToPath>| VolumeProjection {
            secret: Some(SecretProjection {
                name: name.into(),
                items: Some(items),
                optional: Some(false),
            }),
            ..VolumeProjection::default()
        };
        let mut out = Vec::new();
        match &self.ca {
            Some(CaRef::Secret { name, key }) => out.push(secret(name, vec![item(key, "ca.crt")])),
            Some(CaRef::ConfigMap { name, key }) => out.push(VolumeProjection {
                config_map: Some(ConfigMapProjection {
                    name: name.clone(),
                    items: Some(vec![item(key, "ca.crt")]),
                    optional: Some(false),
                }),
                ..VolumeProjection::default()
            }),
            None => {}
        }
        if let Some(name) = &self.client_secret {
            out.push(secret(
                name,
                vec![item("tls.crt", "tls.crt"), item("tls.key", "tls.key")],
            ));
        }
        out
    }
}

/// For each distinct TLS target (URL, material): where the agent finds its files, and the
/// volume and mount that put them there.
pub fn runner_tls<'a>(
    targets: impl IntoIterator<Item = (&'a str, &'a TlsSource)>,
) -> (Vec<TargetTls>, Vec<Volume>, Vec<VolumeMount>) {
    let (mut config, mut volumes, mut mounts) = (Vec::<TargetTls>::new(), Vec::new(), Vec::new());
    for (url, tls) in targets {
        if config.iter().any(|t| t.target == url) {
            continue;
        }
        let (name, dir) = (
            format!("tls-{}", config.len()),
            format!("{TLS_CA_DIR}/{}", config.len()),
        );
        let sources = tls.projections();
        if !sources.is_empty() {
            volumes.push(Volume {
                name: name.clone(),
                projected: Some(ProjectedVolumeSource {
                    sources: Some(sources),
                    // Read by the runner's group (the pod's fsGroup), by no one else.
                    default_mode: Some(0o440),
                }),
                ..Volume::default()
            });
            mounts.push(mount(&name, &dir, true));
        }
        let client = tls.client_secret.is_some();
        config.push(TargetTls {
            target: url.into(),
            ca_file: tls.ca.as_ref().map(|_| format!("{dir}/ca.crt")),
            cert_file: client.then(|| format!("{dir}/tls.crt")),
            key_file: client.then(|| format!("{dir}/tls.key")),
            server_name: tls.server_name.clone(),
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
    /// An endpoint's `auth`.
    Endpoint(EndpointAuth),
}

/// What the runners take from an MqttBroker `serverRef`, by name: the Secret of its user
/// (`spec.auth`) and, when it serves TLS (`server::mqtt::serves_tls`), the `ca.crt` of its TLS
/// Secret, so they verify `mqtts://<name>.<namespace>.svc` against it.
pub fn of_mqtt_broker(spec: &MqttBrokerSpec) -> (Option<TargetSecret>, Option<TlsSource>) {
    let auth = (spec.auth.as_ref()).map(|a| TargetSecret::MqttUser {
        secret_name: a.secret_name.clone(),
    });
    let tls = (spec.tls.as_ref())
        .filter(|_| crate::server::mqtt::serves_tls(spec))
        .map(|t| TlsSource::server_secret(&t.secret_name));
    (auth, tls)
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
            TargetSecret::Endpoint(a) => (
                &a.secret_name,
                match a.mode {
                    EndpointAuthMode::Token => &[("TOKEN", "token")],
                    EndpointAuthMode::UserPassword => {
                        &[("USERNAME", "username"), ("PASSWORD", "password")]
                    }
                    EndpointAuthMode::Nkey => &[("NKEY_SEED", "seed")],
                    EndpointAuthMode::Creds => &[("CREDS", "creds")],
                },
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
        let (header, query) = match auth {
            TargetSecret::Endpoint(a) => (a.header.clone(), a.query.clone()),
            _ => (None, None),
        };
        config.push(TargetAuth {
            target: url.to_string(),
            env_prefix: prefix,
            header,
            query,
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
        let (a, b) = (
            TlsSource::server_secret("a-tls"),
            TlsSource::server_secret("b-tls"),
        );
        let (config, volumes, mounts) = runner_tls([
            ("tls://a:4222", &a),
            ("tls://a:4222", &a),
            ("tls://b:4222", &b),
        ]);
        let files: Vec<(&str, Option<&str>)> = config
            .iter()
            .map(|c| (c.target.as_str(), c.ca_file.as_deref()))
            .collect();
        assert_eq!(
            files,
            [
                ("tls://a:4222", Some("/etc/msgbench/tls/0/ca.crt")),
                ("tls://b:4222", Some("/etc/msgbench/tls/1/ca.crt"))
            ]
        );
        assert_eq!(projected(&volumes[1]), [("b-tls", "ca.crt", "ca.crt")]);
        assert_eq!(
            (mounts[1].mount_path.as_str(), mounts[1].read_only),
            ("/etc/msgbench/tls/1", Some(true))
        );
    }

    /// (Secret or ConfigMap, key, path) of each file a projected volume holds.
    fn projected(v: &Volume) -> Vec<(&str, &str, &str)> {
        let sources = v.projected.as_ref().unwrap().sources.iter().flatten();
        sources
            .flat_map(|p| {
                let (name, items) = match (&p.secret, &p.config_map) {
                    (Some(s), _) => (s.name.as_str(), &s.items),
                    (_, Some(c)) => (c.name.as_str(), &c.items),
                    _ => panic!("only Secrets and ConfigMaps"),
                };
                (items.iter().flatten()).map(move |i| (name, i.key.as_str(), i.path.as_str()))
            })
            .collect()
    }

    #[test]
    fn an_endpoint_gets_its_ca_from_a_config_map_and_its_client_certificate_from_a_secret() {
        use msgbench_crds::benchmark_run::CaSource;
        let tls = TlsSource::of_endpoint(&EndpointTls {
            ca: Some(CaSource {
                secret_name: None,
                config_map_name: Some("trust-bundle".into()),
                key: "bundle.pem".into(),
            }),
            client_secret_name: Some("bench-client".into()),
            server_name: Some("nats.internal".into()),
        });
        let (config, volumes, _) = runner_tls([("tls://nats.team:4222", &tls)]);
        assert_eq!(
            projected(&volumes[0]),
            [
                ("trust-bundle", "bundle.pem", "ca.crt"),
                ("bench-client", "tls.crt", "tls.crt"),
                ("bench-client", "tls.key", "tls.key")
            ]
        );
        let c = &config[0];
        assert_eq!(c.ca_file.as_deref(), Some("/etc/msgbench/tls/0/ca.crt"));
        assert_eq!(c.cert_file.as_deref(), Some("/etc/msgbench/tls/0/tls.crt"));
        assert_eq!(c.key_file.as_deref(), Some("/etc/msgbench/tls/0/tls.key"));
        assert_eq!(c.server_name.as_deref(), Some("nats.internal"));
        // Public roots and no client certificate: nothing to mount, the name still applies.
        let bare = TlsSource {
            server_name: Some("x".into()),
            ..TlsSource::default()
        };
        let (config, volumes, mounts) = runner_tls([("wss://ws.team:443", &bare)]);
        assert!(volumes.is_empty() && mounts.is_empty());
        assert_eq!(config[0].ca_file, None);
        assert_eq!(config[0].server_name.as_deref(), Some("x"));
    }

    #[test]
    fn an_endpoint_credential_reaches_the_runner_by_reference_with_its_placement() {
        let endpoint = |mode, header: Option<&str>| {
            TargetSecret::Endpoint(EndpointAuth {
                secret_name: "team-creds".into(),
                mode,
                header: header.map(String::from),
                query: None,
            })
        };
        let (creds, ws) = (
            endpoint(EndpointAuthMode::Creds, None),
            endpoint(EndpointAuthMode::Token, Some("X-Api-Key")),
        );
        let (config, env) = runner_auth([("tls://nats:4222", &creds), ("wss://ws:443", &ws)]);
        let names: Vec<&str> = env.iter().map(|e| e.name.as_str()).collect();
        assert_eq!(names, ["MSGBENCH_AUTH_0_CREDS", "MSGBENCH_AUTH_1_TOKEN"]);
        assert!(env.iter().all(|e| e.value.is_none()));
        assert_eq!(config[0].header, None);
        assert_eq!(config[1].header.as_deref(), Some("X-Api-Key"));
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

    /// A TLS MqttBroker gives its runners the CA of its Secret and its user's Secret; the same
    /// broker without TLS, or a `tls` on an engine the operator cannot configure (refused at
    /// admission), gives no CA.
    #[test]
    fn an_mqtt_broker_gives_its_ca_with_tls_and_its_user_with_auth() {
        let spec = |s: &str| -> MqttBrokerSpec { serde_norway::from_str(s).unwrap() };
        let (auth, tls) = of_mqtt_broker(&spec(
            "{auth: {secretName: mq-user}, tls: {secretName: mq-tls}}",
        ));
        assert_eq!(
            auth,
            Some(TargetSecret::MqttUser {
                secret_name: "mq-user".into()
            })
        );
        let tls = tls.expect("the broker's CA");
        assert_eq!(
            tls.ca,
            Some(CaRef::Secret {
                name: "mq-tls".into(),
                key: "ca.crt".into()
            })
        );
        assert_eq!((tls.client_secret, tls.server_name), (None, None));
        assert_eq!(of_mqtt_broker(&spec("{}")), (None, None));
        let rumqttd = spec("{engine: rumqttd, tls: {secretName: mq-tls}}");
        assert_eq!(of_mqtt_broker(&rumqttd), (None, None));
    }
}
