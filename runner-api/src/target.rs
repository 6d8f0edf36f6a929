//! A target URL as both sides read it: the runner connects to its host and port, the operator
//! checks that the Service behind them has a ready endpoint. One parser, so both agree on the
//! default port of each scheme.

/// A parsed target URL, e.g. `nats://js3.bench.svc:4222`.
#[derive(Clone, Debug, PartialEq)]
pub struct TargetUrl {
    pub scheme: String,
    /// Without the brackets of an IPv6 literal.
    pub host: String,
    /// The URL's port, or the scheme's default (0 when the scheme has none).
    pub port: u16,
    /// The URL as given.
    pub raw: String,
    /// How to authenticate (never part of `raw`, never printed: see [`Credentials`]).
    pub auth: Option<Credentials>,
    /// The CA certificate (PEM file) a TLS target's certificate is verified with; unset: the
    /// public web roots (webpki-roots; the runner image has no system store).
    pub ca_file: Option<std::path::PathBuf>,
    /// The client certificate (PEM file) presented to a TLS target that asks for one; with
    /// `key_file`, both or neither.
    pub cert_file: Option<std::path::PathBuf>,
    /// The private key (PEM file) of `cert_file`.
    pub key_file: Option<std::path::PathBuf>,
    /// The name the target's certificate must carry, also sent as SNI; unset: the URL's host.
    pub server_name: Option<String>,
    /// Where a WebSocket or Socket.IO target takes the token; unset: `Authorization: Bearer`.
    pub token_placement: Option<TokenPlacement>,
}

/// Where a token ([`Credentials::Token`]) goes on an HTTP request (a WebSocket upgrade, a
/// Socket.IO handshake or publish). Not a secret: it comes from the agent config.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TokenPlacement {
    /// The token, verbatim, as this header's value (e.g. `Authorization` with a token
    /// `Bearer abc`).
    Header(String),
    /// The token, URL-encoded, as this query parameter.
    Query(String),
}

/// Client credentials for a target. Read from the environment (a Secret's keys through
/// `secretKeyRef`), never from a config file; `Debug` shows the kind only.
#[derive(Clone, PartialEq, Eq)]
pub enum Credentials {
    Token(String),
    UserPassword {
        username: String,
        password: String,
    },
    /// An NKey user's seed (`SU…`): the client signs the server's nonce with it.
    Nkey {
        seed: String,
    },
    /// A NATS `.creds` file's content (user JWT and NKey seed, as `nsc` or `nats auth user
    /// credential` write it): the client sends the JWT and signs the nonce with the seed.
    Creds(String),
    /// A Pusher Channels app: the key opens WebSockets, the secret signs HTTP API requests.
    PusherApp {
        app_id: String,
        key: String,
        secret: String,
    },
}

impl std::fmt::Debug for Credentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Credentials::Token(_) => f.write_str("Token(redacted)"),
            Credentials::UserPassword { .. } => f.write_str("UserPassword(redacted)"),
            Credentials::Nkey { .. } => f.write_str("Nkey(redacted)"),
            Credentials::Creds(_) => f.write_str("Creds(redacted)"),
            Credentials::PusherApp { .. } => f.write_str("PusherApp(redacted)"),
        }
    }
}

impl Credentials {
    /// `{prefix}_TOKEN`, else `{prefix}_NKEY_SEED`, else `{prefix}_CREDS`, else
    /// `{prefix}_PUSHER_APP_ID` with `{prefix}_PUSHER_KEY` and `{prefix}_PUSHER_SECRET` (all
    /// three), else `{prefix}_USERNAME` with `{prefix}_PASSWORD`, from `env`; `None` when none
    /// is set.
    pub fn from_env(prefix: &str, env: impl Fn(&str) -> Option<String>) -> Option<Credentials> {
        if let Some(t) = env(&format!("{prefix}_TOKEN")) {
            return Some(Credentials::Token(t));
        }
        if let Some(seed) = env(&format!("{prefix}_NKEY_SEED")) {
            return Some(Credentials::Nkey { seed });
        }
        if let Some(creds) = env(&format!("{prefix}_CREDS")) {
            return Some(Credentials::Creds(creds));
        }
        let pusher = |k: &str| env(&format!("{prefix}_PUSHER_{k}"));
        if let (Some(app_id), Some(key), Some(secret)) =
            (pusher("APP_ID"), pusher("KEY"), pusher("SECRET"))
        {
            return Some(Credentials::PusherApp {
                app_id,
                key,
                secret,
            });
        }
        let username = env(&format!("{prefix}_USERNAME"))?;
        let password = env(&format!("{prefix}_PASSWORD")).unwrap_or_default();
        Some(Credentials::UserPassword { username, password })
    }
}

#[derive(Debug, thiserror::Error)]
pub enum TargetUrlError {
    #[error("{0:?}: not a URL ({1})")]
    NotAUrl(String, String),
    #[error("{0:?}: no host")]
    NoHost(String),
}

impl TargetUrl {
    pub fn parse(raw: &str) -> Result<TargetUrl, TargetUrlError> {
        let uri: http::Uri = raw.parse().map_err(|e: http::uri::InvalidUri| {
            TargetUrlError::NotAUrl(raw.into(), e.to_string())
        })?;
        let scheme = uri.scheme_str().unwrap_or("").to_string();
        let host = uri
            .host()
            .ok_or_else(|| TargetUrlError::NoHost(raw.into()))?;
        let port = uri.port_u16().unwrap_or(match scheme.as_str() {
            "nats" | "tls" => 4222,
            "mqtt" => 1883,
            "mqtts" | "ssl" => 8883,
            "http" | "ws" => 80,
            "https" | "wss" => 443,
            _ => 0,
        });
        Ok(TargetUrl {
            scheme,
            host: host.trim_matches(['[', ']']).to_string(),
            port,
            raw: raw.into(),
            auth: None,
            ca_file: None,
            cert_file: None,
            key_file: None,
            server_name: None,
            token_placement: None,
        })
    }

    /// `host:port`.
    pub fn addr(&self) -> String {
        format!("{}:{}", self.host, self.port)
    }

    /// Whether the scheme itself says TLS (`tls`, `mqtts`, `ssl`, `https`, `wss`). A `nats://`
    /// server may still require TLS in its INFO; the NATS clients follow that too.
    pub fn is_tls(&self) -> bool {
        matches!(
            self.scheme.as_str(),
            "tls" | "mqtts" | "ssl" | "https" | "wss"
        )
    }

    /// The name the server's certificate is verified against: `server_name`, else the host.
    pub fn tls_name(&self) -> &str {
        self.server_name.as_deref().unwrap_or(&self.host)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn credentials_come_from_the_environment_and_never_print() {
        let env = |vars: &'static [(&'static str, &'static str)]| {
            move |k: &str| {
                vars.iter()
                    .find(|(n, _)| *n == k)
                    .map(|(_, v)| v.to_string())
            }
        };
        let token = Credentials::from_env("A", env(&[("A_TOKEN", "s3cret"), ("A_USERNAME", "u")]));
        assert_eq!(token, Some(Credentials::Token("s3cret".into())));
        let up = Credentials::from_env("A", env(&[("A_USERNAME", "u"), ("A_PASSWORD", "pw")]));
        assert_eq!(
            up,
            Some(Credentials::UserPassword {
                username: "u".into(),
                password: "pw".into()
            })
        );
        assert_eq!(Credentials::from_env("B", env(&[("A_TOKEN", "x")])), None);
        let creds =
            Credentials::from_env("A", env(&[("A_CREDS", "jwt+seed"), ("A_USERNAME", "u")]));
        assert_eq!(creds, Some(Credentials::Creds("jwt+seed".into())));
        assert_eq!(format!("{creds:?}"), "Some(Creds(redacted))");
        // The order is TOKEN, NKEY_SEED, CREDS, PUSHER…, USERNAME.
        let both = Credentials::from_env("A", env(&[("A_CREDS", "c"), ("A_NKEY_SEED", "SUAB")]));
        assert!(matches!(both, Some(Credentials::Nkey { .. })), "{both:?}");
        let nkey = Credentials::from_env("A", env(&[("A_NKEY_SEED", "SUAB")]));
        assert_eq!(
            nkey,
            Some(Credentials::Nkey {
                seed: "SUAB".into()
            })
        );
        let mut t = TargetUrl::parse("nats://h:4222").unwrap();
        t.auth = up;
        let shown = format!("{t:?}");
        assert!(
            !shown.contains("pw") && shown.contains("redacted"),
            "{shown}"
        );
        const PUSHER_ENV: &[(&str, &str)] = &[
            ("A_PUSHER_APP_ID", "7"),
            ("A_PUSHER_KEY", "k"),
            ("A_PUSHER_SECRET", "s3cret"),
        ];
        let app = Credentials::from_env("A", env(PUSHER_ENV));
        assert_eq!(
            app,
            Some(Credentials::PusherApp {
                app_id: "7".into(),
                key: "k".into(),
                secret: "s3cret".into()
            })
        );
        assert!(!format!("{app:?}").contains("s3cret"));
        // All three or none: a key without its secret cannot sign anything.
        let partial = Credentials::from_env("A", env(&PUSHER_ENV[..2]));
        assert_eq!(partial, None);
    }

    #[test]
    fn ports_default_by_scheme() {
        let t = TargetUrl::parse("nats://js3.bench.svc").unwrap();
        assert_eq!(
            (t.scheme.as_str(), t.host.as_str(), t.port),
            ("nats", "js3.bench.svc", 4222)
        );
        assert_eq!(TargetUrl::parse("mqtt://m").unwrap().port, 1883);
        assert_eq!(
            TargetUrl::parse("ws://pss.ns.svc:8080/ws").unwrap().addr(),
            "pss.ns.svc:8080"
        );
        assert_eq!(TargetUrl::parse("http://pss").unwrap().port, 80);
        assert_eq!(TargetUrl::parse("tcp://m").unwrap().port, 0);
        assert_eq!(TargetUrl::parse("mqtts://m").unwrap().port, 8883);
        assert_eq!(TargetUrl::parse("https://m").unwrap().port, 443);
        assert_eq!(TargetUrl::parse("wss://m/ws").unwrap().port, 443);
        let tls: Vec<bool> = [
            "tls://a",
            "mqtts://a",
            "wss://a",
            "https://a",
            "nats://a",
            "ws://a",
        ]
        .iter()
        .map(|u| TargetUrl::parse(u).unwrap().is_tls())
        .collect();
        assert_eq!(tls, [true, true, true, true, false, false]);
        let mut t = TargetUrl::parse("tls://127.0.0.1:4222").unwrap();
        assert_eq!(t.tls_name(), "127.0.0.1");
        t.server_name = Some("nats.example".into());
        assert_eq!(t.tls_name(), "nats.example");
        assert_eq!(TargetUrl::parse("ws://[::1]:9000").unwrap().host, "::1");
    }

    #[test]
    fn a_url_without_host_is_refused() {
        assert_eq!(
            TargetUrl::parse("/just/a/path").unwrap_err().to_string(),
            "\"/just/a/path\": no host"
        );
        assert!(matches!(
            TargetUrl::parse("nats://bad host"),
            Err(TargetUrlError::NotAUrl(..))
        ));
    }
}
