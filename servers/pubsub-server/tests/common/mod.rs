//! Test harness: starts the real `pubsub-server` binary on a free port (PORT=0, the port is read
//! from its "listening on" line), talks HTTP with hyper and Socket.IO through real clients (python-socketio, Node socket.io-client).
#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdout, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use serde_json::Value;

pub const STARTUP: Duration = Duration::from_secs(30);

pub struct Server {
    pub child: Child,
    pub base: String,
    pub port: u16,
}

/// Reads lines from a child's stdout on a thread so waits can time out.
fn line_reader(out: ChildStdout) -> mpsc::Receiver<String> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(out).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    rx
}

fn wait_line(
    rx: &mpsc::Receiver<String>,
    pred: impl Fn(&str) -> bool,
    timeout: Duration,
) -> String {
    let deadline = Instant::now() + timeout;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match rx.recv_timeout(left) {
            Ok(l) if pred(&l) => return l,
            Ok(_) => continue,
            Err(e) => panic!("no matching line within {timeout:?}: {e}"),
        }
    }
}

impl Server {
    pub fn start(env: &[(&str, &str)]) -> Server {
        Self::start_with_stderr(env, Stdio::inherit())
    }

    /// `start`, with the server's log (stderr) going to `stderr`.
    pub fn start_with_stderr(env: &[(&str, &str)], stderr: Stdio) -> Server {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_pubsub-server"));
        cmd.env("PORT", "0")
            .env("BIND_ADDRESS", "127.0.0.1")
            .env("RUST_LOG", "warn")
            .stdout(Stdio::piped())
            .stderr(stderr);
        for (k, v) in env {
            cmd.env(k, v);
        }
        let mut child = cmd.spawn().expect("start pubsub-server");
        let rx = line_reader(child.stdout.take().unwrap());
        let line = wait_line(&rx, |l| l.contains("listening on"), STARTUP);
        let base = line.rsplit(' ').next().unwrap().to_string();
        let port = base.rsplit(':').next().unwrap().parse().unwrap();
        Server { child, base, port }
    }

    pub fn url(&self, path: &str) -> String {
        format!("{}{}", self.base, path)
    }

    /// Resident set size of the server process (VmRSS from /proc), in bytes.
    pub fn rss_bytes(&self) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id()))
            .expect("read /proc/<pid>/status");
        let kb = status
            .lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .expect("VmRSS line");
        kb.trim()
            .trim_end_matches("kB")
            .trim()
            .parse::<u64>()
            .unwrap()
            * 1024
    }

    /// SIGKILL (a crash: no flush, no shutdown), and reap it.
    pub fn kill9(mut self) {
        self.child.kill().expect("SIGKILL");
        self.child.wait().expect("reap");
    }

    /// SIGTERM, then wait (bounded) for a clean exit; returns the exit status code.
    pub fn terminate(mut self) -> Option<i32> {
        let pid = self.child.id().to_string();
        let ok = Command::new("kill").args(["-TERM", &pid]).status().unwrap();
        assert!(ok.success());
        let deadline = Instant::now() + Duration::from_secs(15);
        loop {
            if let Some(st) = self.child.try_wait().unwrap() {
                return st.code();
            }
            assert!(
                Instant::now() < deadline,
                "server did not stop within 15s of SIGTERM"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub async fn http(method: &str, url: &str, body: Option<&str>) -> (u16, Value) {
    let client = Client::builder(TokioExecutor::new()).build_http::<Full<Bytes>>();
    let req = hyper::Request::builder()
        .method(method)
        .uri(url)
        .header("content-type", "application/json")
        .body(Full::new(Bytes::from(body.unwrap_or("").to_owned())))
        .unwrap();
    let res = tokio::time::timeout(Duration::from_secs(10), client.request(req))
        .await
        .expect("http timeout")
        .expect("http request");
    let status = res.status().as_u16();
    let bytes = res.into_body().collect().await.unwrap().to_bytes();
    let v = serde_json::from_slice(&bytes)
        .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&bytes).into_owned()));
    (status, v)
}

/// Like `http`, but a connection or protocol error is `None` instead of a panic (a server
/// that is being killed, a refused connection).
pub async fn try_http(method: &str, url: &str, body: Option<String>) -> Option<(u16, Value)> {
    let client = Client::builder(TokioExecutor::new()).build_http::<Full<Bytes>>();
    let req = hyper::Request::builder()
        .method(method)
        .uri(url)
        .header("content-type", "application/json")
        .body(Full::new(Bytes::from(body.unwrap_or_default())))
        .unwrap();
    let res = tokio::time::timeout(Duration::from_secs(30), client.request(req))
        .await
        .ok()?
        .ok()?;
    let status = res.status().as_u16();
    let bytes = res.into_body().collect().await.ok()?.to_bytes();
    let v = serde_json::from_slice(&bytes)
        .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&bytes).into_owned()));
    Some((status, v))
}

/// The value of an unlabelled (or fully labelled) Prometheus sample in /metrics, 0 if absent.
pub async fn metric(server: &Server, sample: &str) -> f64 {
    let text = http("GET", &server.url("/metrics"), None).await.1;
    text.as_str()
        .unwrap()
        .lines()
        .find_map(|l| l.strip_prefix(sample)?.strip_prefix(' '))
        .map_or(0.0, |v| v.trim().parse().unwrap())
}

pub async fn get(url: &str) -> Value {
    let (s, v) = http("GET", url, None).await;
    assert_eq!(s, 200, "GET {url}: {v}");
    v
}

pub async fn publish(server: &Server, topic: &str, payload: Value, publisher: Option<&str>) -> u64 {
    let body = serde_json::json!({ "topic": topic, "payload": payload, "publisher": publisher });
    let (s, v) = http("POST", &server.url("/publish"), Some(&body.to_string())).await;
    assert_eq!(s, 200, "publish: {v}");
    v["id"].as_u64().expect("id")
}

/// Polls `check` until it returns Some or the timeout passes.
pub async fn eventually<T, F, Fut>(what: &str, timeout: Duration, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(v) = check().await {
            return v;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
}

fn python_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/python")
}

/// The cached venv's python (created by tests/python/ensure-venv on first use).
pub fn python() -> String {
    static PY: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    PY.get_or_init(|| {
        let out = Command::new(python_dir().join("ensure-venv"))
            .stderr(Stdio::inherit())
            .output()
            .expect("run ensure-venv");
        assert!(out.status.success(), "ensure-venv failed");
        String::from_utf8(out.stdout).unwrap().trim().to_owned()
    })
    .clone()
}

fn node_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/node")
}

/// NODE_PATH of the cached official socket.io-client (tests/node/ensure-node on first use).
pub fn node_path() -> String {
    static NP: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    NP.get_or_init(|| {
        let out = Command::new(node_dir().join("ensure-node"))
            .stderr(Stdio::inherit())
            .output()
            .expect("run ensure-node");
        assert!(out.status.success(), "ensure-node failed");
        String::from_utf8(out.stdout).unwrap().trim().to_owned()
    })
    .clone()
}

/// Which real Socket.IO client library a subscriber process runs on (same CLI and output).
#[derive(Clone, Copy, Debug)]
pub enum SioClient {
    /// python-socketio (the seed's Flask-SocketIO compatibility promise).
    Python,
    /// The official Node socket.io-client.
    Node,
}

/// A real Socket.IO subscriber process; `subscribe` waits until the server acknowledged.
pub struct Subscriber {
    child: Child,
    lines: mpsc::Receiver<String>,
}

impl Subscriber {
    pub fn subscribe(server: &Server, topics: &[&str], expect: usize, consume: bool) -> Subscriber {
        Self::subscribe_with(SioClient::Python, server, topics, expect, consume)
    }

    pub fn subscribe_with(
        client: SioClient,
        server: &Server,
        topics: &[&str],
        expect: usize,
        consume: bool,
    ) -> Subscriber {
        let mut cmd = match client {
            SioClient::Python => {
                let mut c = Command::new(python());
                c.arg(python_dir().join("sio_subscriber.py"));
                c
            }
            SioClient::Node => {
                let mut c = Command::new("node");
                c.env("NODE_PATH", node_path())
                    .arg(node_dir().join("sio_subscriber.js"));
                c
            }
        };
        cmd.args([
            "--url",
            &server.base,
            "--expect",
            &expect.to_string(),
            "--timeout",
            "30",
        ])
        .arg("--hold")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit());
        for t in topics {
            cmd.args(["--subscribe", t]);
        }
        if consume {
            cmd.arg("--consume");
        }
        let mut child = cmd
            .spawn()
            .unwrap_or_else(|e| panic!("start {client:?} subscriber: {e}"));
        let lines = line_reader(child.stdout.take().unwrap());
        wait_line(&lines, |l| l == "READY", STARTUP);
        Subscriber { child, lines }
    }

    /// Lets the client disconnect once it has everything it expected, waits for that, and
    /// returns the messages in arrival order.
    pub fn received(mut self) -> Vec<Value> {
        drop(self.child.stdin.take());
        let deadline = Instant::now() + Duration::from_secs(40);
        let status = loop {
            if let Some(st) = self.child.try_wait().unwrap() {
                break st;
            }
            assert!(Instant::now() < deadline, "subscriber did not finish");
            std::thread::sleep(Duration::from_millis(20));
        };
        assert!(status.success(), "subscriber exited with {status}");
        // The reader thread ends at EOF, which disconnects the channel.
        let mut out = Vec::new();
        while let Ok(l) = self.lines.recv_timeout(Duration::from_secs(5)) {
            out.push(serde_json::from_str(&l).expect("json line"));
        }
        out
    }
}

impl Drop for Subscriber {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
