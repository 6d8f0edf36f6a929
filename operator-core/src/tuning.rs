//! Tuning turned into pod fields: Guaranteed QoS for pinning, sysctls, thread counts.

use k8s_openapi::api::core::v1::{ResourceRequirements, Sysctl as PodSysctl};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use msgbench_crds::common::{ResourceAmounts, Resources, Tuning};
use std::collections::BTreeMap;

/// Container resources. With pinning, requests are set equal to limits for CPU and memory so the
/// pod is Guaranteed (the static CPU manager only pins Guaranteed pods with integer CPUs).
pub fn container_resources(res: &Resources, tuning: &Tuning) -> Option<ResourceRequirements> {
    let to_map = |a: Option<&ResourceAmounts>| {
        let a = a?;
        let mut m = BTreeMap::new();
        if let Some(c) = &a.cpu {
            m.insert("cpu".to_string(), c.clone());
        }
        if let Some(mem) = &a.memory {
            m.insert("memory".to_string(), mem.clone());
        }
        (!m.is_empty()).then_some(m)
    };
    let limits = to_map(res.limits.as_ref());
    let requests = if tuning.cpu_pinning {
        limits.clone()
    } else {
        to_map(res.requests.as_ref())
    };
    if limits.is_none() && requests.is_none() {
        return None;
    }
    Some(ResourceRequirements {
        limits,
        requests,
        ..ResourceRequirements::default()
    })
}

pub fn pod_sysctls(tuning: &Tuning) -> Vec<PodSysctl> {
    tuning
        .sysctls
        .iter()
        .map(|s| PodSysctl {
            name: s.name.replace('/', "."),
            value: s.value.clone(),
        })
        .collect()
}

/// Server threads: explicit `tuning.threads`, else the CPU limit rounded up, else `None`
/// (the server decides; Go and tokio both read the cgroup quota nowadays, but we say it).
pub fn threads(tuning: &Tuning, res: &Resources) -> Option<u16> {
    if let Some(t) = tuning.threads {
        return Some(t);
    }
    let millis = cpu_millis(res.limits.as_ref()?.cpu.as_ref()?)?;
    Some(millis.div_ceil(1000).clamp(1, 256) as u16)
}

/// Parse a CPU quantity (`2`, `500m`, `1.5`) to millicores, rounded up; `None` if unparseable.
pub fn cpu_millis(q: &Quantity) -> Option<u64> {
    let n = crate::quantity::nanos(&q.0)?;
    u64::try_from(n).ok().map(|n| n.div_ceil(1_000_000))
}

/// Parse a memory/storage quantity (`512Mi`, `1G`, `1e9`, `1000`) to bytes; `None` if unparseable.
pub fn bytes(q: &Quantity) -> Option<u64> {
    let n = crate::quantity::nanos(&q.0)?;
    u64::try_from(n / 1_000_000_000).ok().filter(|_| n >= 0)
}

/// True when `q` is a whole number of CPUs (what the static CPU manager needs).
pub fn is_integer_cpu(q: &Quantity) -> bool {
    cpu_millis(q).is_some_and(|m| m > 0 && m % 1000 == 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn q(s: &str) -> Quantity {
        Quantity(s.into())
    }

    #[test]
    fn cpu_quantities_parse_to_millicores() {
        assert_eq!(cpu_millis(&q("2")), Some(2000));
        assert_eq!(cpu_millis(&q("500m")), Some(500));
        assert_eq!(cpu_millis(&q("1.5")), Some(1500));
        assert_eq!(cpu_millis(&q("abc")), None);
        assert!(is_integer_cpu(&q("1000m")));
        assert!(!is_integer_cpu(&q("1500m")));
        assert!(!is_integer_cpu(&q("0")));
    }

    #[test]
    fn memory_quantities_parse_to_bytes() {
        assert_eq!(bytes(&q("512Mi")), Some(512 * 1024 * 1024));
        assert_eq!(bytes(&q("1G")), Some(1_000_000_000));
        assert_eq!(bytes(&q("1e3")), Some(1000));
        assert_eq!(bytes(&q("2048")), Some(2048));
        assert_eq!(bytes(&q("x")), None);
    }

    #[test]
    fn threads_follow_the_cpu_limit_rounded_up() {
        let res = Resources {
            requests: None,
            limits: Some(ResourceAmounts {
                cpu: Some(q("1500m")),
                memory: None,
            }),
        };
        assert_eq!(threads(&Tuning::default(), &res), Some(2));
        let explicit = Tuning {
            threads: Some(7),
            ..Tuning::default()
        };
        assert_eq!(threads(&explicit, &res), Some(7));
        assert_eq!(threads(&Tuning::default(), &Resources::default()), None);
    }

    #[test]
    fn pinning_copies_limits_into_requests() {
        let res = Resources {
            requests: Some(ResourceAmounts {
                cpu: Some(q("100m")),
                memory: None,
            }),
            limits: Some(ResourceAmounts {
                cpu: Some(q("1")),
                memory: Some(q("256Mi")),
            }),
        };
        let pinned = Tuning {
            cpu_pinning: true,
            ..Tuning::default()
        };
        let r = container_resources(&res, &pinned).unwrap();
        assert_eq!(r.requests, r.limits);
        let r = container_resources(&res, &Tuning::default()).unwrap();
        assert_eq!(r.requests.unwrap().get("cpu"), Some(&q("100m")));
    }
}
