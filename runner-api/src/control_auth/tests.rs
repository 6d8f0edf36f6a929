use super::*;

const NOW: u64 = 1_800_000_000;
const PROGRESS: Claim<'static> = Claim {
    scope: "uid-a",
    method: "GET",
    path: "/progress",
};

fn pair(seed: u8) -> (ControlSigner, ControlVerifier) {
    let s = ControlSigner::from_seed([seed; 32]);
    let v = ControlVerifier::new(&s.public_keys(), "uid-a").unwrap();
    (s, v)
}

/// A distinct nonce per call, as the operator's random ones are.
fn nonce(n: u32) -> [u8; NONCE_BYTES] {
    let mut b = [0; NONCE_BYTES];
    b[..4].copy_from_slice(&n.to_be_bytes());
    b
}

fn sign(s: &ControlSigner, claim: &Claim<'_>, at: u64, n: u32) -> String {
    s.credential(claim, at, nonce(n))
}

#[test]
fn a_fresh_credential_for_the_request_is_accepted_once() {
    let (s, v) = pair(7);
    let c = sign(&s, &PROGRESS, NOW, 1);
    assert_eq!(v.check(&c, "GET", "/progress", NOW), Ok(()));
    // The same credential again, even a second later, is a replay.
    assert_eq!(
        v.check(&c, "GET", "/progress", NOW + 1),
        Err(CredentialError::Replayed)
    );
    // A clone of the verifier (another handler's copy) shares what it has seen.
    assert_eq!(
        v.clone().check(&c, "GET", "/progress", NOW + 2),
        Err(CredentialError::Replayed)
    );
    // The node clocks may differ by up to the skew either way.
    let skewed = sign(&s, &PROGRESS, NOW, 2);
    assert_eq!(
        v.check(&skewed, "GET", "/progress", NOW - CLOCK_SKEW_SECS),
        Ok(())
    );
}

#[test]
fn a_credential_is_refused_for_another_method_or_path_or_query() {
    let (s, v) = pair(7);
    let c = sign(&s, &PROGRESS, NOW, 1);
    let other = |m, p| v.check(&c, m, p, NOW).unwrap_err();
    let signed_for = CredentialError::OtherRequest("GET /progress".into());
    assert_eq!(other("GET", "/results"), signed_for);
    assert_eq!(other("POST", "/progress"), signed_for);
    assert_eq!(other("GET", "/progress?x=1"), signed_for);
    assert!(signed_for.to_string().contains("GET /progress"));
    // Refused for the wrong request, it was not used up: the right one still passes.
    assert_eq!(v.check(&c, "GET", "/progress", NOW), Ok(()));
}

#[test]
fn another_key_another_scope_or_a_stale_credential_is_refused() {
    let (s, v) = pair(7);
    let (other, _) = pair(8);
    let bad = |c: &str, now| v.check(c, "GET", "/progress", now).unwrap_err();
    assert_eq!(
        bad(&sign(&other, &PROGRESS, NOW, 1), NOW),
        CredentialError::BadSignature
    );
    let for_b = Claim {
        scope: "uid-b",
        ..PROGRESS
    };
    assert_eq!(
        bad(&sign(&s, &for_b, NOW, 2), NOW),
        CredentialError::OtherScope
    );
    // Expired: 30 s of validity and 30 s of skew, then no more.
    let late = NOW + CREDENTIAL_TTL_SECS + CLOCK_SKEW_SECS + 1;
    assert_eq!(
        bad(&sign(&s, &PROGRESS, NOW, 3), late),
        CredentialError::OutOfTime
    );
    assert_eq!(
        bad(&sign(&s, &PROGRESS, NOW + 1000, 4), NOW),
        CredentialError::OutOfTime
    );
    assert_eq!(bad("token", NOW), CredentialError::Malformed);
    assert_eq!(bad(&"x".repeat(5000), NOW), CredentialError::Malformed);
}

/// A credential of the old format (bearer, replayable, for any path) says why it is refused.
#[test]
fn a_version_1_credential_is_refused_naming_its_format() {
    let (_, v) = pair(7);
    let key = SigningKey::from_bytes(&[7; 32]);
    let claim = format!("uid-a\n{}", NOW + 300);
    let old = format!(
        "msgbench1.{}.{}",
        B64.encode(&claim),
        B64.encode(key.sign(claim.as_bytes()).to_bytes())
    );
    let e = v.check(&old, "GET", "/progress", NOW).unwrap_err();
    assert_eq!(e, CredentialError::OldFormat("msgbench1"));
    assert!(e.to_string().contains("no longer accepted"), "{e}");
}

/// Changing the claim (another path, a later expiry) breaks the signature.
#[test]
fn an_edited_claim_does_not_verify() {
    let (s, v) = pair(7);
    let c = sign(&s, &PROGRESS, NOW, 1);
    let sig = c.rsplit('.').next().unwrap();
    for edited in [
        Claim {
            path: "/results",
            ..PROGRESS
        }
        .signed_bytes(NOW + 30, &nonce(1)),
        PROGRESS.signed_bytes(NOW + 100_000, &nonce(1)),
    ] {
        let forged = format!("{PREFIX}{}.{sig}", B64.encode(edited));
        let e = v.check(&forged, "GET", "/results", NOW).unwrap_err();
        assert_eq!(e, CredentialError::BadSignature);
    }
}

/// Keys rotate with an overlap: pods given (current, previous) accept a credential signed by
/// the previous key alone (an operator replica that has not reloaded); pods made after the
/// overlap, given the current key only, refuse it. The operator signs with both keys while it
/// holds both, so pods made before the rotation (previous key only) accept its credentials.
#[test]
fn the_previous_key_is_accepted_during_the_overlap_and_refused_after() {
    let old = ControlSigner::from_seed([1; 32]);
    let rotated = ControlSigner::from_seed([2; 32]).with_previous([1; 32]);
    let after = ControlSigner::from_seed([2; 32]);
    assert_eq!(rotated.public_keys().split(',').count(), 2);
    assert!(rotated.public_keys().starts_with(&after.public_key()));

    let during = ControlVerifier::new(&rotated.public_keys(), "uid-a").unwrap();
    assert_eq!(
        during.check(&sign(&old, &PROGRESS, NOW, 1), "GET", "/progress", NOW),
        Ok(())
    );
    let later = ControlVerifier::new(&after.public_keys(), "uid-a").unwrap();
    assert_eq!(
        later.check(&sign(&old, &PROGRESS, NOW, 2), "GET", "/progress", NOW),
        Err(CredentialError::BadSignature)
    );
    // A pod made before the rotation knows only the old key, and accepts the rotated
    // operator's credentials (its second signature).
    let before = ControlVerifier::new(&old.public_keys(), "uid-a").unwrap();
    assert_eq!(
        before.check(&sign(&rotated, &PROGRESS, NOW, 3), "GET", "/progress", NOW),
        Ok(())
    );
    assert_eq!(
        later.check(&sign(&rotated, &PROGRESS, NOW, 4), "GET", "/progress", NOW),
        Ok(())
    );
}

/// The replay cache holds each nonce only while its credential could be accepted, and never
/// more than REPLAY_CACHE_MAX of them: when full of live ones it refuses instead of growing.
#[test]
fn the_replay_cache_is_bounded_and_forgets_expired_nonces() {
    let mut cache = ReplayCache::default();
    let keep = NOW + CREDENTIAL_TTL_SECS + CLOCK_SKEW_SECS;
    for n in 0..REPLAY_CACHE_MAX as u32 {
        assert_eq!(cache.admit(nonce(n), keep, NOW), Ok(()));
    }
    let one_more = nonce(REPLAY_CACHE_MAX as u32);
    assert_eq!(cache.admit(one_more, keep, NOW), Err(CredentialError::Busy));
    assert_eq!(
        cache.admit(nonce(0), keep, NOW),
        Err(CredentialError::Replayed)
    );
    assert_eq!(cache.until.len(), REPLAY_CACHE_MAX);
    // Once those credentials are past accepting, their nonces make room.
    assert_eq!(cache.admit(one_more, keep + 60, keep + 1), Ok(()));
    assert_eq!(cache.until.len(), 1);

    // Through the verifier: a verified credential's nonce is held until it expires.
    let (s, v) = pair(7);
    let c = sign(&s, &PROGRESS, NOW, 1);
    assert_eq!(v.check(&c, "GET", "/progress", NOW), Ok(()));
    assert_eq!(v.remembered(), 1);
    // A credential refused before its nonce is admitted (bad signature) takes no room.
    let (other, _) = pair(8);
    let forged = sign(&other, &PROGRESS, NOW, 2);
    assert!(v.check(&forged, "GET", "/progress", NOW).is_err());
    assert_eq!(v.remembered(), 1);
}

#[test]
fn a_bad_public_key_or_scope_names_the_variable() {
    assert!(ControlVerifier::new("%%", "u")
        .unwrap_err()
        .contains(PUBLIC_KEY_ENV));
    assert!(ControlVerifier::new("AAAA", "u")
        .unwrap_err()
        .contains("32 bytes"));
    assert!(ControlVerifier::new(" ", "u")
        .unwrap_err()
        .contains(PUBLIC_KEY_ENV));
    let s = ControlSigner::from_seed([1; 32]);
    let three = [s.public_key(), s.public_key(), s.public_key()].join(",");
    assert!(ControlVerifier::new(&three, "u")
        .unwrap_err()
        .contains("at most 2"));
    assert!(ControlVerifier::new(&s.public_key(), " ")
        .unwrap_err()
        .contains(RUN_UID_ENV));
}

/// Debug output names public keys only, never a seed.
#[test]
fn a_signer_prints_no_seed() {
    let s = ControlSigner::from_seed([0xAB; 32]);
    let shown = format!("{s:?}");
    assert!(shown.contains(&s.public_key()));
    assert!(!shown.contains(&base64::engine::general_purpose::STANDARD.encode([0xAB; 32])));
    assert!(!shown.to_lowercase().contains("abab"));
}
