//! Who may drive a runner or a fault agent: whoever holds the operator's Ed25519 signing key.
//! The operator signs one credential per request, naming the scope (a run's uid for its
//! runners, a server object's uid for its fault agents), the request's method and path, a
//! short expiry and a random nonce. An agent knows only the public keys (a pod environment
//! variable, not a secret) and its own scope; it refuses a credential for another scope, another
//! request, out of its time, or one it has already seen. So no per-run Secret exists, and a
//! credential seen on the (plain HTTP) wire cannot be used again, nor for another endpoint.
//!
//! Credential: `msgbench2.<base64url(claim)>.<base64url(signature)>[.<base64url(signature)>]`,
//! presented as `Authorization: Bearer …`; the claim is
//! `msgbench2 \n scope \n METHOD \n path?query \n expiry unix seconds \n base64url(nonce)`.
//! The operator signs it with every key it holds (current, and the previous one during a key
//! rotation's overlap), so runner pods made before a rotation still accept it; a pod accepts a
//! signature by any of the keys it was given.
use base64::engine::general_purpose::URL_SAFE_NO_PAD as B64;
use base64::Engine;
use ed25519_dalek::{Signature, Signer, SigningKey, VerifyingKey};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// Pod variable: the operator's public keys, base64 (standard alphabet), comma-separated:
/// the current key first, then the previous one while a rotation overlaps.
pub const PUBLIC_KEY_ENV: &str = "MSGBENCH_CONTROL_PUBLIC_KEY";
/// Runner pod variable: the uid of the run the runner belongs to.
pub const RUN_UID_ENV: &str = "MSGBENCH_RUN_UID";
/// Key of the current 32-byte seed in the operator's key Secret.
pub const SEED_KEY: &str = "ed25519.seed";
/// Key of the previous seed in that Secret (optional): still signed with, during the overlap.
pub const PREVIOUS_SEED_KEY: &str = "ed25519.previous.seed";
/// How long a credential is valid after it was signed: one request, so seconds.
pub const CREDENTIAL_TTL_SECS: u64 = 30;
/// Clock difference tolerated between the operator's and an agent's node.
pub const CLOCK_SKEW_SECS: u64 = 30;
/// Keys an agent accepts and signatures a credential carries: current and previous.
pub const MAX_KEYS: usize = 2;
/// Nonces an agent remembers at once. Each is kept until its credential could no longer be
/// accepted (at most TTL + 2 × skew); the operator sends a few requests a second at most, so a
/// full cache means a flood of signed requests, and it is refused rather than grown.
pub const REPLAY_CACHE_MAX: usize = 4096;
/// Random bytes per credential.
pub const NONCE_BYTES: usize = 16;
/// Longer than any credential the operator signs (scope, method and path are short).
const MAX_CREDENTIAL_BYTES: usize = 2048;
const VERSION: &str = "msgbench2";
const PREFIX: &str = "msgbench2.";
/// Formats no longer accepted, to say so instead of "not a credential".
const OLD_PREFIXES: [&str; 1] = ["msgbench1."];

/// What one credential allows: one request to one agent.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Claim<'a> {
    /// A run's uid (its runners) or a server object's uid (its fault agents).
    pub scope: &'a str,
    /// `GET`, `POST`.
    pub method: &'a str,
    /// The request target as sent: path, and `?query` if any.
    pub path: &'a str,
}

impl Claim<'_> {
    fn signed_bytes(&self, expiry: u64, nonce: &[u8; NONCE_BYTES]) -> String {
        let Claim {
            scope,
            method,
            path,
        } = self;
        let nonce = B64.encode(nonce);
        format!("{VERSION}\n{scope}\n{method}\n{path}\n{expiry}\n{nonce}")
    }
}

/// The operator's side: its current key, then the previous one while a rotation overlaps.
pub struct ControlSigner {
    keys: Vec<SigningKey>,
}

/// Public keys only: a seed is never printed.
impl std::fmt::Debug for ControlSigner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ControlSigner")
            .field("public_keys", &self.public_keys())
            .finish()
    }
}

impl ControlSigner {
    pub fn from_seed(seed: [u8; 32]) -> Self {
        Self {
            keys: vec![SigningKey::from_bytes(&seed)],
        }
    }

    /// Also signs with the key of `seed`, the one before the current (a rotation's overlap).
    pub fn with_previous(mut self, seed: [u8; 32]) -> Self {
        self.keys.truncate(1);
        self.keys.push(SigningKey::from_bytes(&seed));
        self
    }

    /// The current public key (base64, standard alphabet).
    pub fn public_key(&self) -> String {
        encode_key(&self.keys[0])
    }

    /// What agent pods get in [`PUBLIC_KEY_ENV`]: every key, current first, comma-separated.
    pub fn public_keys(&self) -> String {
        let keys: Vec<String> = self.keys.iter().map(encode_key).collect();
        keys.join(",")
    }

    /// A credential for one request, `claim`, valid for [`CREDENTIAL_TTL_SECS`] from
    /// `now_unix`. `nonce` must be fresh and random for each call (the agent refuses a nonce
    /// it has seen).
    pub fn credential(&self, claim: &Claim<'_>, now_unix: u64, nonce: [u8; NONCE_BYTES]) -> String {
        debug_assert!(
            ![claim.scope, claim.method, claim.path]
                .iter()
                .any(|f| f.contains('\n')),
            "a claim field holds a newline"
        );
        let signed = claim.signed_bytes(now_unix + CREDENTIAL_TTL_SECS, &nonce);
        let mut out = format!("{PREFIX}{}", B64.encode(signed.as_bytes()));
        for k in &self.keys {
            out.push('.');
            out.push_str(&B64.encode(k.sign(signed.as_bytes()).to_bytes()));
        }
        out
    }
}

fn encode_key(k: &SigningKey) -> String {
    base64::engine::general_purpose::STANDARD.encode(k.verifying_key().as_bytes())
}

/// Why an agent refused a credential (said in its answer; nothing secret in it).
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum CredentialError {
    #[error("not a msgbench credential")]
    Malformed,
    #[error(
        "credential format {0} is no longer accepted (this agent takes {VERSION}): the operator \
         is older than this agent; run the same version of both"
    )]
    OldFormat(&'static str),
    #[error("signature does not verify with this agent's operator keys")]
    BadSignature,
    #[error("credential is for another run or server")]
    OtherScope,
    #[error("credential is for another request (signed for {0})")]
    OtherRequest(String),
    #[error("credential expired or not yet valid (check the nodes' clocks)")]
    OutOfTime,
    #[error("credential already used: a replayed request")]
    Replayed,
    #[error("too many control requests within a minute; try again shortly")]
    Busy,
}

/// Nonces seen, each with the last second its credential could still be accepted.
#[derive(Debug, Default)]
struct ReplayCache {
    until: HashMap<[u8; NONCE_BYTES], u64>,
}

impl ReplayCache {
    /// Remembers `nonce` until `keep_until`; `Replayed` when it is already there, `Busy` when
    /// [`REPLAY_CACHE_MAX`] nonces are still live (the cache never grows past that).
    fn admit(
        &mut self,
        nonce: [u8; NONCE_BYTES],
        keep_until: u64,
        now: u64,
    ) -> Result<(), CredentialError> {
        if self.until.get(&nonce).is_some_and(|&t| t >= now) {
            return Err(CredentialError::Replayed);
        }
        if self.until.len() >= REPLAY_CACHE_MAX {
            self.until.retain(|_, t| *t >= now);
        }
        if self.until.len() >= REPLAY_CACHE_MAX {
            return Err(CredentialError::Busy);
        }
        self.until.insert(nonce, keep_until);
        Ok(())
    }
}

/// The agent's side. Clones share one replay cache.
#[derive(Clone, Debug)]
pub struct ControlVerifier {
    keys: Vec<VerifyingKey>,
    scope: String,
    seen: Arc<Mutex<ReplayCache>>,
}

/// A credential taken apart, its signature(s) not checked yet.
struct Parsed {
    signed: Vec<u8>,
    signatures: Vec<Signature>,
}

fn parse(credential: &str) -> Result<Parsed, CredentialError> {
    if credential.len() > MAX_CREDENTIAL_BYTES {
        return Err(CredentialError::Malformed);
    }
    let Some(rest) = credential.strip_prefix(PREFIX) else {
        let old = OLD_PREFIXES.iter().find(|p| credential.starts_with(*p));
        return Err(old.map_or(CredentialError::Malformed, |p| {
            CredentialError::OldFormat(p.trim_end_matches('.'))
        }));
    };
    let mut parts = rest.split('.');
    let signed = parts
        .next()
        .and_then(|c| B64.decode(c).ok())
        .ok_or(CredentialError::Malformed)?;
    let signatures = parts
        .map(|s| {
            let bytes: [u8; 64] = B64.decode(s).ok()?.try_into().ok()?;
            Some(Signature::from_bytes(&bytes))
        })
        .collect::<Option<Vec<_>>>()
        .filter(|s| (1..=MAX_KEYS).contains(&s.len()))
        .ok_or(CredentialError::Malformed)?;
    Ok(Parsed { signed, signatures })
}

/// The fields of a signed claim: scope, method, path, expiry, nonce.
fn fields(signed: &[u8]) -> Result<(&str, &str, &str, u64, [u8; NONCE_BYTES]), CredentialError> {
    let text = std::str::from_utf8(signed).map_err(|_| CredentialError::Malformed)?;
    let f: Vec<&str> = text.split('\n').collect();
    let [version, scope, method, path, expiry, nonce] = f[..] else {
        return Err(CredentialError::Malformed);
    };
    let expiry: u64 = expiry.parse().map_err(|_| CredentialError::Malformed)?;
    let nonce: [u8; NONCE_BYTES] = B64
        .decode(nonce)
        .ok()
        .and_then(|n| n.try_into().ok())
        .ok_or(CredentialError::Malformed)?;
    match version == VERSION {
        true => Ok((scope, method, path, expiry, nonce)),
        false => Err(CredentialError::Malformed),
    }
}

impl ControlVerifier {
    /// From the pod's variables' values (`public_keys` as in [`PUBLIC_KEY_ENV`]); an error
    /// says which one is wrong.
    pub fn new(public_keys: &str, scope: &str) -> Result<Self, String> {
        let keys = public_keys
            .split(',')
            .map(str::trim)
            .filter(|k| !k.is_empty())
            .map(decode_key)
            .collect::<Result<Vec<_>, _>>()?;
        if keys.is_empty() {
            return Err(format!("{PUBLIC_KEY_ENV} is empty"));
        }
        if keys.len() > MAX_KEYS {
            return Err(format!("{PUBLIC_KEY_ENV}: at most {MAX_KEYS} keys"));
        }
        if scope.trim().is_empty() {
            return Err(format!(
                "{RUN_UID_ENV} (or the fault agent's scope) is empty"
            ));
        }
        Ok(Self {
            keys,
            scope: scope.trim().into(),
            seen: Arc::default(),
        })
    }

    /// Accepts `credential` for one request `method path` (path with its query) at `now_unix`,
    /// once: the same credential again is `Replayed`.
    pub fn check(
        &self,
        credential: &str,
        method: &str,
        path: &str,
        now_unix: u64,
    ) -> Result<(), CredentialError> {
        let p = parse(credential)?;
        let verifies = |s: &Signature| {
            self.keys
                .iter()
                .any(|k| k.verify_strict(&p.signed, s).is_ok())
        };
        if !p.signatures.iter().any(verifies) {
            return Err(CredentialError::BadSignature);
        }
        // Only a signed claim is parsed, and only a signed one reaches the replay cache.
        let (scope, m, pth, expiry, nonce) = fields(&p.signed)?;
        if scope != self.scope {
            return Err(CredentialError::OtherScope);
        }
        if m != method || pth != path {
            return Err(CredentialError::OtherRequest(format!("{m} {pth}")));
        }
        let too_old = now_unix > expiry.saturating_add(CLOCK_SKEW_SECS);
        let too_new = expiry > now_unix + CREDENTIAL_TTL_SECS + CLOCK_SKEW_SECS;
        if too_old || too_new {
            return Err(CredentialError::OutOfTime);
        }
        let mut seen = self.seen.lock().unwrap_or_else(|p| p.into_inner());
        seen.admit(nonce, expiry + CLOCK_SKEW_SECS, now_unix)
    }

    /// Nonces held now (for tests of the bound).
    pub fn remembered(&self) -> usize {
        self.seen
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .until
            .len()
    }
}

fn decode_key(b64: &str) -> Result<VerifyingKey, String> {
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(b64)
        .map_err(|e| format!("{PUBLIC_KEY_ENV}: not base64: {e}"))?;
    let arr: [u8; 32] = bytes
        .try_into()
        .map_err(|_| format!("{PUBLIC_KEY_ENV}: an Ed25519 public key is 32 bytes"))?;
    VerifyingKey::from_bytes(&arr)
        .map_err(|e| format!("{PUBLIC_KEY_ENV}: not an Ed25519 public key: {e}"))
}

#[cfg(test)]
mod tests;
