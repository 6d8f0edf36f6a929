//! Who may drive a runner: whoever holds the operator's Ed25519 signing key. The operator
//! signs a short-lived credential naming one run (its uid); a runner knows only the public key
//! (a pod environment variable, not a secret) and its own run's uid. So no per-run Secret
//! exists, and the operator needs to read no Secret outside its own namespace.
//!
//! Credential: `msgbench1.<base64url(run uid "\n" expiry unix seconds)>.<base64url(signature)>`,
//! presented as `Authorization: Bearer …`.
use base64::engine::general_purpose::URL_SAFE_NO_PAD as B64;
use base64::Engine;
use ed25519_dalek::{Signature, Signer, SigningKey, VerifyingKey};

/// Runner pod variable: the operator's public key, base64 (standard alphabet).
pub const PUBLIC_KEY_ENV: &str = "MSGBENCH_CONTROL_PUBLIC_KEY";
/// Runner pod variable: the uid of the run the runner belongs to.
pub const RUN_UID_ENV: &str = "MSGBENCH_RUN_UID";
/// Key of the 32-byte seed in the operator's key Secret.
pub const SEED_KEY: &str = "ed25519.seed";
/// How long a credential is valid after it was signed.
pub const CREDENTIAL_TTL_SECS: u64 = 300;
/// Clock difference tolerated between the operator's and a runner's node.
pub const CLOCK_SKEW_SECS: u64 = 60;
const PREFIX: &str = "msgbench1.";

/// The operator's side.
pub struct ControlSigner {
    key: SigningKey,
}

impl ControlSigner {
    pub fn from_seed(seed: [u8; 32]) -> Self {
        Self {
            key: SigningKey::from_bytes(&seed),
        }
    }

    /// The public key as runner pods get it (base64, standard alphabet).
    pub fn public_key(&self) -> String {
        base64::engine::general_purpose::STANDARD.encode(self.key.verifying_key().as_bytes())
    }

    /// A credential for `run_uid`, valid for [`CREDENTIAL_TTL_SECS`] from `now_unix`.
    pub fn credential(&self, run_uid: &str, now_unix: u64) -> String {
        let claim = format!("{run_uid}\n{}", now_unix + CREDENTIAL_TTL_SECS);
        let sig = self.key.sign(claim.as_bytes());
        format!(
            "{PREFIX}{}.{}",
            B64.encode(claim.as_bytes()),
            B64.encode(sig.to_bytes())
        )
    }
}

/// Why a runner refused a credential (said in its 403 answer; nothing secret in it).
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum CredentialError {
    #[error("not a msgbench credential")]
    Malformed,
    #[error("signature does not verify with this runner's operator key")]
    BadSignature,
    #[error("credential is for another run")]
    OtherRun,
    #[error("credential expired or not yet valid (check the nodes' clocks)")]
    OutOfTime,
}

/// The runner's side.
#[derive(Clone, Debug)]
pub struct ControlVerifier {
    key: VerifyingKey,
    run_uid: String,
}

impl ControlVerifier {
    /// From the pod's variables' values; an error says which one is wrong.
    pub fn new(public_key_b64: &str, run_uid: &str) -> Result<Self, String> {
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(public_key_b64.trim())
            .map_err(|e| format!("{PUBLIC_KEY_ENV}: not base64: {e}"))?;
        let arr: [u8; 32] = bytes
            .try_into()
            .map_err(|_| format!("{PUBLIC_KEY_ENV}: an Ed25519 public key is 32 bytes"))?;
        let key = VerifyingKey::from_bytes(&arr)
            .map_err(|e| format!("{PUBLIC_KEY_ENV}: not an Ed25519 public key: {e}"))?;
        if run_uid.trim().is_empty() {
            return Err(format!(
                "{RUN_UID_ENV} (or the fault agent's scope) is empty"
            ));
        }
        Ok(Self {
            key,
            run_uid: run_uid.trim().into(),
        })
    }

    pub fn check(&self, credential: &str, now_unix: u64) -> Result<(), CredentialError> {
        let rest = credential
            .strip_prefix(PREFIX)
            .ok_or(CredentialError::Malformed)?;
        let (claim_b64, sig_b64) = rest.split_once('.').ok_or(CredentialError::Malformed)?;
        let claim = B64
            .decode(claim_b64)
            .map_err(|_| CredentialError::Malformed)?;
        let sig: [u8; 64] = B64
            .decode(sig_b64)
            .ok()
            .and_then(|s| s.try_into().ok())
            .ok_or(CredentialError::Malformed)?;
        self.key
            .verify_strict(&claim, &Signature::from_bytes(&sig))
            .map_err(|_| CredentialError::BadSignature)?;
        // Only a signed claim is parsed.
        let claim = String::from_utf8(claim).map_err(|_| CredentialError::Malformed)?;
        let (run, expiry) = claim.split_once('\n').ok_or(CredentialError::Malformed)?;
        let expiry: u64 = expiry.parse().map_err(|_| CredentialError::Malformed)?;
        if run != self.run_uid {
            return Err(CredentialError::OtherRun);
        }
        let too_old = now_unix > expiry.saturating_add(CLOCK_SKEW_SECS);
        let too_new = expiry > now_unix + CREDENTIAL_TTL_SECS + CLOCK_SKEW_SECS;
        match too_old || too_new {
            true => Err(CredentialError::OutOfTime),
            false => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: u64 = 1_800_000_000;

    fn pair(seed: u8) -> (ControlSigner, ControlVerifier) {
        let s = ControlSigner::from_seed([seed; 32]);
        let v = ControlVerifier::new(&s.public_key(), "uid-a").unwrap();
        (s, v)
    }

    #[test]
    fn a_fresh_credential_for_the_run_is_accepted() {
        let (s, v) = pair(7);
        assert_eq!(v.check(&s.credential("uid-a", NOW), NOW), Ok(()));
        // The node clocks may differ by up to the skew either way.
        assert_eq!(v.check(&s.credential("uid-a", NOW), NOW - 50), Ok(()));
    }

    #[test]
    fn another_key_another_run_or_a_stale_credential_is_refused() {
        let (s, v) = pair(7);
        let (other, _) = pair(8);
        let bad = |c: &str, now| v.check(c, now).unwrap_err();
        assert_eq!(
            bad(&other.credential("uid-a", NOW), NOW),
            CredentialError::BadSignature
        );
        assert_eq!(
            bad(&s.credential("uid-b", NOW), NOW),
            CredentialError::OtherRun
        );
        let late = NOW + CREDENTIAL_TTL_SECS + CLOCK_SKEW_SECS + 1;
        assert_eq!(
            bad(&s.credential("uid-a", NOW), late),
            CredentialError::OutOfTime
        );
        assert_eq!(
            bad(&s.credential("uid-a", NOW + 1000), NOW),
            CredentialError::OutOfTime
        );
        assert_eq!(bad("token", NOW), CredentialError::Malformed);
    }

    /// Changing the claim (another run, a later expiry) breaks the signature.
    #[test]
    fn an_edited_claim_does_not_verify() {
        let (s, v) = pair(7);
        let c = s.credential("uid-a", NOW);
        let sig = c.rsplit('.').next().unwrap();
        let forged = format!(
            "{PREFIX}{}.{sig}",
            B64.encode(format!("uid-a\n{}", NOW + 100_000))
        );
        assert_eq!(v.check(&forged, NOW), Err(CredentialError::BadSignature));
    }

    #[test]
    fn a_bad_public_key_or_uid_names_the_variable() {
        assert!(ControlVerifier::new("%%", "u")
            .unwrap_err()
            .contains(PUBLIC_KEY_ENV));
        assert!(ControlVerifier::new("AAAA", "u")
            .unwrap_err()
            .contains("32 bytes"));
        let s = ControlSigner::from_seed([1; 32]);
        assert!(ControlVerifier::new(&s.public_key(), " ")
            .unwrap_err()
            .contains(RUN_UID_ENV));
    }
}
