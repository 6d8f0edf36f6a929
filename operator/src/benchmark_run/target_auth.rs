//! Credentials for targets that require them (a JetStreamCluster with `spec.auth`), pure. The
//! runner container reads each from the server's own Secret through `secretKeyRef` environment
//! variables; the agent config (a ConfigMap) names only the variables. The operator never reads
//! the Secret, so it needs no access to Secrets.
use k8s_openapi::api::core::v1::{EnvVar, EnvVarSource, SecretKeySelector};
use msgbench_crds::jetstream_cluster::{NatsAuth, NatsAuthMode};
use runner_api::agent::TargetAuth;

/// For each distinct target URL with credentials: where the agent finds them, and the
/// environment variables that fill them in.
pub fn runner_auth<'a>(
    targets: impl IntoIterator<Item = (&'a str, &'a NatsAuth)>,
) -> (Vec<TargetAuth>, Vec<EnvVar>) {
    let (mut config, mut env) = (Vec::<TargetAuth>::new(), Vec::new());
    for (url, auth) in targets {
        if config.iter().any(|a| a.target == url) {
            continue;
        }
        let prefix = format!("MSGBENCH_AUTH_{}", config.len());
        let keys: &[(&str, &str)] = match auth.mode {
            NatsAuthMode::Token => &[("TOKEN", "token")],
            NatsAuthMode::UserPassword => &[("USERNAME", "username"), ("PASSWORD", "password")],
            NatsAuthMode::Nkey => &[("NKEY_SEED", "seed")],
        };
        for (suffix, key) in keys {
            env.push(secret_env(
                &format!("{prefix}_{suffix}"),
                &auth.secret_name,
                key,
            ));
        }
        config.push(TargetAuth {
            target: url.to_string(),
            env_prefix: prefix,
        });
    }
    (config, env)
}

fn secret_env(name: &str, secret: &str, key: &str) -> EnvVar {
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

    fn auth(secret: &str, mode: NatsAuthMode) -> NatsAuth {
        NatsAuth {
            secret_name: secret.into(),
            mode,
        }
    }

    #[test]
    fn each_target_gets_its_own_variables_from_its_own_secret_and_no_value() {
        let (a, b) = (
            auth("js-token", NatsAuthMode::Token),
            auth("js-users", NatsAuthMode::UserPassword),
        );
        let (config, env) = runner_auth([
            ("nats://a:4222", &a),
            ("nats://b:4222", &b),
            ("nats://a:4222", &a),
        ]);
        let prefixes: Vec<(&str, &str)> = config
            .iter()
            .map(|c| (c.target.as_str(), c.env_prefix.as_str()))
            .collect();
        assert_eq!(
            prefixes,
            [
                ("nats://a:4222", "MSGBENCH_AUTH_0"),
                ("nats://b:4222", "MSGBENCH_AUTH_1")
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
            ]
        );
    }
}
