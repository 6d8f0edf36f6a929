//! The operator's credential on a control request, for both of its listeners (the runner agent
//! and the fault agent): 401 without one; 403 for one signed by another key, for another scope,
//! for another method or path, expired, or already used; 503 when a flood of signed requests
//! filled the replay cache.
use axum::http::{header, HeaderMap, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use runner_api::control_auth::{ControlVerifier, CredentialError};

/// The request a credential must be for.
pub struct ControlRequest<'a> {
    pub method: &'a Method,
    pub uri: &'a Uri,
    pub headers: &'a HeaderMap,
}

/// The refusal for a request whose `Authorization: Bearer` credential `auth` does not accept;
/// `None` when it does (and the credential is then used up). `scope` names what the credential
/// must be for, in the 401's words.
pub fn refusal(auth: &ControlVerifier, req: ControlRequest<'_>, scope: &str) -> Option<Response> {
    let presented = (req.headers.get(header::AUTHORIZATION))
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "));
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let path = req.uri.path_and_query().map_or("/", |p| p.as_str());
    match presented.map(|p| auth.check(p, req.method.as_str(), path, now)) {
        Some(Ok(())) => None,
        Some(Err(e)) => {
            // The reason only: a credential is never logged.
            tracing::warn!(error = %e, method = %req.method, path, "control request refused");
            let code = match e {
                CredentialError::Busy => StatusCode::SERVICE_UNAVAILABLE,
                _ => StatusCode::FORBIDDEN,
            };
            Some((code, format!("{e}\n")).into_response())
        }
        None => {
            tracing::warn!(method = %req.method, path, "control request without a credential refused");
            let why = format!("this endpoint needs the operator's credential for {scope}\n");
            let challenge = [(header::WWW_AUTHENTICATE, "Bearer")];
            Some((StatusCode::UNAUTHORIZED, challenge, why).into_response())
        }
    }
}
