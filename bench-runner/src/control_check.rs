//! The operator's credential on a control request, for both of its listeners (the runner agent
//! and the fault agent): 401 without one, 403 for one signed by another key, for another scope,
//! or expired.
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use runner_api::control_auth::ControlVerifier;

/// The refusal for a request whose `Authorization: Bearer` credential `auth` does not accept;
/// `None` when it does. `scope` names what the credential must be for, in the 401's words.
pub fn refusal(auth: &ControlVerifier, headers: &HeaderMap, scope: &str) -> Option<Response> {
    let presented = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "));
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    match presented.map(|p| auth.check(p, now)) {
        Some(Ok(())) => None,
        Some(Err(e)) => {
            tracing::warn!(error = %e, "control request refused");
            Some((StatusCode::FORBIDDEN, format!("{e}\n")).into_response())
        }
        None => {
            tracing::warn!("control request without a credential refused");
            let why = format!("this endpoint needs the operator's credential for {scope}\n");
            let challenge = [(header::WWW_AUTHENTICATE, "Bearer")];
            Some((StatusCode::UNAUTHORIZED, challenge, why).into_response())
        }
    }
}
