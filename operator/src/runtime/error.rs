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
    /// The namespace is being deleted: the API refuses new objects and everything in it goes
    /// away anyway, so this is not worth an error or a retry.
    pub fn is_namespace_terminating(&self) -> bool {
        match self {
            Error::Kube(kube::Error::Api(s)) => {
                s.code == 403
                    && (s.details.as_ref().is_some_and(|d| {
                        d.causes.iter().any(|c| c.reason == "NamespaceTerminating")
                    }) || s.message.contains("because it is being terminated"))
            }
            _ => false,
        }
    }

    /// Bounded label value for `msgbench_reconcile_errors_total{error=...}`.
    pub fn metric_label(&self) -> &'static str {
        if self.is_namespace_terminating() {
            return "namespace_terminating";
        }
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

#[cfg(test)]
mod tests {
    use super::*;

    fn api_error(json: serde_json::Value) -> Error {
        Error::Kube(kube::Error::Api(Box::new(
            serde_json::from_value(json).unwrap(),
        )))
    }

    #[test]
    fn namespace_termination_is_recognised_and_labelled() {
        let e = api_error(serde_json::json!({
            "status": "Failure", "code": 403, "reason": "Forbidden",
            "message": "services \"x\" is forbidden: unable to create new content in namespace n because it is being terminated",
            "details": {"name": "x", "kind": "services",
                        "causes": [{"reason": "NamespaceTerminating", "message": "namespace n is being terminated", "field": "metadata.namespace"}]}
        }));
        assert!(e.is_namespace_terminating());
        assert_eq!(e.metric_label(), "namespace_terminating");
        let rbac = api_error(serde_json::json!({
            "status": "Failure", "code": 403, "reason": "Forbidden",
            "message": "services is forbidden: User \"x\" cannot create resource"
        }));
        assert!(!rbac.is_namespace_terminating());
        assert_eq!(rbac.metric_label(), "forbidden");
    }
}
