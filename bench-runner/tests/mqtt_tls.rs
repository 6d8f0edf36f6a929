//! MQTT over TLS (`mqtts://`): a mosquitto with a password file and a TLS listener that
//! requires a client certificate, benchmarked at QoS 0 and 1 on both client paths (the batched
//! wire publisher and rumqttc) and over MQTT 5. A wrong password fails as TargetAuthFailed, a
//! wrong CA, a missing client certificate or a broker without TLS as TargetTLSFailed, and a
//! broker refusing the protocol version as TargetProtocolRefused: all within seconds.
mod support;
use bench_runner::termination;
use bench_runner::tls::TlsFiles;
use bench_runner::{run, ClientPath, RunOptions};
use runner_api::target::Credentials;
use runner_api::termination::RunnerGaveUp;
use std::path::Path;
use std::time::{Duration, Instant};
use support::pki::{Ca, Issued};
use support::*;

const USER: &str = "bench";
const PASSWORD: &str = "mqtt-s3cret-pw";

/// mosquitto on a TLS listener with `server`'s certificate, client certificates from `ca`
/// required, and one user.
fn mosquitto_tls(dir: tempfile::TempDir, ca: &Ca, server: &Issued) -> Server {
    let port = free_port();
    let passwd = dir.path().join("passwd");
    let made = std::process::Command::new(tool("mosquitto_passwd"))
        .args(["-b", "-c"])
        .arg(&passwd)
        .args([USER, PASSWORD])
        .status()
        .unwrap();
    assert!(made.success());
    let conf = dir.path().join("mosquitto.conf");
    let text = format!(
        "listener {port} 127.0.0.1\ncafile {}\ncertfile {}\nkeyfile {}\nrequire_certificate true\n\
         allow_anonymous false\npassword_file {}\npersistence false\nmax_queued_messages 100000\n\
         max_inflight_messages 0\nuser root\n",
        ca.file.display(),
        server.cert.display(),
        server.key.display(),
        passwd.display()
    );
    std::fs::write(&conf, text).unwrap();
    serve_with_config("mosquitto", port, dir, &conf)
}

fn opts(client: ClientPath, password: &str, tls: TlsFiles) -> RunOptions {
    RunOptions {
        runner_id: 8,
        connect_timeout: Duration::from_secs(20),
        credentials: Some(Credentials::UserPassword {
            username: USER.into(),
            password: password.into(),
        }),
        client,
        tls,
        ..Default::default()
    }
}

fn files(ca: &Path, client: Option<&Issued>) -> TlsFiles {
    TlsFiles {
        ca_file: Some(ca.to_path_buf()),
        cert_file: client.map(|c| c.cert.clone()),
        key_file: client.map(|c| c.key.clone()),
        server_name: None,
    }
}

fn yaml(subscribers: u32, qos: u8, version: &str) -> String {
    format!(
        "protocol: mqtt\nsubscribers: {subscribers}\nratePerPublisher: 500\nmessagesPerPublisher: 200\n\
         mqtt: {{qos: {qos}, version: \"{version}\"}}\n"
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn qos0_and_qos1_over_mqtts_deliver_exactly_on_both_client_paths() {
    let dir = tempfile::tempdir().unwrap();
    let ca = Ca::new(dir.path(), "mqtt test CA");
    let (server, client) = (
        ca.issue(dir.path(), "broker", &["localhost", "127.0.0.1"]),
        ca.issue(dir.path(), "runner", &["runner.test"]),
    );
    let b = mosquitto_tls(dir, &ca, &server);
    let url = format!("mqtts://127.0.0.1:{}", b.port);
    let cases = [
        (ClientPath::Wire, 0, "3.1.1"),
        (ClientPath::Wire, 1, "3.1.1"),
        (ClientPath::Library, 0, "3.1.1"),
        (ClientPath::Library, 1, "3.1.1"),
        (ClientPath::Library, 1, "5"),
    ];
    for (path, qos, version) in cases {
        let o = opts(path, PASSWORD, files(&ca.file, Some(&client)));
        let r = run(workload(&yaml(1, qos, version)), &url, o)
            .await
            .unwrap_or_else(|e| panic!("{path:?} QoS {qos} {version}: {e:#}"));
        let m = &r.measured;
        let what = format!("{path:?} QoS {qos} MQTT {version}: {:?}", m.errors);
        assert_eq!((m.published, m.received), (200, 200), "{what}");
        assert!(m.errors.is_empty(), "{what}");
    }
}

/// Both paths (the wire publisher alone, and rumqttc's subscriber first) fail with `want`
/// within seconds, the password in no error.
async fn refused(url: &str, password: &str, tls: &TlsFiles, want: RunnerGaveUp, words: &[&str]) {
    for (path, subscribers) in [(ClientPath::Wire, 0), (ClientPath::Library, 1)] {
        let t = Instant::now();
        let o = opts(path, password, tls.clone());
        let e = run(workload(&yaml(subscribers, 1, "3.1.1")), url, o)
            .await
            .expect_err("refused");
        let shown = format!("{e:#}");
        assert_eq!(termination::of(&e).reason, want, "{path:?}: {shown}");
        assert!(t.elapsed() < Duration::from_secs(5), "{path:?}: {shown}");
        assert!(
            !shown.contains(password),
            "{path:?}: the password in {shown}"
        );
        for w in words {
            assert!(shown.contains(w), "{path:?}: no {w:?} in {shown}");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wrong_login_ca_or_client_certificate_fail_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let ca = Ca::new(dir.path(), "mqtt test CA");
    let other = Ca::new(dir.path(), "another CA");
    let (server, client) = (
        ca.issue(dir.path(), "broker", &["localhost", "127.0.0.1"]),
        ca.issue(dir.path(), "runner", &["runner.test"]),
    );
    let b = mosquitto_tls(dir, &ca, &server);
    let url = format!("mqtts://127.0.0.1:{}", b.port);
    let good = files(&ca.file, Some(&client));
    let auth = RunnerGaveUp::TargetAuthFailed;
    refused(&url, "wrong-password", &good, auth, &["refused the login"]).await;
    let tls = RunnerGaveUp::TargetTLSFailed;
    let wrong_ca = files(&other.file, Some(&client));
    refused(
        &url,
        PASSWORD,
        &wrong_ca,
        tls,
        &["UnknownIssuer", "CN=mqtt test CA"],
    )
    .await;
    refused(&url, PASSWORD, &files(&ca.file, None), tls, &["TLS"]).await;
    // A broker without TLS on an mqtts:// URL.
    let plain = mosquitto();
    let plain_url = format!("mqtts://127.0.0.1:{}", plain.port);
    refused(&plain_url, PASSWORD, &good, tls, &["TLS"]).await;
}

/// A broker that answers every CONNECT with CONNACK `connack` (no mosquitto can be told to
/// refuse MQTT 3.1.1 or 5, so this one is in the test).
async fn refusing_broker(connack: &'static [u8]) -> u16 {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = l.local_addr().unwrap().port();
    tokio::spawn(async move {
        while let Ok((mut s, _)) = l.accept().await {
            tokio::spawn(async move {
                let mut buf = [0u8; 1024];
                if s.read(&mut buf).await.is_ok_and(|n| n > 0) {
                    let _ = s.write_all(connack).await;
                }
                let _ = s.read(&mut buf).await;
            });
        }
    });
    port
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_protocol_version_fails_as_protocol_refused() {
    let v311 = refusing_broker(&[0x20, 0x02, 0x00, 0x01]).await;
    let v5 = refusing_broker(&[0x20, 0x03, 0x00, 0x84, 0x00]).await;
    for (port, version, subscribers, path) in [
        (v311, "3.1.1", 0, ClientPath::Wire),
        (v311, "3.1.1", 1, ClientPath::Library),
        (v5, "5", 1, ClientPath::Library),
    ] {
        let o = RunOptions {
            client: path,
            connect_timeout: Duration::from_secs(20),
            ..Default::default()
        };
        let t = Instant::now();
        let url = format!("mqtt://127.0.0.1:{port}");
        let e = run(workload(&yaml(subscribers, 0, version)), &url, o)
            .await
            .expect_err("refused");
        let shown = format!("{e:#}");
        let reason = termination::of(&e).reason;
        assert_eq!(
            reason,
            RunnerGaveUp::TargetProtocolRefused,
            "{version} {path:?}: {shown}"
        );
        assert!(shown.contains("protocol version"), "{shown}");
        assert!(t.elapsed() < Duration::from_secs(5), "{shown}");
    }
}
