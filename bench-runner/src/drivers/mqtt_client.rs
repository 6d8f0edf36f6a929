//! One face over rumqttc's MQTT 3.1.1 and MQTT 5 clients: the driver needs only publish,
//! subscribe and a stream of the events that matter for measurement.
use bytes::Bytes;
use msgbench_crds::workload::{MqttOptions, MqttVersion};
use rumqttc::Outgoing;
use std::time::Duration;

pub enum Ev {
    ConnAck,
    Publish(Bytes),
    SubAck,
    /// Written to the socket with this packet id (0 for QoS 0).
    Sent(u16),
    PubAck(u16),
    PubComp(u16),
    Other,
}

#[derive(Clone)]
pub enum Client {
    V4(rumqttc::AsyncClient),
    V5(rumqttc::v5::AsyncClient),
}

pub enum Loop {
    V4(Box<rumqttc::EventLoop>),
    V5(Box<rumqttc::v5::EventLoop>),
}

/// `login`: the user name and password sent in CONNECT, when the broker requires them.
pub fn new(
    host: &str,
    port: u16,
    id: String,
    o: &MqttOptions,
    login: Option<(&str, &str)>,
) -> (Client, Loop) {
    let cap = 4096;
    match o.version {
        MqttVersion::V311 => {
            let mut m = rumqttc::MqttOptions::new(id, host, port);
            if let Some((user, password)) = login {
                m.set_credentials(user, password);
            }
            m.set_keep_alive(Duration::from_secs(u64::from(o.keep_alive_seconds)))
                .set_inflight(o.max_in_flight)
                .set_max_packet_size(2 << 20, 2 << 20)
                .set_request_channel_capacity(cap);
            let (c, mut l) = rumqttc::AsyncClient::new(m, cap);
            l.set_network_options(network());
            (Client::V4(c), Loop::V4(Box::new(l)))
        }
        MqttVersion::V5 => {
            let mut m = rumqttc::v5::MqttOptions::new(id, host, port);
            if let Some((user, password)) = login {
                m.set_credentials(user, password);
            }
            m.set_keep_alive(Duration::from_secs(u64::from(o.keep_alive_seconds)))
                .set_outgoing_inflight_upper_limit(o.max_in_flight)
                .set_max_packet_size(Some(2 << 20))
                .set_request_channel_capacity(cap)
                .set_network_options(network());
            let (c, l) = rumqttc::v5::AsyncClient::new(m, cap);
            (Client::V5(c), Loop::V5(Box::new(l)))
        }
    }
}

/// TCP_NODELAY: rumqttc leaves Nagle on, and small PUBACKs then wait for the peer's delayed
/// ACK (tens of ms per round), which capped QoS 1 near 20 k msg/s with ~280 ms ack latency.
fn network() -> rumqttc::NetworkOptions {
    let mut n = rumqttc::NetworkOptions::new();
    n.set_tcp_nodelay(true);
    n
}

fn qos4(q: u8) -> rumqttc::QoS {
    match q {
        0 => rumqttc::QoS::AtMostOnce,
        1 => rumqttc::QoS::AtLeastOnce,
        _ => rumqttc::QoS::ExactlyOnce,
    }
}
fn qos5(q: u8) -> rumqttc::v5::mqttbytes::QoS {
    match q {
        0 => rumqttc::v5::mqttbytes::QoS::AtMostOnce,
        1 => rumqttc::v5::mqttbytes::QoS::AtLeastOnce,
        _ => rumqttc::v5::mqttbytes::QoS::ExactlyOnce,
    }
}

impl Client {
    pub async fn publish(&self, topic: &str, qos: u8, payload: Bytes) -> Result<(), String> {
        match self {
            Client::V4(c) => c
                .publish_bytes(topic, qos4(qos), false, payload)
                .await
                .map_err(|e| e.to_string()),
            Client::V5(c) => c
                .publish_bytes(topic, qos5(qos), false, payload)
                .await
                .map_err(|e| e.to_string()),
        }
    }
    pub async fn subscribe(&self, topic: &str, qos: u8) -> Result<(), String> {
        match self {
            Client::V4(c) => c
                .subscribe(topic, qos4(qos))
                .await
                .map_err(|e| e.to_string()),
            Client::V5(c) => c
                .subscribe(topic, qos5(qos))
                .await
                .map_err(|e| e.to_string()),
        }
    }
    pub async fn disconnect(&self) {
        let _ = match self {
            Client::V4(c) => c.disconnect().await.map_err(|e| e.to_string()),
            Client::V5(c) => c.disconnect().await.map_err(|e| e.to_string()),
        };
    }
}

/// rumqttc's error as text; a refused login says so (its own text, "Connection refused", reads
/// as a target not up yet, which the connect window would retry until it ends).
fn v4_error(e: rumqttc::ConnectionError) -> String {
    match e {
        rumqttc::ConnectionError::ConnectionRefused(code) => {
            super::mqtt_wire::login_refused(code as u8).unwrap_or_else(|| e.to_string())
        }
        e => e.to_string(),
    }
}

fn v5_error(e: rumqttc::v5::ConnectionError) -> String {
    use rumqttc::v5::mqttbytes::v5::ConnectReturnCode as C;
    let code = match &e {
        rumqttc::v5::ConnectionError::ConnectionRefused(C::BadUserNamePassword) => Some(0x86),
        rumqttc::v5::ConnectionError::ConnectionRefused(C::NotAuthorized) => Some(0x87),
        _ => None,
    };
    code.and_then(super::mqtt_wire::login_refused)
        .unwrap_or_else(|| e.to_string())
}

impl Loop {
    pub async fn poll(&mut self) -> Result<Ev, String> {
        use rumqttc::v5::mqttbytes::v5::Packet as P5;
        use rumqttc::v5::Event as E5;
        use rumqttc::Event as E4;
        use rumqttc::Packet as P4;
        let out = |o: Outgoing| match o {
            Outgoing::Publish(id) => Ev::Sent(id),
            _ => Ev::Other,
        };
        Ok(match self {
            Loop::V4(l) => match l.poll().await.map_err(v4_error)? {
                E4::Incoming(P4::Publish(p)) => Ev::Publish(p.payload),
                E4::Incoming(P4::ConnAck(_)) => Ev::ConnAck,
                E4::Incoming(P4::SubAck(_)) => Ev::SubAck,
                E4::Incoming(P4::PubAck(a)) => Ev::PubAck(a.pkid),
                E4::Incoming(P4::PubComp(a)) => Ev::PubComp(a.pkid),
                E4::Incoming(_) => Ev::Other,
                E4::Outgoing(o) => out(o),
            },
            Loop::V5(l) => match l.poll().await.map_err(v5_error)? {
                E5::Incoming(P5::Publish(p)) => Ev::Publish(p.payload),
                E5::Incoming(P5::ConnAck(_)) => Ev::ConnAck,
                E5::Incoming(P5::SubAck(_)) => Ev::SubAck,
                E5::Incoming(P5::PubAck(a)) => Ev::PubAck(a.pkid),
                E5::Incoming(P5::PubComp(a)) => Ev::PubComp(a.pkid),
                E5::Incoming(_) => Ev::Other,
                E5::Outgoing(o) => out(o),
            },
        })
    }
}
