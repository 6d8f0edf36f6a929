//! async-nats connections (request/reply, JetStream, the library client path and the stream
//! sweep): the target's credentials and TLS, and its refusals as [`TargetRefused`].
use super::{record_error, DISCONNECTED};
use crate::recorder::Shared;
use crate::refusal::{self, TargetRefused};
use crate::tls::TlsClient;
use runner_api::target::{Credentials, TargetUrl};

/// Connects with settings fit for benchmarking. async-nats reconnects by itself after a
/// disconnect; with `counted`, every disconnect is recorded there as error `disconnected`, so a
/// reconnect inside the measured window is reported, never silent.
pub async fn connect(
    target: &TargetUrl,
    tls: &TlsClient,
    name: String,
    counted: Option<Shared>,
) -> anyhow::Result<async_nats::Client> {
    let url = format!(
        "{}://{}",
        if target.scheme == "tls" {
            "tls"
        } else {
            "nats"
        },
        target.addr()
    );
    let mut o = options(target)?;
    if let Some(stats) = counted {
        o = o.event_callback(move |ev| {
            let stats = stats.clone();
            async move {
                if matches!(ev, async_nats::Event::Disconnected) {
                    record_error(&stats, u8::MAX, DISCONNECTED);
                }
            }
        });
    }
    // Always the target's TLS config: a nats:// server whose INFO requires TLS is upgraded
    // with it too (CA, client certificate, server name).
    o = o.tls_client_config((*tls.config()).clone());
    if target.scheme == "tls" {
        // Servers announce peers by pod IP, which their certificate does not name: stay on
        // the URL given.
        o = o.require_tls(true).ignore_discovered_servers();
    }
    o.name(name)
        .client_capacity(65_536)
        .subscription_capacity(1 << 20)
        .connect(url.as_str())
        .await
        .map_err(|e| connect_error(target, e))
}

/// async-nats' options with the target's credentials.
fn options(target: &TargetUrl) -> anyhow::Result<async_nats::ConnectOptions> {
    Ok(match &target.auth {
        None => async_nats::ConnectOptions::new(),
        Some(Credentials::Token(t)) => async_nats::ConnectOptions::with_token(t.clone()),
        Some(Credentials::UserPassword { username, password }) => {
            async_nats::ConnectOptions::with_user_and_password(username.clone(), password.clone())
        }
        Some(Credentials::Nkey { seed }) => async_nats::ConnectOptions::with_nkey(seed.clone()),
        Some(Credentials::Creds(text)) => {
            // The wire path's parser, so both clients take the same files.
            let c =
                super::nats_creds::parse(text).map_err(|e| TargetRefused::auth(&target.raw, e))?;
            let key = c.key;
            async_nats::ConnectOptions::new().jwt(c.jwt, move |nonce| {
                let key = key.clone();
                async move { key.sign(&nonce).map_err(async_nats::AuthError::new) }
            })
        }
        Some(Credentials::PusherApp { .. }) => {
            anyhow::bail!("Pusher app credentials do not apply to NATS")
        }
    })
}

/// A refused login or a failed TLS handshake as a [`TargetRefused`] (async-nats reports a
/// handshake failure as an I/O error: its text says which); anything else naming the target.
fn connect_error(target: &TargetUrl, e: async_nats::ConnectError) -> anyhow::Error {
    use async_nats::ConnectErrorKind as K;
    let text = e.to_string();
    if matches!(e.kind(), K::AuthorizationViolation | K::Authentication)
        || refusal::is_nats_auth_error(&text)
    {
        return TargetRefused::auth(&target.raw, text).into();
    }
    if let Some(why) = crate::tls::failure_in_error(&e) {
        return TargetRefused::tls(&target.raw, why).into();
    }
    if e.kind() == K::Tls || crate::tls::is_failure_text(&text) {
        return TargetRefused::tls(&target.raw, text).into();
    }
    anyhow::anyhow!("connect to {}: {e}", target.raw)
}
