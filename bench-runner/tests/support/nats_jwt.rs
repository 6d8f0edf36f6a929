//! NATS decentralized auth for tests: an operator, an account and users, as the JWTs nsc
//! writes. No maintained Rust crate issues NATS JWTs, so the minimal claims (JWT v2) are
//! written here by hand and signed with `nkeys` (ed25519): header
//! `{"typ":"JWT","alg":"ed25519-nkey"}`, claims with `iss` the signing key and `sub` the
//! subject key, signature base64url over `header.claims`. Test support only.
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use nkeys::KeyPair;
use serde_json::{json, Value};
use sha2::{Digest, Sha256};

/// A JWT of `nats` claims about `subject`, issued (signed) by `issuer`.
fn jwt(issuer: &KeyPair, subject: &str, name: &str, nats: Value) -> String {
    let header = URL_SAFE_NO_PAD.encode(r#"{"typ":"JWT","alg":"ed25519-nkey"}"#);
    let iat = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let mut claims = json!({
        "iat": iat, "iss": issuer.public_key(), "name": name, "sub": subject, "nats": nats,
    });
    // The claims' id: a hash of them (any unique string would do for the server).
    let id = hex::encode(Sha256::digest(claims.to_string().as_bytes())).to_uppercase();
    claims["jti"] = id[..52].into();
    let body = URL_SAFE_NO_PAD.encode(claims.to_string());
    let signed = format!("{header}.{body}");
    let sig = issuer.sign(signed.as_bytes()).unwrap();
    format!("{signed}.{}", URL_SAFE_NO_PAD.encode(sig))
}

/// No limits (-1), with JetStream (which the system account may not have) or without.
fn unlimited_account(jetstream: bool) -> Value {
    let mut limits = json!({
        "subs": -1, "data": -1, "payload": -1, "imports": -1, "exports": -1,
        "wildcards": true, "conn": -1, "leaf": -1,
    });
    if jetstream {
        for k in [
            "mem_storage",
            "disk_storage",
            "streams",
            "consumer",
            "max_ack_pending",
        ] {
            limits[k] = (-1).into();
        }
    }
    json!({
        "limits": limits,
        "default_permissions": {"pub": {}, "sub": {}},
        "type": "account", "version": 2
    })
}

/// An operator with one account (and a system account), as a server config takes them.
pub struct Operator {
    pub jwt: String,
    pub account: KeyPair,
    pub account_jwt: String,
    pub system: KeyPair,
    pub system_jwt: String,
}

impl Operator {
    pub fn new() -> Operator {
        let op = KeyPair::new_operator();
        let op_jwt = jwt(
            &op,
            &op.public_key(),
            "msgbench-test",
            json!({"type": "operator", "version": 2}),
        );
        let account = KeyPair::new_account();
        let account_jwt = jwt(&op, &account.public_key(), "bench", unlimited_account(true));
        let system = KeyPair::new_account();
        let system_jwt = jwt(&op, &system.public_key(), "SYS", unlimited_account(false));
        Operator {
            jwt: op_jwt,
            account,
            account_jwt,
            system,
            system_jwt,
        }
    }

    /// The server config lines of operator mode with the accounts preloaded in memory.
    pub fn config(&self) -> String {
        format!(
            "operator: {}\nsystem_account: {}\nresolver: MEMORY\nresolver_preload: {{\n  {}: {}\n  {}: {}\n}}\n",
            self.jwt,
            self.system.public_key(),
            self.account.public_key(),
            self.account_jwt,
            self.system.public_key(),
            self.system_jwt
        )
    }

    /// A new user of the account, as a `.creds` file's content (and the user's seed).
    pub fn user_creds(&self) -> (String, String) {
        user_creds_signed_by(&self.account)
    }
}

/// A user signed by `account` (one the server may not know), as a `.creds` file's content.
pub fn user_creds_signed_by(account: &KeyPair) -> (String, String) {
    let user = KeyPair::new_user();
    let claims = json!({"pub": {}, "sub": {}, "subs": -1, "data": -1, "payload": -1, "type": "user", "version": 2});
    let user_jwt = jwt(account, &user.public_key(), "runner", claims);
    let seed = user.seed().unwrap();
    (creds(&user_jwt, &seed), seed)
}

/// A `.creds` file as nsc writes it.
pub fn creds(user_jwt: &str, seed: &str) -> String {
    format!(
        "-----BEGIN NATS USER JWT-----\n{user_jwt}\n------END NATS USER JWT------\n\n\
         ************************* IMPORTANT *************************\n\
         NKEY Seed printed below can be used to sign and prove identity.\n\
         NKEYs are sensitive and should be treated as secrets.\n\n\
         -----BEGIN USER NKEY SEED-----\n{seed}\n------END USER NKEY SEED------\n\n\
         *************************************************************\n"
    )
}
