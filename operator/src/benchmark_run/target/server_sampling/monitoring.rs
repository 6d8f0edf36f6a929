//! Reading the servers' own monitoring endpoints on their pod IPs: nats `/varz`,
//! pubsub-server `/health`, sockudo's Prometheus `/metrics` and mosquitto's `$SYS` topics, parsed
//! into one `Sample` per pod.
use super::mosquitto_sys;
use crate::access::pod_http::{self, ErrorKind, Options};
use crate::runtime::context::Context;
use k8s_openapi::api::core::v1::Pod;
use kube::api::ListParams;
use kube::{Api, ResourceExt};
use msgbench_crds::benchmark_run::ServerKind;
use msgbench_crds::workload::Protocol;
use msgbench_operator_core::run::results::server_usage::endpoint::Server;
use msgbench_operator_core::run::results::server_usage::{Cpu, Sample};
use msgbench_operator_core::run::runners::build::server_selector;
use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

/// One sample per pod and interval, so short; the bodies are a few kB of JSON.
const OPTIONS: Options<'static> = Options::new(Duration::from_secs(2), 1 << 20);

/// How a pod's figures are read.
#[derive(Clone, Copy, Debug)]
pub enum Reader {
    /// An HTTP GET of `path`, parsed.
    Http {
        path: &'static str,
        parse: fn(&[u8]) -> anyhow::Result<Sample>,
    },
    /// mosquitto's `$SYS` topics over MQTT.
    MosquittoSys,
}

impl Reader {
    /// What a person would look for when no pod answers.
    pub fn what(&self) -> &'static str {
        match self {
            Reader::Http { path, .. } => path,
            Reader::MosquittoSys => mosquitto_sys::HEAP_TOPIC,
        }
    }
}

/// Where a kind's figures come from: (source label, container port name, reader).
/// A PubSubServer serving `pusher` is sockudo (only it fits a pusher workload).
pub(super) fn endpoint(
    kind: ServerKind,
    protocol: Protocol,
) -> (&'static str, &'static str, Reader) {
    match kind {
        ServerKind::JetStreamCluster => (
            "nats /varz",
            "monitor",
            Reader::Http {
                path: "/varz",
                parse: parse_varz,
            },
        ),
        ServerKind::PubSubServer if protocol == Protocol::Pusher => (
            "sockudo /metrics",
            "metrics",
            Reader::Http {
                path: "/metrics",
                parse: parse_process_metrics,
            },
        ),
        ServerKind::PubSubServer => (
            "pubsub-server /health",
            "http",
            Reader::Http {
                path: "/health",
                parse: parse_pubsub_health,
            },
        ),
        ServerKind::MqttBroker => ("mosquitto $SYS heap", "mqtt", Reader::MosquittoSys),
    }
}

pub fn parse_varz(body: &[u8]) -> anyhow::Result<Sample> {
    #[derive(serde::Deserialize)]
    struct Varz {
        cpu: f64,
        mem: u64,
        connections: Option<u64>,
        version: Option<String>,
    }
    let v: Varz = serde_json::from_slice(body)?;
    Ok(Sample {
        cpu: Cpu::Cores(v.cpu / 100.0),
        rss_bytes: v.mem,
        connections: v.connections,
        version: v.version,
    })
}

pub fn parse_pubsub_health(body: &[u8]) -> anyhow::Result<Sample> {
    #[derive(serde::Deserialize)]
    struct Health {
        cpu_seconds: Option<f64>,
        rss_bytes: Option<u64>,
        clients: Option<u64>,
    }
    let h: Health = serde_json::from_slice(body)?;
    Ok(Sample {
        cpu: Cpu::Seconds(
            h.cpu_seconds
                .ok_or_else(|| anyhow::anyhow!("/health has no cpu_seconds"))?,
        ),
        rss_bytes: h
            .rss_bytes
            .ok_or_else(|| anyhow::anyhow!("/health has no rss_bytes"))?,
        connections: h.clients,
        version: None,
    })
}

/// The Prometheus process collector's CPU counter and RSS (Prometheus text format).
pub fn parse_process_metrics(body: &[u8]) -> anyhow::Result<Sample> {
    let text = std::str::from_utf8(body)?;
    let value = |name: &str| {
        text.lines()
            .find(|l| {
                l.strip_prefix(name)
                    .is_some_and(|r| r.starts_with([' ', '{']))
            })
            .and_then(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
            .ok_or_else(|| anyhow::anyhow!("/metrics has no {name}"))
    };
    Ok(Sample {
        cpu: Cpu::Seconds(value("process_cpu_seconds_total")?),
        rss_bytes: value("process_resident_memory_bytes")? as u64,
        connections: None,
        version: None,
    })
}

/// The readings of the servers that answered, and (server, why) of those that did not.
pub(super) type Reads = (Vec<(String, Sample)>, Vec<(String, String)>);

/// The target's server pods on their IPs: how many were listed, and their reads.
pub(super) async fn read_pods(
    ctx: &Context,
    ns: &str,
    kind: ServerKind,
    name: &str,
    port_name: &str,
    reader: Reader,
) -> (usize, Reads) {
    let sel: Vec<String> = server_selector(kind, name)
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect();
    let pods = match Api::<Pod>::namespaced(ctx.client.clone(), ns)
        .list(&ListParams::default().labels(&sel.join(",")))
        .await
    {
        Ok(l) => l.items,
        Err(e) => {
            tracing::debug!(error = %e, "listing server pods for usage");
            return (0, Reads::default());
        }
    };
    let reads = pods.iter().filter_map(|p| {
        let ip: IpAddr = p.status.as_ref()?.pod_ip.as_deref()?.parse().ok()?;
        let port = p
            .spec
            .as_ref()?
            .containers
            .iter()
            .flat_map(|c| c.ports.iter().flatten())
            .find(|cp| cp.name.as_deref() == Some(port_name))?
            .container_port;
        let pod = p.name_any();
        let addr = SocketAddr::new(ip, port as u16);
        Some(async move {
            let read = match reader {
                Reader::Http { path, parse } => pod_http::get(addr, path, OPTIONS)
                    .await
                    .map_err(anyhow::Error::from)
                    .and_then(|r| parse(&r.body)),
                Reader::MosquittoSys => mosquitto_sys::read(addr, OPTIONS.timeout).await,
            };
            (pod, read)
        })
    });
    let read = futures::future::join_all(reads).await;
    (pods.len(), split(read))
}

/// An endpoint's servers at their monitoring URLs (checked by the plan): `GET
/// http://<host>:<port>/varz` each, at once.
pub(super) async fn read_servers(servers: &[Server]) -> Reads {
    let reads = servers.iter().map(|s| async move {
        let read = pod_http::get_host(&s.host, s.port, "/varz", OPTIONS)
            .await
            .map_err(anyhow::Error::from)
            .and_then(|r| parse_varz(&r.body));
        (s.name.clone(), read)
    });
    split(futures::future::join_all(reads).await)
}

fn split(reads: Vec<(String, anyhow::Result<Sample>)>) -> Reads {
    let mut out = Reads::default();
    for (server, read) in reads {
        match read {
            Ok(s) => out.0.push((server, s)),
            Err(e) => {
                tracing::debug!(%server, error = %e, "server usage not readable");
                out.1.push((server, reason(&e)));
            }
        }
    }
    out
}

/// What a failed read says in status: what went wrong, without the server's own words (an
/// error body, a value the JSON parser quotes), so that a monitoring URL cannot carry a
/// service's answer into a run's status. The row names the server; the log has the rest.
fn reason(e: &anyhow::Error) -> String {
    if let Some(e) = e.downcast_ref::<pod_http::Error>() {
        return match &e.kind {
            ErrorKind::Status { status, .. } => format!("answered {status}"),
            kind => kind.to_string(),
        };
    }
    if let Some(j) = e.downcast_ref::<serde_json::Error>() {
        return format!(
            "the answer is not the expected JSON ({:?} error at line {} column {})",
            j.classify(),
            j.line(),
            j.column()
        );
    }
    e.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    const VARZ: &str = include_str!("../../fixtures/nats-varz.json");
    const HEALTH: &str = include_str!("../../fixtures/pubsub-health.json");

    #[test]
    fn varz_cpu_percent_becomes_cores() {
        let s = parse_varz(VARZ.as_bytes()).unwrap();
        assert_eq!(s.cpu, Cpu::Cores(0.46));
        assert_eq!(s.rss_bytes, 233_635_840);
        assert_eq!(s.connections, Some(4));
        assert_eq!(s.version.as_deref(), Some("2.12.1"));
    }

    /// Stands in for an endpoint's NATS servers: `/varz` from the fixture on one port; another
    /// answers 404 with a body that must not reach status; a third is not listening.
    async fn servers() -> (Server, Server, Server) {
        use axum::routing::get;
        let serve = |app: axum::Router| async move {
            let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            let port = l.local_addr().unwrap().port();
            tokio::spawn(async move { axum::serve(l, app).await });
            port
        };
        let up = serve(axum::Router::new().route("/varz", get(|| async { VARZ }))).await;
        let secret = || async { (hyper::StatusCode::NOT_FOUND, "internal secret page") };
        let other = serve(axum::Router::new().fallback(secret)).await;
        let closed = {
            let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            l.local_addr().unwrap().port() // dropped: nothing listens there
        };
        let server = |name: &str, port| Server {
            name: name.into(),
            host: "localhost".into(),
            port,
        };
        (
            server("up", up),
            server("other", other),
            server("closed", closed),
        )
    }

    /// Each server is read at `/varz` by host name; one that cannot be read is reported with
    /// what went wrong, never with the body it answered.
    #[tokio::test]
    async fn endpoint_servers_are_read_by_host_and_failures_say_why() {
        let (up, other, closed) = servers().await;
        let (readings, failed) = read_servers(&[up, other, closed]).await;
        assert_eq!(readings.len(), 1);
        assert_eq!(readings[0].0, "up");
        assert_eq!(readings[0].1.rss_bytes, 233_635_840);
        assert_eq!(readings[0].1.version.as_deref(), Some("2.12.1"));
        let why = |name: &str| &failed.iter().find(|(n, _)| n == name).unwrap().1;
        assert_eq!(why("other"), "answered 404 Not Found");
        assert!(
            why("closed").contains("Connection refused"),
            "{}",
            why("closed")
        );
        assert!(!format!("{failed:?}").contains("secret"), "{failed:?}");
    }

    #[test]
    fn a_body_that_is_not_varz_is_reported_without_its_content() {
        let e = parse_varz(br#"{"cpu": "internal secret", "mem": 1}"#).unwrap_err();
        let r = reason(&e);
        assert!(
            r.starts_with("the answer is not the expected JSON (Data error"),
            "{r}"
        );
        assert!(!r.contains("secret"), "{r}");
    }

    #[test]
    fn pubsub_health_reads_the_cpu_counter() {
        let s = parse_pubsub_health(HEALTH.as_bytes()).unwrap();
        assert_eq!(s.cpu, Cpu::Seconds(3.27));
        assert_eq!(s.rss_bytes, 9_437_184);
        assert_eq!(s.connections, Some(15));
        // An older server without the counter is a clear error, not zero CPU.
        let err = parse_pubsub_health(br#"{"rss_bytes": 1}"#).unwrap_err();
        assert!(err.to_string().contains("cpu_seconds"), "{err}");
    }

    #[test]
    fn sockudo_metrics_give_the_process_cpu_counter_and_rss() {
        let text = include_str!("../../fixtures/sockudo-metrics.txt");
        let s = parse_process_metrics(text.as_bytes()).unwrap();
        assert_eq!(s.cpu, Cpu::Seconds(0.01));
        assert_eq!(s.rss_bytes, 19_169_280);
        let err = parse_process_metrics(b"process_cpu_seconds_total_x 1\n").unwrap_err();
        assert!(
            err.to_string().contains("process_cpu_seconds_total"),
            "{err}"
        );
        let (source, port, _) = endpoint(ServerKind::PubSubServer, Protocol::Pusher);
        assert_eq!((source, port), ("sockudo /metrics", "metrics"));
    }

    #[test]
    fn mosquitto_is_read_from_its_sys_topics_on_the_mqtt_port() {
        let (source, port, reader) = endpoint(ServerKind::MqttBroker, Protocol::Mqtt);
        assert_eq!((source, port), ("mosquitto $SYS heap", "mqtt"));
        assert!(matches!(reader, Reader::MosquittoSys));
    }
}
