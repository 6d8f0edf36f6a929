//! Secure-by-default pod and container security contexts for every server pod.

use k8s_openapi::api::core::v1::{
    Capabilities, PodSecurityContext, SeccompProfile, SecurityContext, Sysctl,
};

/// Non-root, RuntimeDefault seccomp; `fs_group` makes mounted volumes writable for `uid`.
pub fn pod_security_context(uid: i64, sysctls: Vec<Sysctl>) -> PodSecurityContext {
    PodSecurityContext {
        run_as_non_root: Some(true),
        run_as_user: Some(uid),
        run_as_group: Some(uid),
        fs_group: Some(uid),
        seccomp_profile: Some(SeccompProfile {
            type_: "RuntimeDefault".into(),
            ..SeccompProfile::default()
        }),
        sysctls: (!sysctls.is_empty()).then_some(sysctls),
        ..PodSecurityContext::default()
    }
}

/// Read-only root fs, no privilege escalation, every capability dropped.
pub fn container_security_context() -> SecurityContext {
    SecurityContext {
        allow_privilege_escalation: Some(false),
        read_only_root_filesystem: Some(true),
        run_as_non_root: Some(true),
        capabilities: Some(Capabilities {
            drop: Some(vec!["ALL".into()]),
            add: None,
        }),
        seccomp_profile: Some(SeccompProfile {
            type_: "RuntimeDefault".into(),
            ..SeccompProfile::default()
        }),
        ..SecurityContext::default()
    }
}
