//! Reading the servers' own monitoring endpoints on their pod IPs: nats `/varz`,
//! pubsub-server `/health`, sockudo's Prometheus `/metrics` and mosquitto's `$SYS` topics, parsed
//! into one `Sample` per pod.
use super::mosquitto_sys;
use crate::access::pod_http::{self, Options};
use crate::runtime::context::Context;
use k8s_openapi::api::core::v1::Pod;
use kube::api::ListParams;
use kube::{Api, ResourceExt};
use msgbench_crds::benchmark_run::ServerKind;
use msgbench_crds::workload::Protocol;
use msgbench_operator_core::run::build::server_selector;
use msgbench_operator_core::run::server_usage::{Cpu, Sample};
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
    }
    let v: Varz = serde_json::from_slice(body)?;
    Ok(Sample {
        cpu: Cpu::Cores(v.cpu / 100.0),
        rss_bytes: v.mem,
        connections: v.connections,
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
    })
}

pub(super) async fn read_pods(
    ctx: &Context,
    ns: &str,
    kind: ServerKind,
    name: &str,
    port_name: &str,
    reader: Reader,
) -> (usize, Vec<(String, Sample)>) {
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
            return (0, Vec::new());
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
            match read {
                Ok(s) => Some((pod, s)),
                Err(e) => {
                    tracing::debug!(%pod, error = %e, "server usage not readable");
                    None
                }
            }
        })
    });
    let answered = futures::future::join_all(reads)
        .await
        .into_iter()
        .flatten()
        .collect();
    (pods.len(), answered)
}

#[cfg(test)]
mod tests {
    use super::*;

    const VARZ: &str = include_str!("../fixtures/nats-varz.json");
    const HEALTH: &str = include_str!("../fixtures/pubsub-health.json");

    #[test]
    fn varz_cpu_percent_becomes_cores() {
        let s = parse_varz(VARZ.as_bytes()).unwrap();
        assert_eq!(s.cpu, Cpu::Cores(0.46));
        assert_eq!(s.rss_bytes, 233_635_840);
        assert_eq!(s.connections, Some(4));
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
        let text = include_str!("../fixtures/sockudo-metrics.txt");
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
