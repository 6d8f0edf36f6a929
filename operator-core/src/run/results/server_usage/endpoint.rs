//! An endpoint target's servers: msgbench did not deploy them, so there are no pods to list;
//! their figures come from the monitoring URLs `endpoint.monitoring.urls` names, one per
//! server, each read at `<url>/varz`. Which URLs are read, and why there are no figures when
//! none can be: decided here.
use msgbench_crds::benchmark_run::Endpoint;
use msgbench_crds::endpoint::MONITORING_URL_PATTERN;
use msgbench_crds::workload::Protocol;
use regex::Regex;
use std::sync::LazyLock;

/// `serverUsage.source` of an endpoint's figures.
pub const SOURCE: &str = "nats /varz (endpoint monitoring)";

/// Why a NATS endpoint without `monitoring` has no figures, and what to set.
pub const NO_MONITORING: &str = "the target is an endpoint msgbench did not deploy: set \
     endpoint.monitoring.urls (each server's monitoring URL, e.g. \
     http://nats-0.nats-headless.<namespace>.svc:8222) for its version, CPU and memory";

/// One server to read: `name` (its row in `serverUsage.pods`: the URL's host and port) and
/// where to send `GET /varz`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Server {
    pub name: String,
    pub host: String,
    pub port: u16,
}

/// What sampling an endpoint target comes to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Plan {
    /// No figures can be had: why.
    Unavailable(String),
    /// Read these servers; `refused` are URLs the operator will not read (name, why), each
    /// reported as a failed read. Admission refuses them; an object stored before the rule,
    /// or under a CRD without it, is checked here again.
    Read {
        servers: Vec<Server>,
        refused: Vec<(String, String)>,
    },
}

/// Which of `ep`'s monitoring URLs are read.
pub fn plan(ep: &Endpoint) -> Plan {
    if !matches!(ep.protocol, Protocol::Nats | Protocol::Jetstream) {
        return Plan::Unavailable(format!(
            "the target is a {} endpoint msgbench did not deploy: its servers' figures are \
             read only from NATS servers (endpoint.monitoring, protocols nats and jetstream)",
            protocol_name(ep.protocol)
        ));
    }
    let Some(m) = ep.monitoring.as_ref().filter(|m| !m.urls.is_empty()) else {
        return Plan::Unavailable(NO_MONITORING.into());
    };
    let (mut servers, mut refused) = (Vec::new(), Vec::new());
    for url in &m.urls {
        let name = url.strip_prefix("http://").unwrap_or(url).to_string();
        match monitoring_addr(url) {
            Ok(a) if !servers.iter().any(|s: &Server| s.name == name) => servers.push(Server {
                name,
                host: a.host,
                port: a.port,
            }),
            Ok(_) => {} // listed twice: read once
            Err(why) => refused.push((name, format!("{url}: not read: {why}"))),
        }
    }
    Plan::Read { servers, refused }
}

/// Where a monitoring URL points: its host and port (80 when the URL names none).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MonitoringAddr {
    pub host: String,
    pub port: u16,
}

/// The admission rule's own pattern: the operator's check is the same one, not a copy.
static MONITORING_URL: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(MONITORING_URL_PATTERN).expect("the admission pattern compiles"));

/// The host and port of a monitoring URL, or which rule it breaks: admission's check
/// ([`MONITORING_URL_PATTERN`], plus the port's range, which RE2 cannot count), repeated
/// before every read for objects stored before the rule existed, or admitted without it.
pub fn monitoring_addr(url: &str) -> Result<MonitoringAddr, &'static str> {
    if url.starts_with("https://") {
        return Err("https:// is not supported (plain http:// only)");
    }
    if !MONITORING_URL.is_match(url) {
        return Err(
            "not http://<pod or Service>.<namespace>.svc[.cluster.local][:port] \
                    without a path",
        );
    }
    let rest = &url["http://".len()..];
    let (host, port) = match rest.split_once(':') {
        // The pattern allows 1-5 digits, no leading zero.
        Some((h, p)) => (h, p.parse::<u32>().expect("digits, by the pattern")),
        None => (rest, 80),
    };
    let port = u16::try_from(port).map_err(|_| "port over 65535")?;
    Ok(MonitoringAddr {
        host: host.to_string(),
        port,
    })
}

fn protocol_name(p: Protocol) -> String {
    serde_json::to_value(p)
        .ok()
        .and_then(|v| v.as_str().map(String::from))
        .unwrap_or_else(|| format!("{p:?}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The operator's check and the admission rule agree, URL by URL (the port's range is the
    /// operator's alone: RE2 cannot count).
    #[test]
    fn the_operator_checks_monitoring_urls_as_admission_does() {
        let rule = Regex::new(MONITORING_URL_PATTERN).unwrap();
        let cases = [
            (
                "http://nats-0.nats-headless.team.svc:8222",
                Some(("nats-0.nats-headless.team.svc", 8222)),
            ),
            (
                "http://nats.team.svc.cluster.local:8222",
                Some(("nats.team.svc.cluster.local", 8222)),
            ),
            ("http://nats.team.svc", Some(("nats.team.svc", 80))),
            ("http://nats.svc:8222", None),
            ("http://nats.team.svc:8222/", None),
            ("http://nats.team.svc:8222/varz", None),
            ("http://nats.team.svc:8222?x=1", None),
            ("http://user@nats.team.svc:8222", None),
            ("http://10.0.0.7:8222", None),
            ("http://metadata.google.internal", None),
            ("http://nats.team.svc.evil.com", None),
            ("http://Nats.team.svc", None),
            ("http://-nats.team.svc", None),
            ("http://nats..team.svc", None),
            ("http://nats.team.svc:", None),
            ("http://nats.team.svc:0", None),
            ("http://nats.team.svc:08222", None),
            ("nats://nats.team.svc:8222", None),
            ("https://nats.team.svc:8222", None),
        ];
        for (url, want) in cases {
            let got = monitoring_addr(url).ok();
            let want = want.map(|(host, port)| MonitoringAddr {
                host: host.into(),
                port,
            });
            assert_eq!(got, want, "{url}");
            assert_eq!(
                rule.is_match(url),
                want.is_some(),
                "{url}: the rule disagrees"
            );
        }
        // Beyond the rule: a port past 65535 is refused by the operator.
        assert!(rule.is_match("http://nats.team.svc:70000"));
        assert_eq!(
            monitoring_addr("http://nats.team.svc:70000"),
            Err("port over 65535")
        );
        assert!(monitoring_addr("https://nats.team.svc")
            .unwrap_err()
            .contains("https"));
    }
    use msgbench_crds::benchmark_run::EndpointMonitoring;

    fn nats(urls: Option<&[&str]>) -> Endpoint {
        Endpoint {
            protocol: Protocol::Jetstream,
            url: "nats://nats.team.svc:4222".into(),
            auth: None,
            tls: None,
            monitoring: urls.map(|u| EndpointMonitoring {
                urls: u.iter().map(|s| s.to_string()).collect(),
            }),
        }
    }

    #[test]
    fn without_monitoring_the_figures_are_unavailable_saying_what_to_set() {
        let Plan::Unavailable(why) = plan(&nats(None)) else {
            panic!("no monitoring: unavailable")
        };
        assert!(why.contains("endpoint.monitoring.urls"), "{why}");
        assert!(why.contains("http://nats-0.nats-headless."), "{why}");
        let mut mqtt = nats(None);
        mqtt.protocol = Protocol::Mqtt;
        let Plan::Unavailable(why) = plan(&mqtt) else {
            panic!("mqtt: unavailable")
        };
        assert!(why.contains("a mqtt endpoint"), "{why}");
        assert!(why.contains("nats and jetstream"), "{why}");
    }

    #[test]
    fn each_url_is_one_server_named_by_host_and_port() {
        let urls = [
            "http://nats-0.nats-headless.team.svc:8222",
            "http://nats-1.nats-headless.team.svc.cluster.local:8222",
            "http://nats.team.svc",
            "http://nats.team.svc",
        ];
        let Plan::Read { servers, refused } = plan(&nats(Some(&urls))) else {
            panic!("read")
        };
        assert!(refused.is_empty(), "{refused:?}");
        let got: Vec<(&str, &str, u16)> = (servers.iter())
            .map(|s| (s.name.as_str(), s.host.as_str(), s.port))
            .collect();
        assert_eq!(
            got,
            [
                (
                    "nats-0.nats-headless.team.svc:8222",
                    "nats-0.nats-headless.team.svc",
                    8222
                ),
                (
                    "nats-1.nats-headless.team.svc.cluster.local:8222",
                    "nats-1.nats-headless.team.svc.cluster.local",
                    8222
                ),
                ("nats.team.svc", "nats.team.svc", 80),
            ]
        );
    }

    /// A URL admission would refuse (stored before the rule, or under an older CRD) is never
    /// fetched: it is reported as a failed read naming the URL and the rule.
    #[test]
    fn a_url_outside_the_cluster_is_never_read_and_says_why() {
        let urls = [
            "http://169.254.169.254/latest/meta-data",
            "https://nats.team.svc:8222",
            "http://nats-0.nats-headless.team.svc:8222",
        ];
        let Plan::Read { servers, refused } = plan(&nats(Some(&urls))) else {
            panic!("read")
        };
        assert_eq!(servers.len(), 1);
        assert_eq!(servers[0].host, "nats-0.nats-headless.team.svc");
        assert_eq!(refused.len(), 2);
        assert!(
            refused[0]
                .1
                .starts_with("http://169.254.169.254/latest/meta-data: not read: not http://"),
            "{refused:?}"
        );
        assert!(
            refused[1].1.contains("https:// is not supported"),
            "{refused:?}"
        );
    }
}
