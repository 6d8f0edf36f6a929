//! Token check (AUTH_TOKEN). With a token set, every request but `/health` and `/metrics` must
//! carry it — the `/ws` upgrade, every Socket.IO request (polling and websocket transports,
//! before socketioxide sees it), `/publish` and the read endpoints (they show payloads and client
//! ids) — or it is answered 401 before any upgrade and counted in `pubsub_auth_refused_total`.
//! `/health` (the operator's probes and sampling) and `/metrics` (Prometheus) hold no secret and
//! stay open.
//!
//! Accepted: header AUTH_HEADER (default `authorization`) with exactly the token, or, for
//! `authorization`, `Bearer <token>`; or the query parameter AUTH_QUERY, when set, with the
//! token URL-encoded. Candidates are compared as SHA-256 digests in constant time, so neither
//! the token's bytes nor its length show in response times. The token is never logged: `Auth`'s
//! Debug and every configuration error leave it out.
use std::sync::Arc;

use axum::extract::{Query, Request, State};
use axum::http::header::{AUTHORIZATION, WWW_AUTHENTICATE};
use axum::http::{HeaderMap, HeaderName, StatusCode, Uri};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use prometheus::IntCounter;
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use crate::config_error::{ConfigError, Lookup};

pub const TOKEN_VAR: &str = "AUTH_TOKEN";
const MAX_TOKEN: usize = 4096;
/// Paths served without the token.
const OPEN_PATHS: [&str; 2] = ["/health", "/metrics"];

#[derive(Clone)]
pub struct Auth {
    /// SHA-256 of the token: the token itself is not kept.
    digest: [u8; 32],
    header: HeaderName,
    query: Option<String>,
}

impl std::fmt::Debug for Auth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Auth")
            .field("token", &"<redacted>")
            .field("header", &self.header)
            .field("query", &self.query)
            .finish()
    }
}

fn err(var: &'static str, value: String, rule: &'static str) -> ConfigError {
    ConfigError {
        var,
        value,
        rule: rule.into(),
    }
}

impl Auth {
    /// AUTH_TOKEN, AUTH_HEADER, AUTH_QUERY. A header or query name without a token is an error:
    /// it means a token was meant (a Secret that did not arrive) and serving open would hide it.
    pub fn from_lookup(get: Lookup) -> Result<Option<Auth>, ConfigError> {
        let header = match get("AUTH_HEADER") {
            None => AUTHORIZATION,
            Some(raw) => HeaderName::from_bytes(raw.trim().as_bytes()).map_err(|_| {
                err(
                    "AUTH_HEADER",
                    raw,
                    "must be an HTTP header name (RFC 9110 token)",
                )
            })?,
        };
        let query = get("AUTH_QUERY")
            .map(|q| {
                let ok = (1..=128).contains(&q.len())
                    && q.bytes()
                        .all(|b| b.is_ascii_alphanumeric() || b"._~-".contains(&b));
                let rule = "must be 1 to 128 characters from A-Z a-z 0-9 . _ ~ -";
                if ok {
                    Ok(q)
                } else {
                    Err(err("AUTH_QUERY", q, rule))
                }
            })
            .transpose()?;
        let Some(token) = get(TOKEN_VAR) else {
            for var in ["AUTH_HEADER", "AUTH_QUERY"] {
                if let Some(v) = get(var) {
                    return Err(err(var, v, "needs AUTH_TOKEN, the token to check"));
                }
            }
            return Ok(None);
        };
        // Visible ASCII only: it travels the same in a header and a URL, and a trailing newline
        // (a Secret written with `echo`) is an error here, not a token no client can match.
        if !(1..=MAX_TOKEN).contains(&token.len()) || !token.bytes().all(|b| b.is_ascii_graphic()) {
            let rule = "must be 1 to 4096 visible ASCII characters (no spaces or newlines)";
            return Err(err(TOKEN_VAR, "<redacted>".into(), rule));
        }
        Ok(Some(Auth {
            digest: Sha256::digest(token.as_bytes()).into(),
            header,
            query,
        }))
    }

    fn is_token(&self, candidate: &[u8]) -> bool {
        let d: [u8; 32] = Sha256::digest(candidate).into();
        d[..].ct_eq(&self.digest[..]).into()
    }

    fn header_value_fits(&self, v: &[u8]) -> bool {
        let bearer = self.header == AUTHORIZATION
            && v.len() > 7
            && v[..7].eq_ignore_ascii_case(b"bearer ")
            && self.is_token(&v[7..]);
        bearer || self.is_token(v)
    }

    /// Whether the request carries the token in one of the accepted places.
    pub fn admits(&self, headers: &HeaderMap, uri: &Uri) -> bool {
        let by_header = headers
            .get_all(&self.header)
            .iter()
            .any(|v| self.header_value_fits(v.as_bytes()));
        let by_query = self.query.as_deref().is_some_and(|name| {
            Query::<Vec<(String, String)>>::try_from_uri(uri).is_ok_and(|Query(pairs)| {
                pairs
                    .iter()
                    .any(|(k, v)| k == name && self.is_token(v.as_bytes()))
            })
        });
        by_header || by_query
    }
}

/// The middleware's state: the rule and the refusal counter.
#[derive(Clone)]
pub struct Guard {
    pub auth: Arc<Auth>,
    pub refused: IntCounter,
}

pub async fn require(State(g): State<Guard>, req: Request, next: Next) -> Response {
    if OPEN_PATHS.contains(&req.uri().path()) || g.auth.admits(req.headers(), req.uri()) {
        return next.run(req).await;
    }
    g.refused.inc();
    // The path only: the query may hold a (wrong) token.
    tracing::debug!(path = req.uri().path(), "refused: no valid token");
    let body = axum::Json(serde_json::json!({ "error": "auth: missing or wrong token" }));
    (
        StatusCode::UNAUTHORIZED,
        [(WWW_AUTHENTICATE, r#"Bearer realm="pubsub-server""#)],
        body,
    )
        .into_response()
}

#[cfg(test)]
mod tests;
