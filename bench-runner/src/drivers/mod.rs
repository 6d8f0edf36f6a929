//! Protocol drivers behind one trait. The engine schedules and measures; a driver only
//! connects, sends batches and hands received payloads to a recorder.
use crate::kept::{ReadBack, ReadScope};
use crate::payload::Header;
use crate::recorder::{ReceiveRecorder, Shared};
use futures::future::BoxFuture;
use msgbench_crds::workload::{Protocol, Workload};
use runner_api::result::Delivery;
use runner_api::target::TargetUrl;
use std::sync::Arc;
use tokio::sync::watch;
use tokio::task::JoinHandle;

mod http_auth;
mod http_publish;
pub mod jetstream;
mod jetstream_readback;
pub mod mqtt;
mod mqtt_client;
mod mqtt_wire;
pub mod nats;
mod nats_client;
mod nats_creds;
mod nats_handshake;
pub mod nats_wire;
pub mod pusher;
pub mod socketio;
pub mod websocket;
#[cfg(test)]
mod wire_props;

/// One message to send: its topic index and measurement header.
#[derive(Clone, Copy, Debug)]
pub struct Outgoing {
    pub topic: u32,
    pub header: Header,
}

/// Stops receive loops and idle connections.
pub type Stop = watch::Receiver<bool>;

pub trait Driver: Send + Sync + 'static {
    /// How deliveries are expected (fan-out to subscribers, or one reply per message).
    fn delivery(&self) -> Delivery {
        Delivery::FanOut
    }
    /// Whether the server acknowledges each publish (JetStream, MQTT QoS ≥ 1, HTTP publish):
    /// only then are `lostAcked` and the publish stall defined. Such drivers call
    /// `recorder::note_sent` per publish and `record_ack` / `record_ack_error` per outcome.
    fn publish_acks(&self) -> bool {
        false
    }
    /// Messages per `send_batch` in closed loop. Drivers that write a batch at once take many
    /// (fewer, larger writes); drivers that issue one request per message (HTTP publish,
    /// request/reply) keep this many requests in flight per publisher.
    fn closed_loop_batch(&self) -> u64 {
        128
    }
    /// Server-side setup before any client connects (e.g. a JetStream stream).
    fn prepare(&self) -> BoxFuture<'_, anyhow::Result<()>> {
        Box::pin(async { Ok(()) })
    }
    /// After the drain: what the server still holds of this runner's messages in `scope`
    /// (JetStream reads its stream back, for `ackedNotKept`). `None`: the protocol keeps
    /// nothing to read back, the figure is unavailable.
    fn read_back(&self, scope: ReadScope) -> BoxFuture<'_, Option<ReadBack>> {
        let _ = scope;
        Box::pin(async { None })
    }
    /// Server-side cleanup after the run.
    fn cleanup(&self) -> BoxFuture<'_, anyhow::Result<()>> {
        Box::pin(async { Ok(()) })
    }
    /// Connects subscriber `idx` to `topics` and spawns its receive loop, which records into
    /// `rec` until `stop` flips. Returns once the subscription is active on the server.
    fn subscribe(
        &self,
        idx: u32,
        topics: Vec<u32>,
        rec: ReceiveRecorder,
        stop: Stop,
    ) -> BoxFuture<'_, anyhow::Result<JoinHandle<()>>>;
    /// Connects publisher `idx`. `stats` receives its ack latencies and errors; `rec` records
    /// round trips for round-trip drivers.
    fn publisher(
        &self,
        idx: u32,
        stats: Shared,
        rec: ReceiveRecorder,
        stop: Stop,
    ) -> BoxFuture<'_, anyhow::Result<Box<dyn Publisher>>>;
    /// Opens one idle connection (connection workloads); dropping it closes it.
    fn connect_idle(&self, idx: u32) -> BoxFuture<'_, anyhow::Result<Box<dyn Send>>>;
}

pub trait Publisher: Send {
    /// Sends a batch; returns how many were handed to the client. Failures are recorded as
    /// errors by kind in the publisher's stats.
    fn send_batch<'a>(&'a mut self, batch: &'a [Outgoing]) -> BoxFuture<'a, usize>;
    /// Flushes and waits for outstanding acks (bounded by the engine's timeout).
    fn finish(&mut self) -> BoxFuture<'_, ()>;
}

/// The driver for `w.protocol`, checking that the target's scheme fits it.
pub fn for_workload(
    w: &Arc<Workload>,
    target: &TargetUrl,
    opts: &crate::options::RunOptions,
) -> anyhow::Result<Arc<dyn Driver>> {
    let (runner, setup) = (opts.runner_id, &opts.setup);
    let want: &[&str] = match w.protocol {
        Protocol::Nats => &["nats", "tls"],
        Protocol::Jetstream => &["nats", "tls"],
        Protocol::Mqtt => &["mqtt", "tcp", "mqtts", "ssl"],
        Protocol::Socketio => &["http", "https"],
        Protocol::Websocket => &["ws", "http", "wss", "https"],
        Protocol::Pusher => &["ws"],
    };
    check_credentials(w.protocol, target)?;
    if !want.contains(&target.scheme.as_str()) {
        anyhow::bail!(
            "--target {}: scheme {:?} does not fit protocol {:?} (use {}://)",
            target.raw,
            target.scheme,
            w.protocol,
            want[0]
        );
    }
    let tls = crate::tls::for_tls_target(target)?;
    let (w, t) = (w.clone(), target.clone());
    Ok(match w.protocol {
        Protocol::Nats => Arc::new(nats::NatsDriver::new(w, t, opts.client)?),
        Protocol::Jetstream => Arc::new(jetstream::JetStreamDriver::new(w, t, setup.clone())?),
        Protocol::Mqtt => Arc::new(mqtt::MqttDriver::new(w, t, runner, opts.client, tls)),
        Protocol::Socketio => Arc::new(socketio::SocketIoDriver::new(w, t, tls)),
        Protocol::Websocket => Arc::new(websocket::WebSocketDriver::new(w, t, tls)),
        Protocol::Pusher => Arc::new(pusher::PusherDriver::new(w, t)?),
    })
}

/// Credentials go only to protocols that use them, and only of a kind they understand; a
/// Pusher target cannot be used without its app's.
fn check_credentials(p: Protocol, target: &TargetUrl) -> anyhow::Result<()> {
    use runner_api::target::Credentials;
    let (fits, takes) = match &target.auth {
        None if p == Protocol::Pusher => anyhow::bail!(
            "--target {}: protocol pusher needs the app's credentials (MSGBENCH_PUSHER_APP_ID, MSGBENCH_PUSHER_KEY and MSGBENCH_PUSHER_SECRET)",
            target.raw
        ),
        None => return Ok(()),
        Some(Credentials::PusherApp { .. }) => (p == Protocol::Pusher, "pusher"),
        Some(Credentials::UserPassword { .. }) => (
            matches!(p, Protocol::Nats | Protocol::Jetstream | Protocol::Mqtt),
            "nats, jetstream and mqtt",
        ),
        Some(Credentials::Token(_)) => (
            matches!(
                p,
                Protocol::Nats | Protocol::Jetstream | Protocol::Websocket | Protocol::Socketio
            ),
            "nats, jetstream, websocket and socketio",
        ),
        Some(Credentials::Nkey { .. } | Credentials::Creds(_)) => (
            matches!(p, Protocol::Nats | Protocol::Jetstream),
            "nats and jetstream",
        ),
    };
    if !fits {
        anyhow::bail!(
            "--target {}: credentials are only sent to {takes} targets (protocol {p:?})",
            target.raw
        );
    }
    Ok(())
}

/// Builds payloads into one growing buffer so the hot path allocates once per many messages.
pub struct PayloadBuf {
    buf: bytes::BytesMut,
    len: usize,
}

impl PayloadBuf {
    pub fn new(len: usize) -> Self {
        PayloadBuf {
            buf: bytes::BytesMut::new(),
            len,
        }
    }
    pub fn make(&mut self, h: &Header) -> bytes::Bytes {
        if self.buf.capacity() < self.len {
            self.buf.reserve((self.len * 256).max(64 * 1024));
        }
        h.write_payload(self.len, &mut self.buf);
        self.buf.split().freeze()
    }
}

/// Error kind of a connection the server closed or lost during the run. Drivers never
/// reconnect silently: each such loss is counted under this kind in the result's errors.
pub const DISCONNECTED: &str = "disconnected";

pub use crate::recorder::record_error;
