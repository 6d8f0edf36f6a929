//! A token on HTTP requests (WebSocket upgrades, the Socket.IO handshake and its publishes):
//! verbatim in the header the target names, URL-encoded in the query parameter it names, or
//! `Authorization: Bearer <token>` by default. The request line and headers carry it; no
//! error, log line or URL printed ever does (errors name `target.raw`, which has no token).
use crate::refusal::{scrub, TargetRefused};
use runner_api::target::{Credentials, TargetUrl, TokenPlacement};

/// Where this target's token goes on a request; empty without a token.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TokenAuth {
    /// `name=value`, URL-encoded, to add to the query.
    pub query: Option<String>,
    /// (header name, value).
    pub header: Option<(String, String)>,
    /// The token, to scrub from anything the server echoes.
    secret: Option<String>,
}

impl TokenAuth {
    /// The placement of `target`'s token ([`Credentials::Token`]; other credentials are
    /// refused before a driver exists). A token or header name that cannot go into a request
    /// (a line break, a name that is no HTTP token) is a refused credential.
    pub fn for_target(target: &TargetUrl) -> anyhow::Result<TokenAuth> {
        let Some(Credentials::Token(token)) = &target.auth else {
            return Ok(TokenAuth::default());
        };
        if token.chars().any(char::is_control) {
            let why = "the token holds a control character (a line break?), which no HTTP \
                       request can carry";
            return Err(TargetRefused::auth(&target.raw, why).into());
        }
        let (query, header) = match &target.token_placement {
            Some(TokenPlacement::Query(name)) => (
                Some(format!("{}={}", url_encode(name), url_encode(token))),
                None,
            ),
            Some(TokenPlacement::Header(name)) => {
                if name.is_empty() || !name.bytes().all(is_tchar) {
                    anyhow::bail!("token header {name:?} is not an HTTP header name");
                }
                (None, Some((name.clone(), token.clone())))
            }
            None => (
                None,
                Some(("Authorization".into(), format!("Bearer {token}"))),
            ),
        };
        Ok(TokenAuth {
            query,
            header,
            secret: Some(token.clone()),
        })
    }

    /// `path` with the token's query parameter, if it goes there.
    pub fn path(&self, path: &str) -> String {
        match &self.query {
            None => path.to_string(),
            Some(q) if path.contains('?') => format!("{path}&{q}"),
            Some(q) => format!("{path}?{q}"),
        }
    }

    /// The `name: value\r\n` header line, if the token goes in a header.
    pub fn header_line(&self) -> String {
        self.header
            .as_ref()
            .map_or(String::new(), |(n, v)| format!("{n}: {v}\r\n"))
    }

    pub fn has_token(&self) -> bool {
        self.secret.is_some()
    }

    /// `text` (something the server said) without the token.
    pub fn scrub(&self, text: &str) -> String {
        match &self.secret {
            Some(s) => scrub(text, &[s]),
            None => text.to_string(),
        }
    }

    /// An HTTP answer to `what` (e.g. "the WebSocket upgrade"): a refused login for 401 and
    /// 403, with the status and the start of the body the server sent.
    pub fn refusal(
        &self,
        target: &TargetUrl,
        what: &str,
        status: u16,
        body: &[u8],
    ) -> Option<TargetRefused> {
        if status != 401 && status != 403 {
            return None;
        }
        let body: String = String::from_utf8_lossy(body).chars().take(200).collect();
        let said = if body.trim().is_empty() {
            String::new()
        } else {
            format!(": {}", self.scrub(body.trim()))
        };
        let sent = if self.has_token() {
            "a token"
        } else {
            "no token"
        };
        Some(TargetRefused::auth(
            &target.raw,
            format!("the server answered HTTP {status} to {what} (sent {sent}){said}"),
        ))
    }
}

/// RFC 7230 `tchar`: what a header name may hold.
fn is_tchar(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
}

/// Percent-encodes everything but RFC 3986's unreserved characters.
pub fn url_encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn target(placement: Option<TokenPlacement>) -> TargetUrl {
        let mut t = TargetUrl::parse("wss://w.example/ws").unwrap();
        t.auth = Some(Credentials::Token("Bearer a b/c&=é".into()));
        t.token_placement = placement;
        t
    }

    #[test]
    fn the_token_goes_to_its_placement() {
        let h = TokenAuth::for_target(&target(Some(TokenPlacement::Header("X-Api-Key".into()))))
            .unwrap();
        assert_eq!(h.header_line(), "X-Api-Key: Bearer a b/c&=é\r\n");
        assert_eq!(h.path("/ws"), "/ws");
        let q = TokenAuth::for_target(&target(Some(TokenPlacement::Query("access token".into()))))
            .unwrap();
        assert_eq!(
            q.path("/ws"),
            "/ws?access%20token=Bearer%20a%20b%2Fc%26%3D%C3%A9"
        );
        assert_eq!(q.path("/s/?EIO=4").split_once('&').unwrap().0, "/s/?EIO=4");
        assert_eq!(q.header_line(), "");
        let d = TokenAuth::for_target(&target(None)).unwrap();
        assert_eq!(
            d.header.unwrap(),
            ("Authorization".into(), "Bearer Bearer a b/c&=é".into())
        );
        let none = TokenAuth::for_target(&TargetUrl::parse("ws://w/ws").unwrap()).unwrap();
        assert_eq!(
            (none.path("/ws"), none.header_line()),
            ("/ws".into(), String::new())
        );
    }

    #[test]
    fn unusable_tokens_and_names_are_refused_without_quoting_the_token() {
        let mut t = target(None);
        t.auth = Some(Credentials::Token("abc\r\nX-Evil: 1".into()));
        let e = format!("{:#}", TokenAuth::for_target(&t).unwrap_err());
        assert!(
            e.contains("control character") && !e.contains("X-Evil"),
            "{e}"
        );
        let bad = target(Some(TokenPlacement::Header("Bad Name".into())));
        assert!(TokenAuth::for_target(&bad).is_err());
    }

    #[test]
    fn a_401_is_a_refusal_that_never_echoes_the_token() {
        let t = target(None);
        let a = TokenAuth::for_target(&t).unwrap();
        let r = a
            .refusal(
                &t,
                "the WebSocket upgrade",
                401,
                "bad token Bearer a b/c&=é".as_bytes(),
            )
            .unwrap();
        assert!(!r.to_string().contains("b/c&"), "{r}");
        assert!(r.to_string().contains("HTTP 401"), "{r}");
        assert!(a.refusal(&t, "x", 404, b"").is_none());
    }
}
