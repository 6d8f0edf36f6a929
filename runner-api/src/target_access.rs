//! How the runner reaches one target of the agent config: where its credentials are
//! ([`TargetAuth`]) and how its TLS is verified and answered ([`TargetTls`]). Names, paths and
//! placements only: a secret never enters the config.
use crate::target::TokenPlacement;
use serde::{Deserialize, Serialize};

/// The CA a TLS target's certificate is verified with, the client certificate presented to
/// it, and the name its certificate must carry: PEM files the pod mounts from Secrets.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TargetTls {
    pub target: String,
    /// Unset: the public web roots. (A config written before the other fields still parses:
    /// `caFile` was a plain string then, as now.)
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ca_file: Option<String>,
    /// Client certificate; with `keyFile`, both or neither.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cert_file: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key_file: Option<String>,
    /// Verified (and sent as SNI) instead of the URL's host.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_name: Option<String>,
}

/// Where the credentials of one target are, and (WebSocket, Socket.IO) where its token goes.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TargetAuth {
    pub target: String,
    pub env_prefix: String,
    /// The token (`{envPrefix}_TOKEN`) is sent verbatim as this HTTP header's value.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub header: Option<String>,
    /// The token is sent URL-encoded as this query parameter.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub query: Option<String>,
}

impl TargetAuth {
    /// Where the token goes: `header`, `query`, or `None` (the default,
    /// `Authorization: Bearer <token>`). Both set is an error naming the target.
    pub fn placement(&self) -> Result<Option<TokenPlacement>, String> {
        match (&self.header, &self.query) {
            (Some(_), Some(_)) => Err(format!(
                "targetAuth for {}: header and query are both set; the token goes to one place",
                self.target
            )),
            (Some(h), None) => Ok(Some(TokenPlacement::Header(h.clone()))),
            (None, Some(q)) => Ok(Some(TokenPlacement::Query(q.clone()))),
            (None, None) => Ok(None),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A config the operator wrote before client certificates existed (`caFile` a string)
    /// parses as the same CA; a new one round-trips and leaves unset fields out.
    #[test]
    fn old_and_new_tls_entries_parse() {
        let old: TargetTls = serde_norway::from_str(
            "target: tls://js.ns.svc:4222\ncaFile: /etc/msgbench/tls/0/ca.crt\n",
        )
        .unwrap();
        assert_eq!(
            old,
            TargetTls {
                target: "tls://js.ns.svc:4222".into(),
                ca_file: Some("/etc/msgbench/tls/0/ca.crt".into()),
                ..Default::default()
            }
        );
        let new = TargetTls {
            target: "mqtts://b:8883".into(),
            ca_file: None,
            cert_file: Some("/t/tls.crt".into()),
            key_file: Some("/t/tls.key".into()),
            server_name: Some("broker.example".into()),
        };
        let json = serde_json::to_string(&new).unwrap();
        assert_eq!(
            json,
            r#"{"target":"mqtts://b:8883","certFile":"/t/tls.crt","keyFile":"/t/tls.key","serverName":"broker.example"}"#
        );
        assert_eq!(serde_json::from_str::<TargetTls>(&json).unwrap(), new);
        let bare: TargetTls = serde_json::from_str(r#"{"target":"wss://w/ws"}"#).unwrap();
        assert_eq!(bare.ca_file, None);
    }

    #[test]
    fn the_token_goes_where_the_config_says() {
        let auth = |header: Option<&str>, query: Option<&str>| TargetAuth {
            target: "wss://w/ws".into(),
            env_prefix: "MSGBENCH_AUTH_0".into(),
            header: header.map(Into::into),
            query: query.map(Into::into),
        };
        assert_eq!(auth(None, None).placement(), Ok(None));
        assert_eq!(
            auth(Some("X-Token"), None).placement(),
            Ok(Some(TokenPlacement::Header("X-Token".into())))
        );
        assert_eq!(
            auth(None, Some("access_token")).placement(),
            Ok(Some(TokenPlacement::Query("access_token".into())))
        );
        let both = auth(Some("A"), Some("b")).placement().unwrap_err();
        assert!(both.contains("wss://w/ws"), "{both}");
        // An entry written before placements existed parses and serializes as before.
        let old: TargetAuth =
            serde_json::from_str(r#"{"target":"nats://a:4222","envPrefix":"MSGBENCH_AUTH_0"}"#)
                .unwrap();
        assert_eq!(old.placement(), Ok(None));
        assert_eq!(
            serde_json::to_string(&old).unwrap(),
            r#"{"target":"nats://a:4222","envPrefix":"MSGBENCH_AUTH_0"}"#
        );
    }
}
