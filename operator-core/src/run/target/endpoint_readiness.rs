//! A Ready server is not yet a reachable one: its Service may list no ready endpoint for a
//! while (GitOps applies a server and a run together). Before any runner exists, the target
//! Service's EndpointSlices must show a ready endpoint on the port the run uses. Hosts that are
//! not a Service of this cluster are left to the runners' own connect retry, and so are
//! Services of other namespaces: the operator's reach is not the run author's, so what it could
//! read there must not end up in the run's status.
use k8s_openapi::api::core::v1::Service;
use k8s_openapi::api::discovery::v1::EndpointSlice;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use msgbench_crds::RunFailureReason;

/// The Service port a URL addresses, as its EndpointSlices list it.
#[derive(Clone, Debug, PartialEq)]
pub struct WantedPort {
    /// The port in the URL (the Service's port).
    pub service_port: i32,
    /// The Service port's name ("" when unnamed): EndpointSlice ports carry it.
    pub name: String,
    /// The target port number, when the Service gives it as a number (not a name).
    pub target: Option<i32>,
}

/// The (namespace, Service) a URL host names: `<svc>`, `<svc>.<ns>`, `<svc>.<ns>.svc` or
/// `<svc>.<ns>.svc.<cluster domain>`. `None` for IP addresses and other names.
pub fn service_of_host(host: &str, run_ns: &str) -> Option<(String, String)> {
    if host.parse::<std::net::IpAddr>().is_ok() {
        return None;
    }
    let labels: Vec<&str> = host.trim_end_matches('.').split('.').collect();
    let dns_label = |l: &&str| {
        !l.is_empty()
            && l.len() <= 63
            && l.bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
    };
    if !labels.iter().all(dns_label) {
        return None;
    }
    match labels.as_slice() {
        [svc] => Some((run_ns.to_string(), svc.to_string())),
        [svc, ns] => Some((ns.to_string(), svc.to_string())),
        [svc, ns, "svc", ..] => Some((ns.to_string(), svc.to_string())),
        _ => None,
    }
}

/// Which of `svc`'s ports carries `port`. `Ok(None)`: nothing to check (ExternalName, or a
/// Service without ports); `Err`: the Service has no such port.
pub fn service_port(svc: &Service, port: u16) -> std::result::Result<Option<WantedPort>, String> {
    let spec = svc.spec.clone().unwrap_or_default();
    let ports = spec.ports.unwrap_or_default();
    if spec.type_.as_deref() == Some("ExternalName") || ports.is_empty() {
        return Ok(None);
    }
    let p = ports
        .iter()
        .find(|p| p.port == i32::from(port))
        .ok_or_else(|| {
            let have: Vec<String> = ports.iter().map(|p| p.port.to_string()).collect();
            format!(
                "exposes no port {port} (ports: {})",
                if have.is_empty() {
                    "none".into()
                } else {
                    have.join(", ")
                }
            )
        })?;
    Ok(Some(WantedPort {
        service_port: p.port,
        name: p.name.clone().unwrap_or_default(),
        target: match &p.target_port {
            Some(IntOrString::Int(n)) => Some(*n),
            Some(IntOrString::String(_)) => None,
            None => Some(p.port),
        },
    }))
}

/// `Ok` when some slice lists a ready, non-terminating endpoint serving `want`; otherwise what
/// was seen instead.
pub fn evaluate(slices: &[EndpointSlice], want: &WantedPort) -> std::result::Result<(), String> {
    let serves = |s: &EndpointSlice| {
        s.ports.as_deref().unwrap_or_default().iter().any(|p| {
            p.name.as_deref().unwrap_or_default() == want.name
                && match (p.port, want.target) {
                    (Some(have), Some(target)) => have == target,
                    _ => true, // a nil port means all ports; a named target port has no number
                }
        })
    };
    let (mut endpoints, mut ready, mut terminating) = (0, 0, 0);
    for s in slices.iter().filter(|s| serves(s)) {
        for e in &s.endpoints {
            if e.addresses.is_empty() {
                continue;
            }
            endpoints += 1;
            let c = e.conditions.clone().unwrap_or_default();
            // Unset `ready` means ready (EndpointConditions); terminating never counts.
            if c.terminating == Some(true) {
                terminating += 1;
            } else if c.ready != Some(false) {
                ready += 1;
            }
        }
    }
    if ready > 0 {
        return Ok(());
    }
    let port = if want.name.is_empty() {
        want.service_port.to_string()
    } else {
        format!("{} ({})", want.service_port, want.name)
    };
    Err(match (slices.len(), endpoints) {
        (0, _) => format!("no EndpointSlice yet for port {port}"),
        (_, 0) => format!("no endpoint serves port {port}"),
        _ => format!(
            "no ready endpoint for port {port} ({endpoints} listed, {terminating} terminating)"
        ),
    })
}

/// What the run does while the endpoint is not programmed: the TargetReady reason and
/// message, and whether the wait is over (the run fails with TargetUnreachable).
#[derive(Debug, PartialEq)]
pub struct Waiting {
    pub reason: &'static str,
    pub message: String,
    pub failed: bool,
}

pub fn waiting(waited_s: i64, limit_s: i64, url: &str, why: &str) -> Waiting {
    if waited_s > limit_s {
        Waiting {
            reason: RunFailureReason::TargetUnreachable.as_str(),
            message: format!(
                "{url}: no ready endpoint within {limit_s}s (targetReadyTimeoutSeconds); last seen: {why}"
            ),
            failed: true,
        }
    } else {
        Waiting {
            reason: "EndpointsNotReady",
            message: why.to_string(),
            failed: false,
        }
    }
}

#[cfg(test)]
#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{ServicePort, ServiceSpec};
    use k8s_openapi::api::discovery::v1::{Endpoint, EndpointConditions, EndpointPort};

    fn endpoint(ready: Option<bool>, terminating: Option<bool>) -> Endpoint {
        Endpoint {
            addresses: vec!["10.0.0.7".into()],
            conditions: Some(EndpointConditions {
                ready,
                serving: ready,
                terminating,
            }),
            ..Endpoint::default()
        }
    }

    fn slice(port: (&str, Option<i32>), endpoints: Vec<Endpoint>) -> EndpointSlice {
        EndpointSlice {
            address_type: "IPv4".into(),
            endpoints,
            ports: Some(vec![EndpointPort {
                name: Some(port.0.into()),
                port: port.1,
                ..EndpointPort::default()
            }]),
            ..EndpointSlice::default()
        }
    }

    fn want(name: &str, target: Option<i32>) -> WantedPort {
        WantedPort {
            service_port: 4222,
            name: name.into(),
            target,
        }
    }

    #[test]
    fn a_ready_endpoint_on_the_port_is_programmed() {
        let s = slice(
            ("client", Some(4222)),
            vec![endpoint(Some(true), Some(false))],
        );
        assert_eq!(evaluate(&[s], &want("client", Some(4222))), Ok(()));
        // Unset `ready` counts as ready.
        let s = slice(("", Some(8080)), vec![endpoint(None, None)]);
        assert_eq!(evaluate(&[s], &want("", Some(8080))), Ok(()));
    }

    #[test]
    fn not_ready_and_terminating_endpoints_are_not() {
        let s = slice(
            ("client", Some(4222)),
            vec![
                endpoint(Some(false), None),
                endpoint(Some(false), Some(true)),
            ],
        );
        let e = evaluate(&[s], &want("client", Some(4222))).unwrap_err();
        assert_eq!(
            e,
            "no ready endpoint for port 4222 (client) (2 listed, 1 terminating)"
        );
        // Serving while terminating (publishNotReadyAddresses aside) still does not count.
        let s = slice(
            ("client", Some(4222)),
            vec![endpoint(Some(true), Some(true))],
        );
        assert!(evaluate(&[s], &want("client", Some(4222))).is_err());
    }

    #[test]
    fn the_port_must_match_by_name_and_number() {
        let s = slice(("monitor", Some(8222)), vec![endpoint(Some(true), None)]);
        assert_eq!(
            evaluate(&[s], &want("client", Some(4222))),
            Err("no endpoint serves port 4222 (client)".into())
        );
        let s = slice(("client", Some(9999)), vec![endpoint(Some(true), None)]);
        assert!(evaluate(&[s], &want("client", Some(4222))).is_err());
        // A named target port: the slice's resolved number is not known beforehand.
        let s = slice(("client", Some(14222)), vec![endpoint(Some(true), None)]);
        assert_eq!(evaluate(&[s], &want("client", None)), Ok(()));
    }

    #[test]
    fn no_slices_or_no_addresses_are_not_programmed() {
        assert_eq!(
            evaluate(&[], &want("", Some(8080))),
            Err("no EndpointSlice yet for port 4222".into())
        );
        let empty = slice(("", Some(8080)), vec![]);
        assert!(evaluate(&[empty], &want("", Some(8080))).is_err());
    }

    #[test]
    fn service_ports_map_the_url_port_to_name_and_target() {
        let svc = |ports: Vec<ServicePort>, type_: Option<&str>| Service {
            spec: Some(ServiceSpec {
                ports: Some(ports),
                type_: type_.map(String::from),
                ..ServiceSpec::default()
            }),
            ..Service::default()
        };
        let p = |name: Option<&str>, port, target: Option<IntOrString>| ServicePort {
            name: name.map(String::from),
            port,
            target_port: target,
            ..ServicePort::default()
        };
        let s = svc(
            vec![
                p(
                    Some("client"),
                    4222,
                    Some(IntOrString::String("client".into())),
                ),
                p(Some("monitor"), 8222, Some(IntOrString::Int(8222))),
            ],
            None,
        );
        assert_eq!(
            service_port(&s, 4222),
            Ok(Some(WantedPort {
                service_port: 4222,
                name: "client".into(),
                target: None
            }))
        );
        assert_eq!(service_port(&s, 8222).unwrap().unwrap().target, Some(8222));
        assert_eq!(
            service_port(&s, 1234),
            Err("exposes no port 1234 (ports: 4222, 8222)".into())
        );
        let unnamed = svc(vec![p(None, 80, Some(IntOrString::Int(8080)))], None);
        assert_eq!(
            service_port(&unnamed, 80).unwrap().unwrap(),
            WantedPort {
                service_port: 80,
                name: String::new(),
                target: Some(8080)
            }
        );
        assert_eq!(
            service_port(&svc(vec![], Some("ExternalName")), 80),
            Ok(None)
        );
    }

    #[test]
    fn service_hosts_name_namespace_and_service() {
        let f = |h| service_of_host(h, "run-ns");
        let pair = |ns: &str, s: &str| Some((ns.to_string(), s.to_string()));
        assert_eq!(f("pss"), pair("run-ns", "pss"));
        assert_eq!(f("pss.bench"), pair("bench", "pss"));
        assert_eq!(f("pss.bench.svc"), pair("bench", "pss"));
        assert_eq!(f("pss.bench.svc.cluster.local"), pair("bench", "pss"));
        assert_eq!(f("10.1.2.3"), None);
        assert_eq!(f("::1"), None);
        assert_eq!(f("broker.example.com"), None);
        assert_eq!(f("Upper.case"), None);
    }

    #[test]
    fn the_wait_ends_in_target_unreachable_after_the_limit() {
        let w = waiting(
            10,
            60,
            "ws://pss.ns.svc:8080/ws",
            "Service ns/pss port 8080: no EndpointSlice yet for port 8080",
        );
        assert_eq!(w.reason, "EndpointsNotReady");
        assert!(!w.failed);
        assert!(w.message.contains("Service ns/pss port 8080"));
        let w = waiting(61, 60, "ws://pss.ns.svc:8080/ws", "no ready endpoint");
        assert_eq!(w.reason, RunFailureReason::TargetUnreachable.as_str());
        assert!(w.failed);
        assert!(
            w.message
                .starts_with("ws://pss.ns.svc:8080/ws: no ready endpoint within 60s"),
            "{}",
            w.message
        );
        assert!(w.message.ends_with("last seen: no ready endpoint"));
    }
}
