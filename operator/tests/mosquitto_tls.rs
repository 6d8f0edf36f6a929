//! The broker config the operator generates for an MqttBroker with `tls` and `auth`, on a real
//! mosquitto with the paths the pod would mount moved to a temp dir: the runner benchmarks it
//! over `mqtts://` with nothing but the CA (`ca.crt`) and the login, delivering every message;
//! a client without TLS gets no CONNACK, and the WebSocket listener does not speak plain HTTP.
use bench_runner::tls::TlsFiles;
use bench_runner::{run, ClientPath, RunOptions};
use msgbench_crds::mqtt_broker::MqttBrokerSpec;
use msgbench_operator_core::server::mqtt::broker_conf::{
    render, MOSQUITTO_PASSWORD_FILE, MOSQUITTO_TLS_DIR,
};
use rcgen::{BasicConstraints, CertificateParams, IsCa, KeyPair};
use runner_api::target::Credentials;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const PASSWORD: &str = "mqtt-tls-s3cret";

fn tool(names: &[&str]) -> String {
    let found = names.iter().find(|p| Path::new(p).is_file());
    found
        .unwrap_or_else(|| panic!("{names:?} not installed: run `e2e/tools/ensure mosquitto`"))
        .to_string()
}

fn free_port() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    l.local_addr().unwrap().port()
}

/// The Secret's files as the pod mounts them: `ca.crt` (the runner's), `tls.crt`, `tls.key`
/// for `localhost`.
fn secret_files(dir: &Path) {
    let mut ca = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let ca_key = KeyPair::generate().unwrap();
    let ca_cert = ca.self_signed(&ca_key).unwrap();
    let key = KeyPair::generate().unwrap();
    let cert = CertificateParams::new(vec!["localhost".to_string()])
        .unwrap()
        .signed_by(&key, &ca_cert, &ca_key)
        .unwrap();
    std::fs::write(dir.join("ca.crt"), ca_cert.pem()).unwrap();
    std::fs::write(dir.join("tls.crt"), cert.pem()).unwrap();
    std::fs::write(dir.join("tls.key"), key.serialize_pem()).unwrap();
}

struct Broker(Child);
impl Drop for Broker {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn wait_listening(port: u16) {
    let deadline = Instant::now() + Duration::from_secs(15);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(Instant::now() < deadline, "nothing listens on {port}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// mosquitto with the generated config of `spec`, the pod's paths replaced by `dir`'s.
fn broker(spec: &MqttBrokerSpec, dir: &Path) -> Broker {
    let passwd = dir.join("passwd");
    let made = Command::new(tool(&["/usr/bin/mosquitto_passwd"]))
        .args(["-b", "-c"])
        .arg(&passwd)
        .args(["bench", PASSWORD])
        .status()
        .unwrap();
    assert!(made.success());
    let conf = render(spec).unwrap();
    assert!(conf.contains(MOSQUITTO_TLS_DIR), "{conf}");
    let conf = conf
        .replace(MOSQUITTO_TLS_DIR, &dir.display().to_string())
        .replace(MOSQUITTO_PASSWORD_FILE, &passwd.display().to_string())
        // As root, mosquitto would switch to a user that cannot read the temp dir.
        + "user root\n";
    let file = dir.join("mosquitto.conf");
    std::fs::write(&file, conf).unwrap();
    let child = Command::new(tool(&["/usr/sbin/mosquitto", "/usr/bin/mosquitto"]))
        .arg("-c")
        .arg(&file)
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let b = Broker(child);
    wait_listening(spec.listeners.mqtt_port as u16);
    b
}

/// What a plain client sends (an MQTT CONNECT, an HTTP request) gets no answer in its own
/// protocol: the port speaks TLS only.
async fn plain_gets_no_answer(port: u16, hello: &[u8], plain_answer: &[u8]) {
    let mut s = tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .unwrap();
    s.write_all(hello).await.unwrap();
    let mut buf = [0u8; 64];
    let n = tokio::time::timeout(Duration::from_secs(5), s.read(&mut buf)).await;
    let got = match n {
        Ok(Ok(n)) => &buf[..n],
        _ => &[][..],
    };
    assert!(
        !got.starts_with(plain_answer),
        "port {port} answered in plain: {got:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_generated_tls_config_serves_mqtts_with_a_login_and_nothing_plain() {
    let dir = tempfile::tempdir().unwrap();
    secret_files(dir.path());
    let (port, ws) = (free_port(), free_port());
    let spec: MqttBrokerSpec = serde_norway::from_str(&format!(
        "{{auth: {{secretName: u}}, tls: {{secretName: t}}, maxQueuedMessages: 100000, \
         listeners: {{mqttPort: {port}, websocket: {{port: {ws}}}}}}}"
    ))
    .unwrap();
    let _b = broker(&spec, dir.path());
    wait_listening(ws);

    let workload: msgbench_crds::workload::Workload = serde_norway::from_str(
        "protocol: mqtt\nsubscribers: 1\nratePerPublisher: 500\nmessagesPerPublisher: 200\n\
         mqtt: {qos: 1}\n",
    )
    .unwrap();
    for client in [ClientPath::Wire, ClientPath::Library] {
        let opts = RunOptions {
            runner_id: 3,
            connect_timeout: Duration::from_secs(20),
            credentials: Some(Credentials::UserPassword {
                username: "bench".into(),
                password: PASSWORD.into(),
            }),
            client,
            tls: TlsFiles {
                ca_file: Some(dir.path().join("ca.crt")),
                ..TlsFiles::default()
            },
            ..Default::default()
        };
        let url = format!("mqtts://localhost:{port}");
        let r = run(workload.clone(), &url, opts)
            .await
            .unwrap_or_else(|e| panic!("{client:?}: {e:#}"));
        let m = &r.measured;
        assert_eq!(
            (m.published, m.received),
            (200, 200),
            "{client:?}: {:?}",
            m.errors
        );
    }

    // MQTT 3.1.1 CONNECT (client id `a`): a plain listener would answer CONNACK (0x20).
    let connect = b"\x10\x0d\x00\x04MQTT\x04\x02\x00\x3c\x00\x01a";
    plain_gets_no_answer(port, connect, &[0x20]).await;
    let get = b"GET /mqtt HTTP/1.1\r\nHost: localhost\r\nConnection: Upgrade\r\n\
                Upgrade: websocket\r\nSec-WebSocket-Version: 13\r\n\
                Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n";
    plain_gets_no_answer(ws, get, b"HTTP/").await;
}
