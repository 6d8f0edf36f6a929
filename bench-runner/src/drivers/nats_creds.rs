//! A NATS `.creds` file (decentralized auth): the user's JWT, sent in CONNECT, and its NKey
//! seed, which signs the server's nonce. One parser for both NATS clients (the wire path and
//! async-nats, given the JWT and a signing callback), so they accept the same files. Errors
//! say what is missing, never quote the file.
use nkeys::KeyPair;
use std::sync::Arc;

pub struct UserCreds {
    pub jwt: String,
    pub key: Arc<KeyPair>,
}

/// The blocks of a creds file, in order: the text between a `-----BEGIN …-----` line and the
/// next dashed line. The first is the JWT, the second the seed (as nsc writes them, and as
/// the NATS clients read them: by position, not by title).
fn blocks(text: &str) -> Vec<&str> {
    let dashed = |l: &str| l.starts_with("---") && l.ends_with("---");
    let mut out = Vec::new();
    let mut lines = text.lines().map(str::trim);
    while let Some(l) = lines.next() {
        if dashed(l) && l.contains("BEGIN") {
            if let Some(body) = lines.by_ref().find(|b| !b.is_empty()) {
                if !dashed(body) {
                    out.push(body);
                }
            }
        }
    }
    out
}

pub fn parse(text: &str) -> Result<UserCreds, String> {
    let b = blocks(text);
    let (Some(jwt), Some(seed)) = (b.first(), b.get(1)) else {
        return Err(
            "the credentials are not a NATS .creds file (a user JWT block, then an \
                    NKey seed block)"
                .into(),
        );
    };
    let base64url = |c: char| c.is_ascii_alphanumeric() || c == '-' || c == '_';
    let parts: Vec<&str> = jwt.split('.').collect();
    if parts.len() != 3
        || parts
            .iter()
            .any(|p| p.is_empty() || !p.chars().all(base64url))
    {
        return Err("the .creds file's first block is not a JWT".into());
    }
    let key = KeyPair::from_seed(seed)
        .map_err(|_| "the .creds file's second block is not a valid NKey seed".to_string())?;
    Ok(UserCreds {
        jwt: jwt.to_string(),
        key: Arc::new(key),
    })
}

/// The `sig` of a CONNECT: the nonce signed with `key`, base64url without padding.
pub fn sign_nonce(key: &KeyPair, nonce: &str) -> Result<String, String> {
    use base64::Engine;
    let sig = key
        .sign(nonce.as_bytes())
        .map_err(|_| "signing the server's nonce failed".to_string())?;
    Ok(base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(sig))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn creds(jwt: &str, seed: &str) -> String {
        format!(
            "-----BEGIN NATS USER JWT-----\n{jwt}\n------END NATS USER JWT------\n\n\
             ************************* IMPORTANT *************************\n\
             NKEY Seed printed below can be used to sign and prove identity.\n\n\
             -----BEGIN USER NKEY SEED-----\n{seed}\n------END USER NKEY SEED------\n"
        )
    }

    #[test]
    fn a_creds_file_gives_its_jwt_and_key() {
        let user = KeyPair::new_user();
        let seed = user.seed().unwrap();
        let text = creds("eyJhIjoxfQ.eyJiIjoyfQ.c2ln", &seed);
        let c = parse(&text).unwrap();
        assert_eq!(c.jwt, "eyJhIjoxfQ.eyJiIjoyfQ.c2ln");
        assert_eq!(c.key.public_key(), user.public_key());
        // Without the last newline (a Secret's value as typed), and with CRLF.
        assert!(parse(text.trim_end()).is_ok());
        assert!(parse(&text.replace('\n', "\r\n")).is_ok());
        let sig = sign_nonce(&c.key, "nonce").unwrap();
        assert!(!sig.contains('=') && !sig.contains('+'), "{sig}");
    }

    #[test]
    fn broken_files_are_refused_without_quoting_them() {
        let seed = KeyPair::new_user().seed().unwrap();
        for bad in [
            String::new(),
            "just a token".to_string(),
            creds("not-a-jwt", &seed),
            creds("a.b.c", "SUNOTASEED"),
        ] {
            let e = parse(&bad).err().expect("refused");
            assert!(!e.contains("SUNOTASEED") && !e.contains(&seed), "{e}");
        }
    }
}
