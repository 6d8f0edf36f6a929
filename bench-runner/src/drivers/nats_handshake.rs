//! The NATS client handshake of the wire path: INFO, TLS when either side wants it, CONNECT
//! with the credentials (token, user and password, NKey, or a `.creds` file's JWT and key),
//! then PING/PONG. A server that refuses the credentials or the TLS is a [`TargetRefused`].
use super::nats_creds as creds;
use super::nats_wire::{line_end, DEFAULT_MAX_PAYLOAD};
use crate::net::{ReadHalf, Stream, WriteHalf};
use crate::refusal::{self, TargetRefused};
use crate::tls::TlsClient;
use bytes::{Buf, BytesMut};
use runner_api::target::{Credentials, TargetUrl};
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::Mutex;

/// One NATS connection after the CONNECT handshake.
pub struct Conn {
    pub reader: ReadHalf,
    pub writer: Arc<Mutex<WriteHalf>>,
    /// Bytes read past the handshake.
    pub buf: BytesMut,
    /// Largest MSG payload the server may send: its INFO `max_payload`, capped at
    /// [`DEFAULT_MAX_PAYLOAD`].
    pub max_payload: usize,
}

/// `max_payload` from an INFO line, capped at [`DEFAULT_MAX_PAYLOAD`] (which it is without).
pub fn info_max_payload(info: &str) -> usize {
    let json = info.strip_prefix("INFO ").unwrap_or(info);
    serde_json::from_str::<serde_json::Value>(json)
        .ok()
        .and_then(|v| v.get("max_payload")?.as_u64())
        .and_then(|n| usize::try_from(n).ok())
        .map_or(DEFAULT_MAX_PAYLOAD, |n| n.min(DEFAULT_MAX_PAYLOAD))
}

/// Connects, upgrades to TLS when the URL is `tls://` or the server's INFO requires it (a
/// `nats://` server with `tls_required` too), and completes the CONNECT handshake.
pub async fn connect(target: &TargetUrl, tls: &TlsClient, name: &str) -> anyhow::Result<Conn> {
    let f = async {
        let mut s = TcpStream::connect(target.addr()).await?;
        s.set_nodelay(true)?;
        let mut buf = BytesMut::with_capacity(64 * 1024);
        // NATS sends its INFO in the clear, then the client starts TLS if either side wants it.
        let info = read_line(&mut s, &mut buf).await?;
        if !info.starts_with("INFO ") {
            anyhow::bail!("expected INFO, got {info:?}");
        }
        let max_payload = info_max_payload(&info);
        let stream = if tls_wanted(target, &info)? {
            Stream::Tls(Box::new(tls.connect(s).await?))
        } else {
            Stream::Plain(s)
        };
        let (mut r, mut w) = stream.into_split();
        w.write_all(connect_line(target, name, &info)?.as_bytes())
            .await?;
        loop {
            let l = read_line(&mut r, &mut buf).await?;
            match l.as_str() {
                "PONG" => break,
                "+OK" => {}
                l if l.starts_with("INFO ") => {}
                l if refusal::is_nats_auth_error(l) => {
                    return Err(TargetRefused::auth(&target.raw, l).into())
                }
                l => anyhow::bail!("handshake: {l}"),
            }
        }
        Ok(Conn {
            reader: r,
            writer: Arc::new(Mutex::new(w)),
            buf,
            max_payload,
        })
    };
    tokio::time::timeout(Duration::from_secs(10), f)
        .await
        .map_err(|_| anyhow::anyhow!("connect to {}: no PONG within 10 s", target.raw))?
        .map_err(|e: anyhow::Error| handshake_error(target, e))
}

/// A refusal as it is; a TLS failure on the first reads (a TLS 1.3 server refusing the client
/// certificate after the handshake) as one; anything else naming the target.
fn handshake_error(target: &TargetUrl, e: anyhow::Error) -> anyhow::Error {
    if refusal::refusal_of(&e).is_none() {
        if let Some(why) = crate::tls::failure_in(&e) {
            return TargetRefused::tls(&target.raw, why).into();
        }
    }
    refusal::keep_refusal(e, |e| anyhow::anyhow!("connect to {}: {e}", target.raw))
}

/// TLS when the server requires it, or the URL asks for it and the server offers it; a `tls://`
/// URL on a server without TLS is refused (it would send credentials in the clear).
fn tls_wanted(target: &TargetUrl, info: &str) -> Result<bool, TargetRefused> {
    let v: serde_json::Value =
        serde_json::from_str(info.strip_prefix("INFO ").unwrap_or(info)).unwrap_or_default();
    let flag = |k: &str| v.get(k).and_then(serde_json::Value::as_bool) == Some(true);
    match (
        target.scheme == "tls",
        flag("tls_required"),
        flag("tls_available"),
    ) {
        (_, true, _) | (true, false, true) => Ok(true),
        (true, false, false) => Err(TargetRefused::tls(
            &target.raw,
            "the server does not offer TLS (its INFO has neither tls_required nor tls_available)",
        )),
        (false, false, _) => Ok(false),
    }
}

/// The CONNECT line (then a PING), with the credentials when there are any (JSON-escaped): an
/// NKey, or a `.creds` file's key, signs the nonce of the server's `info` line. Unusable
/// credentials are refusals that never quote them.
fn connect_line(target: &TargetUrl, name: &str, info: &str) -> anyhow::Result<String> {
    let mut o = serde_json::json!({
        "verbose": false, "pedantic": false, "name": name, "lang": "rust-msgbench",
        "version": "0.1.0", "protocol": 1, "echo": true,
    });
    let refused = |why: &str| TargetRefused::auth(&target.raw, why);
    let nonce = || {
        serde_json::from_str::<serde_json::Value>(info.strip_prefix("INFO ").unwrap_or(info))
            .ok()
            .and_then(|v| Some(v.get("nonce")?.as_str()?.to_string()))
            .ok_or_else(|| {
                refused("the server sent no nonce to sign: it takes no NKey or JWT users")
            })
    };
    match &target.auth {
        None => {}
        Some(Credentials::Token(t)) => o["auth_token"] = t.as_str().into(),
        Some(Credentials::UserPassword { username, password }) => {
            o["user"] = username.as_str().into();
            o["pass"] = password.as_str().into();
        }
        Some(Credentials::Nkey { seed }) => {
            let key = nkeys::KeyPair::from_seed(seed)
                .map_err(|_| refused("the NKey seed is not a valid user seed"))?;
            o["nkey"] = key.public_key().into();
            o["sig"] = creds::sign_nonce(&key, &nonce()?)
                .map_err(|e| refused(&e))?
                .into();
        }
        Some(Credentials::Creds(text)) => {
            let c = creds::parse(text).map_err(|e| refused(&e))?;
            o["jwt"] = c.jwt.into();
            o["sig"] = creds::sign_nonce(&c.key, &nonce()?)
                .map_err(|e| refused(&e))?
                .into();
        }
        Some(Credentials::PusherApp { .. }) => {
            anyhow::bail!("Pusher app credentials do not apply to NATS")
        }
    }
    Ok(format!("CONNECT {o}\r\nPING\r\n"))
}

async fn read_line<R: AsyncRead + Unpin>(r: &mut R, buf: &mut BytesMut) -> anyhow::Result<String> {
    loop {
        if let Some(i) = line_end(buf)? {
            let line = String::from_utf8_lossy(&buf[..i]).into_owned();
            buf.advance(i + 2);
            return Ok(line);
        }
        if r.read_buf(buf).await? == 0 {
            anyhow::bail!("connection closed");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn target(url: &str, auth: Option<Credentials>) -> TargetUrl {
        let mut t = TargetUrl::parse(url).unwrap();
        t.auth = auth;
        t
    }

    #[test]
    fn tls_follows_the_url_and_the_servers_info() {
        let (plain, tls) = (target("nats://h", None), target("tls://h", None));
        let info = |j: &str| format!("INFO {j}");
        assert_eq!(tls_wanted(&plain, &info("{}")), Ok(false));
        assert_eq!(
            tls_wanted(&plain, &info(r#"{"tls_required":true}"#)),
            Ok(true)
        );
        assert_eq!(
            tls_wanted(&plain, &info(r#"{"tls_available":true}"#)),
            Ok(false)
        );
        assert_eq!(
            tls_wanted(&tls, &info(r#"{"tls_available":true}"#)),
            Ok(true)
        );
        let e = tls_wanted(&tls, &info("{}")).unwrap_err();
        assert!(e.to_string().contains("does not offer TLS"), "{e}");
    }

    /// A `.creds` user sends its JWT and the nonce signed with its seed, which verifies with
    /// the user's public key; the seed itself is never in the line.
    #[test]
    fn a_creds_user_signs_the_nonce() {
        use base64::Engine;
        let user = nkeys::KeyPair::new_user();
        let seed = user.seed().unwrap();
        let text = format!(
            "-----BEGIN NATS USER JWT-----\naGVhZA.Ym9keQ.c2ln\n------END NATS USER JWT------\n\n\
             -----BEGIN USER NKEY SEED-----\n{seed}\n------END USER NKEY SEED------\n"
        );
        let t = target("nats://h", Some(Credentials::Creds(text)));
        let line = connect_line(&t, "n", r#"INFO {"nonce":"abc"}"#).unwrap();
        assert!(!line.contains(&seed), "{line}");
        let json = line
            .strip_prefix("CONNECT ")
            .unwrap()
            .split("\r\n")
            .next()
            .unwrap();
        let v: serde_json::Value = serde_json::from_str(json).unwrap();
        assert_eq!(v["jwt"], "aGVhZA.Ym9keQ.c2ln");
        let sig = base64::engine::general_purpose::URL_SAFE_NO_PAD
            .decode(v["sig"].as_str().unwrap())
            .unwrap();
        assert!(user.verify(b"abc", &sig).is_ok());
        // No nonce: the server takes no JWT users; a refused login, not a retry.
        let e = connect_line(&t, "n", "INFO {}").unwrap_err();
        assert!(refusal::refusal_of(&e).is_some(), "{e:#}");
    }

    #[test]
    fn max_payload_comes_from_info_capped() {
        assert_eq!(
            info_max_payload(r#"INFO {"max_payload":1048576}"#),
            1_048_576
        );
        let huge = r#"INFO {"max_payload":99999999999}"#;
        assert_eq!(info_max_payload(huge), DEFAULT_MAX_PAYLOAD);
        assert_eq!(info_max_payload("INFO {}"), DEFAULT_MAX_PAYLOAD);
        assert_eq!(info_max_payload("INFO nonsense"), DEFAULT_MAX_PAYLOAD);
    }
}
