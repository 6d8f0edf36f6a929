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
    /// The CA certificate (PEM file) a `tls://` target's certificate is verified with; unset:
    /// the system's roots.
    pub ca_file: Option<std::path::PathBuf>,
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
            Credentials::PusherApp { .. } => f.write_str("PusherApp(redacted)"),
        }
    }
}

impl Credentials {
    /// `{prefix}_TOKEN`, else `{prefix}_NKEY_SEED`, else `{prefix}_PUSHER_APP_ID` with
    /// `{prefix}_PUSHER_KEY` and `{prefix}_PUSHER_SECRET` (all three), else `{prefix}_USERNAME`
    /// with `{prefix}_PASSWORD`, from `env`; `None` when none is set.
    pub fn from_env(prefix: &str, env: impl Fn(&str) -> Option<String>) -> Option<Credentials> {
        if let Some(t) = env(&format!("{prefix}_TOKEN")) {
            return Some(Credentials::Token(t));
        }
        if let Some(seed) = env(&format!("{prefix}_NKEY_SEED")) {
            return Some(Credentials::Nkey { seed });
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
            "http" | "ws" => 80,
            _ => 0,
        });
        Ok(TargetUrl {
            scheme,
            host: host.trim_matches(['[', ']']).to_string(),
            port,
            raw: raw.into(),
            auth: None,
            ca_file: None,
        })
    }

    /// `host:port`.
    pub fn addr(&self) -> String {
        format!("{}:{}", self.host, self.port)
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
