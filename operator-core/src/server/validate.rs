//! Spec checks the operator repeats or adds to admission. Pure. Violations become a Degraded
//! condition, never an error loop.

use crate::tuning::is_integer_cpu;
use msgbench_crds::common::{is_safe_sysctl, sysctl_problem, Resources, Tuning};
use std::fmt;

/// A spec rule the object breaks, as the operator reports it. Not
/// `msgbench_crds::workload::Violation` (a rule a run's workload breaks).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SpecViolation {
    /// Condition reason, e.g. `InvalidSpec`.
    pub reason: &'static str,
    /// JSON path below the object, e.g. `spec.resources.limits.cpu`.
    pub field: String,
    pub rule: String,
}

impl fmt::Display for SpecViolation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.field, self.rule)
    }
}

impl SpecViolation {
    pub fn invalid(field: impl Into<String>, rule: impl Into<String>) -> Self {
        Self {
            reason: msgbench_crds::conditions::INVALID_SPEC,
            field: field.into(),
            rule: rule.into(),
        }
    }
}

/// Checks shared by every server kind: pinning needs integer CPUs with a memory limit, sysctls
/// follow the name and value rules and unsafe ones need the opt-in (the CRD's CEL says the
/// same; this guards CRDs installed without it and objects stored before the rules).
pub fn check_tuning(tuning: &Tuning, res: &Resources) -> Vec<SpecViolation> {
    let mut v = Vec::new();
    let limits = res.limits.as_ref();
    if tuning.cpu_pinning {
        match limits.and_then(|l| l.cpu.as_ref()) {
            Some(cpu) if is_integer_cpu(cpu) => {}
            Some(cpu) => v.push(SpecViolation::invalid(
                "spec.resources.limits.cpu",
                format!(
                    "tuning.cpuPinning needs an integer CPU limit, got {:?}",
                    cpu.0
                ),
            )),
            None => v.push(SpecViolation::invalid(
                "spec.resources.limits.cpu",
                "tuning.cpuPinning needs an integer CPU limit",
            )),
        }
        if limits.and_then(|l| l.memory.as_ref()).is_none() {
            v.push(SpecViolation::invalid(
                "spec.resources.limits.memory",
                "tuning.cpuPinning needs a memory limit (Guaranteed QoS)",
            ));
        }
    }
    for (i, s) in tuning.sysctls.iter().enumerate() {
        if let Some((field, rule)) = sysctl_problem(s) {
            v.push(SpecViolation::invalid(
                format!("spec.tuning.sysctls[{i}].{field}"),
                rule,
            ));
        }
    }
    if !tuning.allow_unsafe_sysctls {
        for s in tuning.sysctls.iter().filter(|s| !is_safe_sysctl(&s.name)) {
            v.push(SpecViolation::invalid(
                "spec.tuning.sysctls",
                format!(
                    "{} is outside the kubelet safe set; set tuning.allowUnsafeSysctls: true \
                     (and allow-list it on the kubelet)",
                    s.name
                ),
            ));
        }
    }
    let mut names: Vec<String> = tuning
        .sysctls
        .iter()
        .map(|s| s.name.replace('/', "."))
        .collect();
    names.sort();
    if names.windows(2).any(|w| w[0] == w[1]) {
        v.push(SpecViolation::invalid(
            "spec.tuning.sysctls",
            "sysctl names must be unique",
        ));
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;
    use msgbench_crds::common::{Quantity, ResourceAmounts, Sysctl};

    fn limits(cpu: &str, mem: Option<&str>) -> Resources {
        Resources {
            requests: None,
            limits: Some(ResourceAmounts {
                cpu: Some(Quantity(cpu.into())),
                memory: mem.map(|m| Quantity(m.into())),
            }),
        }
    }

    #[test]
    fn pinning_rejects_fractional_cpu_and_missing_memory() {
        let t = Tuning {
            cpu_pinning: true,
            ..Tuning::default()
        };
        let v = check_tuning(&t, &limits("1500m", None));
        assert_eq!(v.len(), 2, "{v:?}");
        assert_eq!(v[0].field, "spec.resources.limits.cpu");
        assert!(v[0].rule.contains("1500m"));
        assert_eq!(v[1].field, "spec.resources.limits.memory");
        assert!(check_tuning(&t, &limits("2", Some("1Gi"))).is_empty());
    }

    #[test]
    fn unsafe_sysctl_needs_opt_in() {
        let mut t = Tuning {
            sysctls: vec![
                Sysctl {
                    name: "net.core.somaxconn".into(),
                    value: "4096".into(),
                },
                Sysctl {
                    name: "net.ipv4.tcp_fin_timeout".into(),
                    value: "15".into(),
                },
            ],
            ..Tuning::default()
        };
        let v = check_tuning(&t, &Resources::default());
        assert_eq!(v.len(), 1);
        assert!(v[0].rule.contains("net.core.somaxconn"));
        t.allow_unsafe_sysctls = true;
        assert!(check_tuning(&t, &Resources::default()).is_empty());
    }

    #[test]
    fn a_sysctl_value_with_a_newline_is_a_violation_naming_the_field() {
        // Stored before admission had the rule: the operator must not start the server with it.
        let t = Tuning {
            sysctls: vec![Sysctl {
                name: "net.ipv4.tcp_fin_timeout".into(),
                value: "15\nkernel.panic=1".into(),
            }],
            ..Tuning::default()
        };
        let v = check_tuning(&t, &Resources::default());
        assert_eq!(v.len(), 1, "{v:?}");
        assert_eq!(v[0].field, "spec.tuning.sysctls[0].value");
        assert!(v[0].rule.contains("printable ASCII"), "{}", v[0].rule);
    }

    #[test]
    fn duplicate_sysctls_are_rejected() {
        let s = Sysctl {
            name: "net.ipv4.tcp_fin_timeout".into(),
            value: "15".into(),
        };
        let t = Tuning {
            sysctls: vec![s.clone(), s],
            ..Tuning::default()
        };
        assert!(check_tuning(&t, &Resources::default())
            .iter()
            .any(|v| v.rule.contains("unique")));
    }
}
