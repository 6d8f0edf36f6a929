//! NATS over TLS (`tls://`): both core-NATS client paths and JetStream verify the server's
//! certificate with the CA they are given and send their credentials inside TLS; without that
//! CA the run fails before any load, saying why (TargetTLSFailed). Client certificates and
//! server names: `nats_mtls.rs`.
mod support;
use bench_runner::{run, RunOptions};
use rcgen::{BasicConstraints, CertificateParams, IsCa, KeyPair};
use runner_api::target::Credentials;
use std::path::{Path, PathBuf};
use std::time::Duration;
use support::*;

const TOKEN: &str = "tls-token";
const JS: &str = "protocol: jetstream\nratePerPublisher: 500\nmessagesPerPublisher: 200\njetstream: {stream: tls, storage: memory}\n";

/// A CA and a certificate it signs for `localhost`, written as PEM files into `dir`:
/// (ca.crt, tls.crt, tls.key).
fn certificates(dir: &Path) -> (PathBuf, PathBuf, PathBuf) {
    let mut ca = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let ca_key = KeyPair::generate().unwrap();
    let ca_cert = ca.self_signed(&ca_key).unwrap();
    let key = KeyPair::generate().unwrap();
    let cert = CertificateParams::new(vec!["localhost".to_string()])
        .unwrap()
        .signed_by(&key, &ca_cert, &ca_key)
        .unwrap();
    let files = (dir.join("ca.crt"), dir.join("tls.crt"), dir.join("tls.key"));
    std::fs::write(&files.0, ca_cert.pem()).unwrap();
    std::fs::write(&files.1, cert.pem()).unwrap();
    std::fs::write(&files.2, key.serialize_pem()).unwrap();
    files
}

/// A nats-server on a free port that takes TLS only, with the certificate `certificates`
/// writes and the token: (its directory, ca.crt, port, the server).
fn tls_nats_server(jetstream: bool) -> (tempfile::TempDir, PathBuf, u16, Server) {
    let dir = tempfile::tempdir().unwrap();
    let (ca, cert, key) = certificates(dir.path());
    let port = free_port();
    let (cert, key) = (cert.to_str().unwrap(), key.to_str().unwrap());
    let args = ["--tls", "--tlscert", cert, "--tlskey", key, "--auth", TOKEN];
    let server = nats_server_with(port, jetstream, &args);
    (dir, ca, port, server)
}

fn opts(ca_file: Option<PathBuf>) -> RunOptions {
    RunOptions {
        runner_id: 4,
        connect_timeout: Duration::from_secs(2),
        credentials: Some(Credentials::Token(TOKEN.into())),
        tls: bench_runner::tls::TlsFiles {
            ca_file,
            ..Default::default()
        },
        ..Default::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tls_server_is_benchmarked_with_its_ca_and_refused_without() {
    let (_dir, ca, port, _s) = tls_nats_server(true);
    let url = format!("tls://localhost:{port}");
    let r = run(workload(JS), &url, opts(Some(ca))).await.unwrap();
    assert_eq!(r.measured.received, 200);

    // The public roots do not know this CA: the handshake fails, naming the certificate.
    let err = run(workload(JS), &url, opts(None)).await.unwrap_err();
    let e = format!("{err:#}");
    assert!(e.to_lowercase().contains("certificate"), "{e}");
    assert!(!e.contains(TOKEN), "the token is never in an error: {e}");
    assert_eq!(
        bench_runner::termination::of(&err).reason,
        runner_api::termination::RunnerGaveUp::TargetTLSFailed
    );
}

/// Core NATS over TLS on either client path (the batched wire path speaks TLS too): the target
/// is benchmarked, every message delivered.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tls_core_nats_target_is_benchmarked_on_both_client_paths() {
    for client in [
        bench_runner::ClientPath::Library,
        bench_runner::ClientPath::Wire,
    ] {
        tls_core_nats(client).await;
    }
}

async fn tls_core_nats(client: bench_runner::ClientPath) {
    let (_dir, ca, port, _s) = tls_nats_server(false);
    let yaml = "protocol: nats\nsubscribers: 1\nratePerPublisher: 500\nmessagesPerPublisher: 200\n";
    let o = RunOptions {
        client,
        ..opts(Some(ca))
    };
    let r = run(workload(yaml), &format!("tls://localhost:{port}"), o)
        .await
        .unwrap();
    assert_eq!((r.measured.published, r.measured.received), (200, 200));
    assert!(r.measured.errors.is_empty(), "{:?}", r.measured.errors);
}
