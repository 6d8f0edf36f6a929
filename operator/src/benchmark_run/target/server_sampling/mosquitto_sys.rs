//! mosquitto's own figures from its `$SYS` tree, read over MQTT on the pod IP: heap bytes in
//! use (`$SYS/broker/heap/current`) and connected clients (`$SYS/broker/clients/connected`).
//! Both come from the same broker tick (`sys_interval`, set to 2 s in the generated config), so
//! a (connections, memory) pair is consistent even if up to one tick old. `$SYS` reports no
//! process CPU: the sample says so rather than a zero.
use msgbench_operator_core::run::results::server_usage::{Cpu, Sample};
use rumqttc::{AsyncClient, Event, MqttOptions, Packet, QoS};
use std::net::SocketAddr;
use std::time::Duration;

pub const HEAP_TOPIC: &str = "$SYS/broker/heap/current";
pub const CLIENTS_TOPIC: &str = "$SYS/broker/clients/connected";
pub use msgbench_operator_core::run::results::server_usage::MOSQUITTO_NO_CPU as NO_CPU;

/// One reading, bounded by `timeout` (the retained values arrive at once; a new tick at most
/// `sys_interval` later).
pub async fn read(addr: SocketAddr, timeout: Duration) -> anyhow::Result<Sample> {
    let id = format!("msgbench-usage-{:08x}", rand::random::<u32>());
    let mut o = MqttOptions::new(id, addr.ip().to_string(), addr.port());
    o.set_keep_alive(Duration::from_secs(5))
        .set_clean_session(true);
    let (client, mut events) = AsyncClient::new(o, 8);
    client.subscribe(HEAP_TOPIC, QoS::AtMostOnce).await?;
    client.subscribe(CLIENTS_TOPIC, QoS::AtMostOnce).await?;
    let (mut heap, mut clients) = (None, None);
    let got = tokio::time::timeout(timeout, async {
        while heap.is_none() || clients.is_none() {
            if let Event::Incoming(Packet::Publish(p)) = events.poll().await? {
                let v = parse_count(&p.payload)?;
                match p.topic.as_str() {
                    HEAP_TOPIC => heap = Some(v),
                    CLIENTS_TOPIC => clients = Some(v),
                    _ => {}
                }
            }
        }
        anyhow::Ok(())
    })
    .await;
    let _ = client.try_disconnect();
    match got {
        Ok(r) => r?,
        Err(_) => anyhow::bail!(
            "no {HEAP_TOPIC} and {CLIENTS_TOPIC} within {timeout:?} (a broker without heap \
             tracking, or not mosquitto)"
        ),
    }
    Ok(Sample {
        cpu: Cpu::Unreported(NO_CPU),
        rss_bytes: heap.unwrap_or_default(),
        connections: clients,
        version: None,
    })
}

fn parse_count(payload: &[u8]) -> anyhow::Result<u64> {
    let s = std::str::from_utf8(payload)?.trim();
    // Older brokers append the unit ("12345 bytes").
    let n = s.split_whitespace().next().unwrap_or_default();
    n.parse()
        .map_err(|_| anyhow::anyhow!("$SYS value {s:?} is not a count"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_parse_with_or_without_a_unit() {
        assert_eq!(parse_count(b"47048").unwrap(), 47_048);
        assert_eq!(parse_count(b"47048 bytes").unwrap(), 47_048);
        assert!(parse_count(b"n/a").is_err());
    }

    /// The config the operator generates, on a real mosquitto: heap and clients arrive, and
    /// the heap grows with connections held open.
    #[tokio::test]
    async fn the_generated_config_serves_heap_and_clients() {
        let Some(bin) = ["/usr/sbin/mosquitto", "/usr/bin/mosquitto"]
            .into_iter()
            .find(|p| std::path::Path::new(p).is_file())
        else {
            panic!("mosquitto not installed: run `e2e/tools/ensure mosquitto`");
        };
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let mut spec: msgbench_crds::mqtt_broker::MqttBrokerSpec =
            serde_json::from_str("{}").unwrap();
        spec.listeners.mqtt_port = port as i32;
        let dir = tempfile::tempdir().unwrap();
        let conf = dir.path().join("mosquitto.conf");
        std::fs::write(
            &conf,
            msgbench_operator_core::server::mqtt::broker_conf::render(&spec).unwrap(),
        )
        .unwrap();
        let mut child = tokio::process::Command::new(bin)
            .arg("-c")
            .arg(&conf)
            .stdout(std::process::Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        let addr: SocketAddr = ([127, 0, 0, 1], port).into();
        // Bounded wait for the listener (no fixed sleep).
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        let before = loop {
            match read(addr, Duration::from_secs(3)).await {
                Ok(s) => break s,
                Err(e) if tokio::time::Instant::now() > deadline => panic!("{e}"),
                Err(_) => tokio::time::sleep(Duration::from_millis(100)).await,
            }
        };
        assert!(before.rss_bytes > 0 && before.cpu == Cpu::Unreported(NO_CPU));
        let mut held = Vec::new();
        for i in 0..50 {
            let s = tokio::net::TcpStream::connect(addr).await.unwrap();
            held.push(mqtt_connect(s, i).await);
        }
        // The next tick (≤ 2 s) counts them.
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        let after = loop {
            let s = read(addr, Duration::from_secs(3)).await.unwrap();
            if s.connections >= Some(50) || tokio::time::Instant::now() > deadline {
                break s;
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        };
        assert!(after.connections >= Some(50), "{after:?}");
        assert!(after.rss_bytes > before.rss_bytes, "{before:?} → {after:?}");
        child.kill().await.unwrap();
    }

    /// A bare MQTT 3.1.1 CONNECT, held open: a connection the broker counts.
    async fn mqtt_connect(mut s: tokio::net::TcpStream, i: u32) -> tokio::net::TcpStream {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let id = format!("held-{i:04}");
        let mut p = vec![0x10, (10 + 2 + id.len()) as u8];
        p.extend_from_slice(&[0, 4, b'M', b'Q', b'T', b'T', 4, 2, 0, 60]);
        p.extend_from_slice(&[0, id.len() as u8]);
        p.extend_from_slice(id.as_bytes());
        s.write_all(&p).await.unwrap();
        let mut ack = [0u8; 4];
        s.read_exact(&mut ack).await.unwrap();
        assert_eq!(ack, [0x20, 2, 0, 0], "CONNACK accepted");
        s
    }
}
