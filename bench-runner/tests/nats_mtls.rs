//! NATS with mutual TLS (`tls { cert_file, key_file, ca_file, verify: true }`) whose
//! certificate names `nats.test` only, reached as 127.0.0.1: the runner presents its client
//! certificate and verifies the server against `server_name`, on both core-NATS client paths
//! and JetStream, for `tls://` and for a `nats://` URL whose server requires TLS in its INFO.
//! A wrong CA, a wrong name, an expired certificate, a missing client certificate or a server
//! without TLS fail within seconds as TargetTLSFailed, saying what the server presented.
mod support;
use bench_runner::termination;
use bench_runner::tls::TlsFiles;
use bench_runner::{run, ClientPath, RunOptions};
use runner_api::termination::RunnerGaveUp;
use std::path::Path;
use std::time::{Duration, Instant};
use support::pki::{Ca, Issued};
use support::*;

const CORE: &str =
    "protocol: nats\nsubscribers: 1\nratePerPublisher: 500\nmessagesPerPublisher: 200\n";
const JS: &str = "protocol: jetstream\nratePerPublisher: 500\nmessagesPerPublisher: 200\njetstream: {stream: mtls, storage: memory}\n";
const PATHS: [(&str, ClientPath); 3] = [
    (CORE, ClientPath::Wire),
    (CORE, ClientPath::Library),
    (JS, ClientPath::Wire),
];

/// A JetStream nats-server requiring TLS with a client certificate signed by `ca`.
fn mtls_server(dir: tempfile::TempDir, ca: &Ca, server: &Issued) -> Server {
    let port = free_port();
    let conf = dir.path().join("nats.conf");
    let text = format!(
        "listen: 127.0.0.1:{port}\njetstream {{ store_dir: {:?} }}\n\
         tls {{\n  cert_file: {:?}\n  key_file: {:?}\n  ca_file: {:?}\n  verify: true\n}}\n",
        dir.path().join("js"),
        server.cert,
        server.key,
        ca.file
    );
    std::fs::write(&conf, text).unwrap();
    serve_with_config("nats-server", port, dir, &conf)
}

struct Pki {
    ca: Ca,
    client: Issued,
    other_ca: Ca,
}

fn pki(dir: &Path) -> Pki {
    let ca = Ca::new(dir, "msgbench test CA");
    let client = ca.issue(dir, "runner", &["runner.test"]);
    Pki {
        other_ca: Ca::new(dir, "some other CA"),
        client,
        ca,
    }
}

fn opts(client: ClientPath, tls: TlsFiles) -> RunOptions {
    RunOptions {
        runner_id: 6,
        connect_timeout: Duration::from_secs(20),
        client,
        tls,
        ..Default::default()
    }
}

fn files(ca: &Ca, client: Option<&Issued>, server_name: Option<&str>) -> TlsFiles {
    TlsFiles {
        ca_file: Some(ca.file.clone()),
        cert_file: client.map(|c| c.cert.clone()),
        key_file: client.map(|c| c.key.clone()),
        server_name: server_name.map(String::from),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_certificate_and_server_name_work_on_every_path() {
    let dir = tempfile::tempdir().unwrap();
    let p = pki(dir.path());
    let server = p.ca.issue(dir.path(), "nats", &["nats.test"]);
    let s = mtls_server(dir, &p.ca, &server);
    // tls://, and nats:// (the server's INFO says tls_required: the clients upgrade).
    for scheme in ["tls", "nats"] {
        let url = format!("{scheme}://127.0.0.1:{}", s.port);
        for (yaml, client) in PATHS {
            let o = opts(client, files(&p.ca, Some(&p.client), Some("nats.test")));
            let r = run(workload(yaml), &url, o)
                .await
                .unwrap_or_else(|e| panic!("{url} {client:?} {yaml}: {e:#}"));
            let m = &r.measured;
            assert_eq!((m.published, m.received), (200, 200), "{url} {client:?}");
            assert!(m.errors.is_empty(), "{url} {client:?}: {:?}", m.errors);
        }
    }
}

/// Runs `yaml` on every path, expecting TargetTLSFailed within seconds with all of `words`.
async fn refused(url: &str, tls: &TlsFiles, words: &[&str]) {
    for (yaml, client) in PATHS {
        let t = Instant::now();
        let e = run(workload(yaml), url, opts(client, tls.clone()))
            .await
            .expect_err("refused");
        let shown = format!("{e:#}");
        assert_eq!(
            termination::of(&e).reason,
            RunnerGaveUp::TargetTLSFailed,
            "{client:?}: {shown}"
        );
        assert!(t.elapsed() < Duration::from_secs(5), "{client:?}: {shown}");
        for w in words {
            assert!(shown.contains(w), "{client:?}: no {w:?} in {shown}");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refused_certificates_fail_at_once_naming_what_the_server_presented() {
    let dir = tempfile::tempdir().unwrap();
    let p = pki(dir.path());
    let server = p.ca.issue(dir.path(), "nats", &["nats.test"]);
    let expired = p.ca.issue_expired(dir.path(), "old", &["nats.test"]);
    let expired_dir = tempfile::tempdir().unwrap();
    let s = mtls_server(dir, &p.ca, &server);
    let old = mtls_server(expired_dir, &p.ca, &expired);
    let url = format!("tls://127.0.0.1:{}", s.port);
    // Another CA: the presented certificate's subject, names and issuer are named.
    let wrong_ca = files(&p.other_ca, Some(&p.client), Some("nats.test"));
    let issuer = [
        "UnknownIssuer",
        "CN=nats",
        "nats.test",
        "CN=msgbench test CA",
    ];
    refused(&url, &wrong_ca, &issuer).await;
    // The right CA, but verified as the host: the certificate names nats.test only.
    let no_name = files(&p.ca, Some(&p.client), None);
    refused(
        &url,
        &no_name,
        &["not valid for name", "127.0.0.1", "nats.test"],
    )
    .await;
    // No client certificate: the server ends the handshake.
    let anonymous = files(&p.ca, None, Some("nats.test"));
    refused(&url, &anonymous, &["alert"]).await;
    // An expired server certificate.
    let old_url = format!("tls://127.0.0.1:{}", old.port);
    let good = files(&p.ca, Some(&p.client), Some("nats.test"));
    refused(&old_url, &good, &["expired", "CN=old"]).await;
}

/// A tls:// URL on a server without TLS: refused before any credential is sent.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_without_tls_on_a_tls_url_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let p = pki(dir.path());
    let plain = nats_server(true);
    let url = format!("tls://127.0.0.1:{}", plain.port);
    refused(&url, &files(&p.ca, None, None), &["TLS"]).await;
}
