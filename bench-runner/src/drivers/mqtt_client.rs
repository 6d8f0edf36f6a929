//! One face over rumqttc's MQTT 3.1.1 and MQTT 5 clients: the driver needs only publish,
//! subscribe and a stream of the events that matter for measurement. `mqtts://` runs over
//! rumqttc's rustls transport with the runner's own config (ring, the target's CA, client
//! certificate and server name).
use crate::refusal::{self, Refusal};
use bytes::Bytes;
use msgbench_crds::workload::{MqttOptions, MqttVersion};
use rumqttc::Outgoing;
use std::sync::Arc;
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

/// `login`: the user name and password sent in CONNECT, when the broker requires them; `tls`:
/// the config of an `mqtts://` target.
pub fn new(
    (host, port): (&str, u16),
    id: String,
    o: &MqttOptions,
    login: Option<(&str, &str)>,
    tls: Option<Arc<rustls::ClientConfig>>,
) -> (Client, Loop) {
    let cap = 4096;
    let transport =
        tls.map(|c| rumqttc::Transport::tls_with_config(rumqttc::TlsConfiguration::Rustls(c)));
    match o.version {
        MqttVersion::V311 => {
            let mut m = rumqttc::MqttOptions::new(id, host, port);
            if let Some((user, password)) = login {
                m.set_credentials(user, password);
            }
            if let Some(t) = transport {
                m.set_transport(t);
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
            if let Some(t) = transport {
                m.set_transport(t);
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

/// An error of the event loop: its text, and whether the broker refused this client for good
/// (a refused login or protocol version, a failed TLS handshake). rumqttc's own text for a
/// refused CONNACK, "Connection refused", reads as a target not up yet, which the connect
/// window would retry until it ends.
#[derive(Debug)]
pub struct PollError {
    pub text: String,
    pub refusal: Option<Refusal>,
}

impl std::fmt::Display for PollError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.text)
    }
}

impl PollError {
    fn plain(e: impl std::fmt::Display) -> Self {
        PollError {
            text: e.to_string(),
            refusal: None,
        }
    }
    fn connack(code: u8, e: impl std::fmt::Display) -> Self {
        match refusal::mqtt_connack_refusal(code) {
            Some((r, text)) => PollError {
                text,
                refusal: Some(r),
            },
            None => Self::plain(e),
        }
    }
    fn tls(text: String) -> Self {
        PollError {
            text,
            refusal: Some(Refusal::Tls),
        }
    }
    /// Any other error; one with a rustls error deep inside (rumqttc reports a TLS alert
    /// read with CONNACK as a state error) is a TLS failure.
    fn other(e: &(dyn std::error::Error + 'static)) -> Self {
        match crate::tls::failure_in_error(e) {
            Some(why) => Self::tls(why),
            None if crate::tls::is_failure_text(&e.to_string()) => Self::tls(e.to_string()),
            None => Self::plain(e),
        }
    }
    /// An I/O error that carries a rustls error: the broker refused this client's TLS after
    /// the handshake (TLS 1.3 checks the client certificate then).
    fn io(e: std::io::Error) -> Self {
        match e.get_ref().and_then(|i| i.downcast_ref::<rustls::Error>()) {
            Some(_) => Self::tls(crate::tls::handshake_failure(&e)),
            None => Self::plain(format!("I/O: {e}")),
        }
    }
}

fn tls_error(e: rumqttc::TlsError) -> PollError {
    match e {
        rumqttc::TlsError::Io(io) => PollError::tls(crate::tls::handshake_failure(&io)),
        e => PollError::tls(format!("TLS: {e}")),
    }
}

fn v4_error(e: rumqttc::ConnectionError) -> PollError {
    use rumqttc::ConnectionError as E;
    match e {
        E::ConnectionRefused(code) => PollError::connack(code as u8, &e),
        E::Tls(t) => tls_error(t),
        E::Io(io) => PollError::io(io),
        e => PollError::other(&e),
    }
}

fn v5_error(e: rumqttc::v5::ConnectionError) -> PollError {
    use rumqttc::v5::mqttbytes::v5::ConnectReturnCode as C;
    use rumqttc::v5::ConnectionError as E;
    match e {
        E::ConnectionRefused(ref c) => {
            let code = match c {
                C::BadUserNamePassword => 0x86,
                C::NotAuthorized => 0x87,
                C::BadAuthenticationMethod => 0x8C,
                C::UnsupportedProtocolVersion | C::RefusedProtocolVersion => 0x84,
                _ => 0,
            };
            PollError::connack(code, &e)
        }
        E::Tls(t) => tls_error(t),
        E::Io(io) => PollError::io(io),
        e => PollError::other(&e),
    }
}

impl Loop {
    pub async fn poll(&mut self) -> Result<Ev, PollError> {
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
