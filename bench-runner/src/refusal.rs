//! A target that answered, and said no: wrong credentials, TLS that cannot be established, a
//! protocol version it does not speak. Unlike a target that is not up yet, no retry can mend
//! these, so the connect window returns them at once ([`crate::connect::is_transient`]) and the
//! runner ends with the matching termination reason. The detail is what the server said or
//! what the runner saw, never a credential.
use runner_api::termination::RunnerGaveUp;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refusal {
    /// The credentials were refused, or are unusable as given.
    Auth,
    /// TLS with the target failed (certificate, handshake, or the TLS files given).
    Tls,
    /// The target refused the protocol version.
    Protocol,
}

/// The target refused this runner; see [`Refusal`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TargetRefused {
    pub refusal: Refusal,
    /// The target as given (no credentials: they are never part of a URL here).
    pub url: String,
    pub detail: String,
}

impl TargetRefused {
    pub fn new(refusal: Refusal, url: &str, detail: impl Into<String>) -> Self {
        TargetRefused {
            refusal,
            url: url.to_string(),
            detail: detail.into(),
        }
    }
    pub fn auth(url: &str, detail: impl Into<String>) -> Self {
        Self::new(Refusal::Auth, url, detail)
    }
    pub fn tls(url: &str, detail: impl Into<String>) -> Self {
        Self::new(Refusal::Tls, url, detail)
    }
    pub fn protocol(url: &str, detail: impl Into<String>) -> Self {
        Self::new(Refusal::Protocol, url, detail)
    }

    /// The termination reason the runner ends with.
    pub fn reason(&self) -> RunnerGaveUp {
        match self.refusal {
            Refusal::Auth => RunnerGaveUp::TargetAuthFailed,
            Refusal::Tls => RunnerGaveUp::TargetTLSFailed,
            Refusal::Protocol => RunnerGaveUp::TargetProtocolRefused,
        }
    }
}

impl std::fmt::Display for TargetRefused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (url, detail) = (&self.url, &self.detail);
        match self.refusal {
            Refusal::Auth => write!(f, "target {url} refused the credentials: {detail}"),
            Refusal::Tls => write!(f, "TLS with target {url} failed: {detail}"),
            Refusal::Protocol => write!(f, "target {url} refused the protocol: {detail}"),
        }
    }
}

impl std::error::Error for TargetRefused {}

/// The refusal anywhere in `e`'s chain.
pub fn refusal_of(e: &anyhow::Error) -> Option<&TargetRefused> {
    e.chain().find_map(|c| c.downcast_ref::<TargetRefused>())
}

/// `e` as it is when it holds a refusal (whose message names the target already), else `wrap(e)`.
pub fn keep_refusal(
    e: anyhow::Error,
    wrap: impl FnOnce(anyhow::Error) -> anyhow::Error,
) -> anyhow::Error {
    if refusal_of(&e).is_some() {
        e
    } else {
        wrap(e)
    }
}

/// What a NATS server says (in `-ERR`, lowercased) when it refuses a client's credentials:
/// wrong ones, none where it needs some (`Authentication Timeout`), expired or revoked ones.
const NATS_AUTH_ERRORS: &[&str] = &[
    "authorization violation",
    "authentication timeout",
    "authentication expired",
    "authentication revoked",
    "user authentication",
    "account authentication",
];

/// Whether NATS error text (a `-ERR` line or a client's error) refuses the credentials.
pub fn is_nats_auth_error(text: &str) -> bool {
    let low = text.to_ascii_lowercase();
    NATS_AUTH_ERRORS.iter().any(|m| low.contains(m))
}

/// An MQTT CONNACK code that refuses this client for good: the login (3.1.1: 4, 5; MQTT 5:
/// 0x86, 0x87, 0x8C) or the protocol version (3.1.1: 1; MQTT 5: 0x84), with the words for it.
/// The two code ranges do not overlap, so the version need not be known.
pub fn mqtt_connack_refusal(code: u8) -> Option<(Refusal, String)> {
    let (refusal, why) = match code {
        4 | 0x86 => (Refusal::Auth, "bad user name or password"),
        5 | 0x87 => (Refusal::Auth, "not authorized"),
        0x8C => (Refusal::Auth, "bad authentication method"),
        1 => (
            Refusal::Protocol,
            "unacceptable protocol version (MQTT 3.1.1)",
        ),
        0x84 => (Refusal::Protocol, "unsupported protocol version (MQTT 5)"),
        _ => return None,
    };
    let text = match refusal {
        Refusal::Auth => format!(
            "the broker refused the login: {why} (CONNACK return code {code}); check the user \
             name and password"
        ),
        _ => format!("the broker refused the connection: {why} (CONNACK return code {code})"),
    };
    Some((refusal, text))
}

/// `text` with every secret in `secrets` (at least 4 characters) replaced, so a server that
/// echoes what it was sent cannot carry a credential into an error.
pub fn scrub(text: &str, secrets: &[&str]) -> String {
    let mut out = text.to_string();
    for s in secrets.iter().filter(|s| s.len() >= 4) {
        out = out.replace(s, "[redacted]");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refusals_keep_their_kind_through_context_and_name_the_target() {
        let e = anyhow::Error::new(TargetRefused::auth(
            "nats://h:4222",
            "-ERR 'Authorization Violation'",
        ))
        .context("subscriber 0");
        let r = refusal_of(&e).expect("found in the chain");
        assert_eq!(r.reason(), RunnerGaveUp::TargetAuthFailed);
        assert_eq!(
            format!("{e:#}"),
            "subscriber 0: target nats://h:4222 refused the credentials: -ERR 'Authorization Violation'"
        );
        let kept = keep_refusal(e, |e| e.context("never"));
        assert!(!format!("{kept:#}").contains("never"));
        let other = keep_refusal(anyhow::anyhow!("boom"), |e| e.context("connect to x"));
        assert_eq!(format!("{other:#}"), "connect to x: boom");
    }

    #[test]
    fn connack_codes_are_told_apart() {
        for (code, want) in [
            (4, Refusal::Auth),
            (5, Refusal::Auth),
            (0x86, Refusal::Auth),
            (0x87, Refusal::Auth),
            (0x8C, Refusal::Auth),
            (1, Refusal::Protocol),
            (0x84, Refusal::Protocol),
        ] {
            assert_eq!(
                mqtt_connack_refusal(code).map(|r| r.0),
                Some(want),
                "{code}"
            );
        }
        for code in [0, 2, 3, 0x80, 0x88] {
            assert_eq!(mqtt_connack_refusal(code), None, "{code}");
        }
        assert!(mqtt_connack_refusal(5)
            .unwrap()
            .1
            .contains("refused the login"));
    }

    #[test]
    fn nats_auth_errors_and_scrubbing() {
        assert!(is_nats_auth_error("-ERR 'Authorization Violation'"));
        assert!(is_nats_auth_error("-ERR 'Authentication Timeout'"));
        assert!(is_nats_auth_error("IO error: user authentication expired"));
        assert!(!is_nats_auth_error("-ERR 'Unknown Protocol Operation'"));
        assert_eq!(
            scrub("got Bearer s3cret!", &["s3cret", "x"]),
            "got Bearer [redacted]!"
        );
    }
}
