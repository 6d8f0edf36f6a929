//! What the agent config says about reaching one target: its credentials (from the pod's
//! environment, by the variable prefix the config names), its TLS files and where its token
//! goes.
use crate::tls::TlsFiles;
use runner_api::agent::AgentConfig;
use runner_api::target::{Credentials, TokenPlacement};

/// The TLS files and server name of `target`'s `targetTls` entry (none: the defaults).
pub fn tls_for(cfg: &AgentConfig, target: &str) -> TlsFiles {
    (cfg.target_tls.iter())
        .find(|t| t.target == target)
        .map(TlsFiles::from)
        .unwrap_or_default()
}

/// The credentials the pod's environment holds for `target`, when the config says it needs
/// some (a missing variable is an error naming it, never a connection without auth).
pub fn credentials_for(cfg: &AgentConfig, target: &str) -> anyhow::Result<Option<Credentials>> {
    let Some(a) = cfg.target_auth.iter().find(|a| a.target == target) else {
        return Ok(None);
    };
    Credentials::from_env(&a.env_prefix, |k| std::env::var(k).ok())
        .map(Some)
        .ok_or_else(|| {
            anyhow::anyhow!(
                "{target} needs credentials, but none of {0}_TOKEN, {0}_NKEY_SEED, {0}_CREDS, \
                 {0}_PUSHER_APP_ID or {0}_USERNAME is set",
                a.env_prefix
            )
        })
}

/// Where `target`'s token goes (WebSocket, Socket.IO), as its `targetAuth` entry says.
pub fn token_placement_for(
    cfg: &AgentConfig,
    target: &str,
) -> anyhow::Result<Option<TokenPlacement>> {
    match cfg.target_auth.iter().find(|a| a.target == target) {
        Some(a) => a.placement().map_err(anyhow::Error::msg),
        None => Ok(None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use runner_api::agent::TargetAuth;

    /// A target that needs credentials the pod does not have fails its trial naming the
    /// variables, instead of connecting without auth; other targets need none.
    #[test]
    fn missing_credentials_name_the_variables() {
        let cfg: AgentConfig = serde_norway::from_str(
            "target: nats://a:4222\nworkload: {protocol: nats}\nbarrierTimeoutSeconds: 1\n",
        )
        .unwrap();
        let cfg = AgentConfig {
            target_auth: vec![TargetAuth {
                target: "nats://a:4222".into(),
                env_prefix: "MSGBENCH_TEST_UNSET_7F3A".into(),
                ..TargetAuth::default()
            }],
            ..cfg
        };
        let e = credentials_for(&cfg, "nats://a:4222")
            .unwrap_err()
            .to_string();
        assert!(e.contains("MSGBENCH_TEST_UNSET_7F3A_TOKEN"), "{e}");
        assert!(e.contains("MSGBENCH_TEST_UNSET_7F3A_CREDS"), "{e}");
        assert_eq!(credentials_for(&cfg, "nats://b:4222").unwrap(), None);
    }

    /// The token's placement and the TLS files come from the target's own entries.
    #[test]
    fn placement_comes_from_the_targets_auth_entry() {
        let cfg: AgentConfig = serde_norway::from_str(
            "target: wss://w:443/ws\nworkload: {protocol: websocket}\nbarrierTimeoutSeconds: 1\n\
             targetAuth: [{target: 'wss://w:443/ws', envPrefix: P, query: access_token}]\n\
             targetTls: [{target: 'wss://w:443/ws', caFile: /ca.crt, serverName: w.example}]\n",
        )
        .unwrap();
        assert_eq!(
            token_placement_for(&cfg, "wss://w:443/ws").unwrap(),
            Some(TokenPlacement::Query("access_token".into()))
        );
        assert_eq!(token_placement_for(&cfg, "wss://other").unwrap(), None);
        let tls = tls_for(&cfg, "wss://w:443/ws");
        assert_eq!(tls.server_name.as_deref(), Some("w.example"));
        assert_eq!(tls.ca_file, Some("/ca.crt".into()));
    }
}
