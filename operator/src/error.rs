//! Reconcile errors. Spec problems are NOT errors: they become status conditions (see `validate`),
//! so a bad spec never turns into a crash or hot requeue loop.

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("Kubernetes API call failed: {0}")]
    Kube(#[from] kube::Error),
    #[error("could not serialize a desired object: {0}")]
    Serialize(#[from] serde_json::Error),
    #[error("object {0} has no namespace (all msgbench kinds are namespaced)")]
    MissingNamespace(String),
    #[error("could not build children: {0}")]
    Build(String),
}

impl Error {
    /// Bounded label value for `msgbench_reconcile_errors_total{error=...}`.
    pub fn metric_label(&self) -> &'static str {
        match self {
            Error::Kube(kube::Error::Api(s)) if s.code == 409 => "conflict",
            Error::Kube(kube::Error::Api(s)) if s.code == 403 => "forbidden",
            Error::Kube(kube::Error::Api(s)) if s.code == 404 => "not_found",
            Error::Kube(kube::Error::Api(_)) => "api_error",
            Error::Kube(_) => "kube_client",
            Error::Serialize(_) => "serialize",
            Error::MissingNamespace(_) => "missing_namespace",
            Error::Build(_) => "build",
        }
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;
