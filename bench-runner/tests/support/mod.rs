//! Real servers on loopback for integration tests: started on free ports, waited on until they
//! accept connections, killed (by their own pid) on drop.
#![allow(dead_code)]
pub mod gateway;
pub mod nats_jwt;
pub mod pki;
pub mod victim;
use runner_api::control_auth::{Claim, ControlSigner, ControlVerifier, NONCE_BYTES};
use std::net::{SocketAddr, TcpListener};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Finds a tool on PATH or in the msgbench cache, or panics saying how to install it. The cache
/// as e2e/contract.env has it: MSGBENCH_CACHE (the Makefile exports it; empty is unset), else
/// ~/.cache/msgbench.
pub fn tool(name: &str) -> PathBuf {
    let cache = match std::env::var("MSGBENCH_CACHE") {
        Ok(c) if !c.is_empty() => PathBuf::from(c),
        _ => PathBuf::from(std::env::var("HOME").unwrap_or_default()).join(".cache/msgbench"),
    };
    let mut dirs: Vec<PathBuf> =
        std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default()).collect();
    dirs.extend([cache.join("bin"), "/usr/sbin".into(), "/usr/bin".into()]);
    dirs.into_iter().map(|d| d.join(name)).find(|p| p.is_file()).unwrap_or_else(|| {
        panic!("{name} not found on PATH or in {}/bin: run `e2e/tools/ensure nats-server mosquitto sockudo`", cache.display())
    })
}

/// A port nothing listens on now, never handed out before in this process: the tests of one
/// binary run in parallel, and the kernel readily gives a just-released port to the next asker
/// (a 3-server cluster once failed to start on a port another test had just been given).
pub fn free_port() -> u16 {
    static GIVEN: std::sync::Mutex<Vec<u16>> = std::sync::Mutex::new(Vec::new());
    let mut given = GIVEN.lock().unwrap_or_else(|e| e.into_inner());
    loop {
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        if !given.contains(&port) {
            given.push(port);
            return port;
        }
    }
}

/// Waits until something accepts TCP connections on `port` (or panics after `limit`).
pub fn wait_listening(port: u16, limit: Duration, child: &mut Child) {
    if let Err(e) = try_wait_listening(port, limit, child) {
        panic!("{e}");
    }
}

/// `wait_listening`, saying why not instead of panicking.
pub fn try_wait_listening(port: u16, limit: Duration, child: &mut Child) -> Result<(), String> {
    let addr: SocketAddr = ([127, 0, 0, 1], port).into();
    let t = Instant::now();
    while t.elapsed() < limit {
        if std::net::TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_ok() {
            return Ok(());
        }
        if let Ok(Some(status)) = child.try_wait() {
            return Err(format!("server on port {port} exited early: {status}"));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    Err(format!(
        "nothing listening on 127.0.0.1:{port} after {limit:?}"
    ))
}

pub struct Server {
    pub child: Child,
    pub port: u16,
    pub _dir: tempfile::TempDir,
}

impl Server {
    pub fn pid(&self) -> u32 {
        self.child.id()
    }
    /// SIGSTOP / SIGCONT this server (our own child, by pid).
    pub fn signal(&self, sig: &str) {
        signal(self.pid(), sig);
    }
}

/// Sends `sig` to `pid` (a server this test started).
pub fn signal(pid: u32, sig: &str) {
    let ok = Command::new("kill")
        .arg(format!("-{sig}"))
        .arg(pid.to_string())
        .status()
        .unwrap();
    assert!(ok.success(), "kill -{sig} {pid}");
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = Command::new("kill")
            .arg("-CONT")
            .arg(self.child.id().to_string())
            .status();
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub fn nats_server(jetstream: bool) -> Server {
    nats_server_at(free_port(), jetstream)
}

/// A nats-server on a given port (e.g. to bring one back where another was killed).
pub fn nats_server_at(port: u16, jetstream: bool) -> Server {
    nats_server_with(port, jetstream, &[])
}

/// A nats-server with extra arguments (e.g. `--auth TOKEN`, `--user U --pass P`).
pub fn nats_server_with(port: u16, jetstream: bool, extra: &[&str]) -> Server {
    let dir = tempfile::tempdir().unwrap();
    let mut cmd = Command::new(tool("nats-server"));
    cmd.args(["-a", "127.0.0.1", "-p", &port.to_string()]);
    cmd.args(extra);
    if jetstream {
        cmd.args(["-js", "-sd", dir.path().to_str().unwrap()]);
    }
    let mut child = cmd
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    wait_listening(port, Duration::from_secs(15), &mut child);
    Server {
        child,
        port,
        _dir: dir,
    }
}

/// Messages the server has taken in so far (`in_msgs` of `/varz` on monitoring port `monitor`).
pub fn in_msgs(monitor: u16) -> Option<u64> {
    let body = http_body(monitor, "/varz")?;
    let v: serde_json::Value = serde_json::from_str(&body).ok()?;
    v["in_msgs"].as_u64()
}

/// `in_msgs` once the monitoring port answers (it may open after the client port).
pub fn in_msgs_when_up(monitor: u16) -> u64 {
    for _ in 0..1000 {
        match in_msgs(monitor) {
            Some(n) => return n,
            None => std::thread::sleep(Duration::from_millis(10)),
        }
    }
    panic!("no /varz on monitoring port {monitor} within 10 s")
}

/// Waits until the server has taken in more than `before` messages: the run's first stage has
/// begun. A timer started here does not depend on how long the runner took to connect.
pub fn wait_for_traffic(monitor: u16, before: u64, limit: Duration) {
    let deadline = std::time::Instant::now() + limit;
    while in_msgs(monitor).unwrap_or(0) <= before {
        assert!(
            std::time::Instant::now() < deadline,
            "no message reached the server within {limit:?}"
        );
        std::thread::sleep(Duration::from_millis(2));
    }
}

/// Three JetStream servers clustered over loopback routes; returns once every server's
/// `/healthz` answers 200 (JetStream up with a meta leader), so streams with replicas 3 can be
/// created at once.
pub fn nats_cluster() -> Vec<Server> {
    // A port taken meanwhile by another test's client socket makes a server exit at start:
    // start the cluster again on fresh ports (bounded).
    let mut last = String::new();
    for _ in 0..3 {
        match try_nats_cluster() {
            Ok(servers) => return servers,
            Err(e) => last = e,
        }
    }
    panic!("a 3-server cluster did not start in 3 attempts: {last}");
}

fn try_nats_cluster() -> Result<Vec<Server>, String> {
    let ports: Vec<(u16, u16, u16)> = (0..3)
        .map(|_| (free_port(), free_port(), free_port()))
        .collect();
    let routes: Vec<String> = ports
        .iter()
        .map(|(_, c, _)| format!("nats://127.0.0.1:{c}"))
        .collect();
    let servers: Vec<Server> = ports
        .iter()
        .enumerate()
        .map(|(i, &(port, cluster, monitor))| -> Result<Server, String> {
            let dir = tempfile::tempdir().unwrap();
            let mut child = Command::new(tool("nats-server"))
                .args(["-a", "127.0.0.1", "-p", &port.to_string()])
                .args(["-m", &monitor.to_string(), "-n", &format!("js-{i}")])
                .args(["-js", "-sd", dir.path().to_str().unwrap()])
                .args(["--cluster_name", "msgbench-test"])
                .args(["--cluster", &format!("nats://127.0.0.1:{cluster}")])
                .args(["--routes", &routes.join(",")])
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .unwrap();
            // Dropped on an error, the servers started so far are killed.
            let started = try_wait_listening(port, Duration::from_secs(15), &mut child);
            let server = Server {
                child,
                port,
                _dir: dir,
            };
            started.map(|()| server)
        })
        .collect::<Result<_, _>>()?;
    // Healthy and agreeing on a meta leader with all three peers: a stream with replicas 3
    // created before that fails with "no suitable peers for placement". A loaded machine (the
    // e2e suite alongside) takes well over 30 s to get there.
    let t = Instant::now();
    for &(_, _, monitor) in &ports {
        while !(http_status(monitor, "/healthz") == Some(200) && meta_formed(monitor, 3)) {
            assert!(
                t.elapsed() < Duration::from_secs(120),
                "JetStream cluster not formed after 120 s (monitor port {monitor})"
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    }
    // ... and the meta leader sees both other peers current and online: agreeing on a leader
    // is not enough (a CI run failed with "no suitable peers for placement, peer offline").
    while !ports.iter().any(|&(_, _, m)| peers_current(m, 2)) {
        assert!(
            t.elapsed() < Duration::from_secs(120),
            "JetStream meta leader does not see its 2 peers current after 120 s"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    Ok(servers)
}

/// `/jsz` names a meta leader and `peers` cluster members.
fn meta_formed(monitor: u16, peers: usize) -> bool {
    let Some(body) = http_body(monitor, "/jsz") else {
        return false;
    };
    let Ok(v) = serde_json::from_str::<serde_json::Value>(&body) else {
        return false;
    };
    let meta = &v["meta_cluster"];
    meta["leader"].as_str().is_some_and(|l| !l.is_empty())
        && meta["cluster_size"].as_u64() == Some(peers as u64)
}

/// Whether this server is the meta leader and lists `others` peers, all current and online
/// (only the leader's `/jsz` carries `meta_cluster.replicas`).
fn peers_current(monitor: u16, others: usize) -> bool {
    let Some(v) =
        http_body(monitor, "/jsz").and_then(|b| serde_json::from_str::<serde_json::Value>(&b).ok())
    else {
        return false;
    };
    v["meta_cluster"]["replicas"].as_array().is_some_and(|r| {
        r.len() == others
            && r.iter()
                .all(|p| p["current"] == true && p["offline"].as_bool() != Some(true))
    })
}

/// Body of a plain HTTP GET on loopback, None when nothing answers.
fn http_body(port: u16, path: &str) -> Option<String> {
    use std::io::{Read, Write};
    let addr: SocketAddr = ([127, 0, 0, 1], port).into();
    let mut s = std::net::TcpStream::connect_timeout(&addr, Duration::from_millis(500)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(2))).ok()?;
    write!(s, "GET {path} HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n").ok()?;
    let mut text = String::new();
    s.read_to_string(&mut text).ok()?;
    Some(text.split_once("\r\n\r\n")?.1.to_string())
}

/// Status code of a plain HTTP GET on loopback, None when nothing answers.
fn http_status(port: u16, path: &str) -> Option<u16> {
    use std::io::{Read, Write};
    let addr: SocketAddr = ([127, 0, 0, 1], port).into();
    let mut s = std::net::TcpStream::connect_timeout(&addr, Duration::from_millis(500)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(2))).ok()?;
    write!(s, "GET {path} HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n").ok()?;
    let mut head = [0u8; 12];
    s.read_exact(&mut head).ok()?;
    std::str::from_utf8(&head[9..12]).ok()?.parse().ok()
}

/// Starts `server` (a tool) with `-c config` and waits until it listens on `port`; `dir` (which
/// holds the config and anything else it needs) lives as long as the server.
pub fn serve_with_config(
    server: &str,
    port: u16,
    dir: tempfile::TempDir,
    config: &std::path::Path,
) -> Server {
    let mut child = Command::new(tool(server))
        .arg("-c")
        .arg(config)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    wait_listening(port, Duration::from_secs(15), &mut child);
    Server {
        child,
        port,
        _dir: dir,
    }
}

pub fn mosquitto() -> Server {
    mosquitto_at(free_port())
}

/// A mosquitto on `port` (also: the same broker restarted, empty, after a kill).
pub fn mosquitto_at(port: u16) -> Server {
    let dir = tempfile::tempdir().unwrap();
    let conf = dir.path().join("mosquitto.conf");
    std::fs::write(
        &conf,
        format!(
            "listener {port} 127.0.0.1\nallow_anonymous true\npersistence false\nmax_queued_messages 100000\nmax_inflight_messages 0\nuser root\n"
        ),
    )
    .unwrap();
    serve_with_config("mosquitto", port, dir, &conf)
}

/// A mosquitto that refuses anonymous clients: its one user `user` with `password`, hashed into
/// a password file by mosquitto_passwd (as the broker pod's init container does).
pub fn mosquitto_with_login(user: &str, password: &str) -> Server {
    let (port, dir) = (free_port(), tempfile::tempdir().unwrap());
    let passwd = dir.path().join("passwd");
    let made = Command::new(tool("mosquitto_passwd"))
        .args(["-b", "-c"])
        .arg(&passwd)
        .args([user, password])
        .status()
        .unwrap();
    assert!(made.success(), "mosquitto_passwd: {made}");
    let conf = dir.path().join("mosquitto.conf");
    std::fs::write(
        &conf,
        format!(
            "listener {port} 127.0.0.1\nallow_anonymous false\npassword_file {}\npersistence false\nmax_queued_messages 100000\nuser root\n",
            passwd.display()
        ),
    )
    .unwrap();
    serve_with_config("mosquitto", port, dir, &conf)
}

/// A TCP proxy adding `delay` to every byte in both directions (bandwidth unchanged).
pub async fn delay_proxy(upstream: u16, delay: Duration) -> u16 {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = l.local_addr().unwrap().port();
    tokio::spawn(async move {
        while let Ok((down, _)) = l.accept().await {
            let Ok(up) = tokio::net::TcpStream::connect(("127.0.0.1", upstream)).await else {
                continue;
            };
            let (dr, dw) = down.into_split();
            let (ur, uw) = up.into_split();
            for (mut r, mut w) in [
                (
                    Box::new(dr) as Box<dyn tokio::io::AsyncRead + Send + Unpin>,
                    Box::new(uw) as Box<dyn tokio::io::AsyncWrite + Send + Unpin>,
                ),
                (Box::new(ur), Box::new(dw)),
            ] {
                let (tx, mut rx) =
                    tokio::sync::mpsc::unbounded_channel::<(tokio::time::Instant, Vec<u8>)>();
                tokio::spawn(async move {
                    let mut buf = vec![0u8; 64 * 1024];
                    while let Ok(n) = r.read(&mut buf).await {
                        if n == 0
                            || tx
                                .send((tokio::time::Instant::now() + delay, buf[..n].to_vec()))
                                .is_err()
                        {
                            break;
                        }
                    }
                });
                tokio::spawn(async move {
                    while let Some((due, chunk)) = rx.recv().await {
                        tokio::time::sleep_until(due).await;
                        if w.write_all(&chunk).await.is_err() {
                            break;
                        }
                    }
                });
            }
        }
    });
    port
}

/// A WebSocket echo server (tokio-tungstenite), for the websocket driver.
pub async fn ws_echo_server() -> u16 {
    use futures::{SinkExt, StreamExt};
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = l.local_addr().unwrap().port();
    tokio::spawn(async move {
        while let Ok((s, _)) = l.accept().await {
            tokio::spawn(async move {
                let Ok(mut ws) = tokio_tungstenite::accept_async(s).await else {
                    return;
                };
                while let Some(Ok(m)) = ws.next().await {
                    if (m.is_binary() || m.is_text()) && ws.send(m).await.is_err() {
                        break;
                    }
                }
            });
        }
    });
    port
}

pub fn workload(yaml: &str) -> msgbench_crds::workload::Workload {
    serde_norway::from_str(yaml).unwrap_or_else(|e| panic!("test workload: {e}\n{yaml}"))
}

/// A WebSocket server sending every frame to every connection (like pubsub-server's
/// WS_MODE=broadcast).
pub async fn ws_broadcast_server() -> u16 {
    use futures::{SinkExt, StreamExt};
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = l.local_addr().unwrap().port();
    let (tx, _) =
        tokio::sync::broadcast::channel::<tokio_tungstenite::tungstenite::Message>(1 << 16);
    tokio::spawn(async move {
        while let Ok((s, _)) = l.accept().await {
            let tx = tx.clone();
            tokio::spawn(async move {
                let Ok(ws) = tokio_tungstenite::accept_async(s).await else {
                    return;
                };
                let (mut w, mut r) = ws.split();
                let mut rx = tx.subscribe();
                let fwd = tokio::spawn(async move {
                    while let Ok(m) = rx.recv().await {
                        if w.send(m).await.is_err() {
                            break;
                        }
                    }
                });
                while let Some(Ok(m)) = r.next().await {
                    if m.is_binary() || m.is_text() {
                        let _ = tx.send(m);
                    }
                }
                fwd.abort();
            });
        }
    });
    port
}

/// The test app sockudo serves (`sockudo_at`).
pub const PUSHER_APP: (&str, &str, &str) = ("msgbench", "msgbench-key", "msgbench-secret");

/// A sockudo (Pusher Channels) on `port` with one app, `PUSHER_APP`, and nothing external:
/// in-memory adapter, cache and app manager, no webhook queue; limits and rate limiting off,
/// which would otherwise cap a benchmark at 100 connections and 100 API requests a minute.
pub fn sockudo_at(port: u16) -> Server {
    let dir = tempfile::tempdir().unwrap();
    let (id, key, secret) = PUSHER_APP;
    let port_s = port.to_string();
    let mut child = Command::new(tool("sockudo"))
        // No config/config.toml under the temporary working directory: environment only.
        .current_dir(dir.path())
        .envs([
            ("HOST", "127.0.0.1"),
            ("PORT", port_s.as_str()),
            ("SOCKUDO_DEFAULT_APP_ID", id),
            ("SOCKUDO_DEFAULT_APP_KEY", key),
            ("SOCKUDO_DEFAULT_APP_SECRET", secret),
            ("SOCKUDO_DEFAULT_APP_MAX_CONNECTIONS", "0"),
            ("ADAPTER_DRIVER", "local"),
            ("CACHE_DRIVER", "memory"),
            ("QUEUE_DRIVER", "none"),
            ("APP_MANAGER_DRIVER", "memory"),
            ("RATE_LIMITER_ENABLED", "false"),
            ("METRICS_ENABLED", "false"),
        ])
        .stdout(Stdio::null())
        // Kept: its warnings are the only record of what it dropped (`sockudo_dropped`).
        .stderr(std::fs::File::create(dir.path().join(SOCKUDO_LOG)).unwrap())
        .spawn()
        .unwrap();
    wait_listening(port, Duration::from_secs(15), &mut child);
    Server {
        child,
        port,
        _dir: dir,
    }
}

const SOCKUDO_LOG: &str = "sockudo.log";

/// Deliveries a `sockudo_at` server dropped so far. sockudo queues at most 1000 messages per
/// connection (WEBSOCKET_MAX_MESSAGES); past that the local adapter logs "Client buffer full
/// (message limit: 1000), disconnecting slow consumer" once per dropped message and keeps the
/// connection, so the subscriber never learns of the gap.
pub fn sockudo_dropped(server: &Server) -> u64 {
    let log = std::fs::read_to_string(server._dir.path().join(SOCKUDO_LOG)).unwrap_or_default();
    dropped_in_sockudo_log(&log)
}

pub fn dropped_in_sockudo_log(log: &str) -> u64 {
    log.lines()
        .filter(|l| l.contains("Client buffer full"))
        .count() as u64
}

/// Wall-clock milliseconds since the Unix epoch (the agents' start times are in these).
pub fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}

/// An agent's `GET /progress`, which must answer 200.
pub async fn progress(addr: SocketAddr) -> runner_api::agent::AgentProgress {
    let (code, body) = http(addr, "GET", "/progress", "").await;
    assert_eq!(code, 200);
    serde_json::from_str(&body).expect("progress json")
}

/// The scope (run or server uid) of every agent a test starts with [`test_verifier`].
pub const TEST_SCOPE: &str = "run-uid-1";

/// The operator's key in these tests.
pub fn test_signer() -> ControlSigner {
    ControlSigner::from_seed([9; 32])
}

/// What an agent checks credentials with: the test key, for [`TEST_SCOPE`]. Agents never run
/// without one.
pub fn test_verifier() -> ControlVerifier {
    ControlVerifier::new(&test_signer().public_keys(), TEST_SCOPE).unwrap()
}

/// A credential for one request, as the operator signs it: now, with a nonce never used
/// before in this process.
pub fn credential(signer: &ControlSigner, scope: &str, method: &str, path: &str) -> String {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    let mut nonce = [0u8; NONCE_BYTES];
    nonce[..8].copy_from_slice(&n.to_be_bytes());
    nonce[8..12].copy_from_slice(&std::process::id().to_be_bytes());
    let claim = Claim {
        scope,
        method,
        path,
    };
    signer.credential(&claim, now_ms() / 1000, nonce)
}

/// Minimal HTTP/1.1 exchange (Connection: close) as the operator makes it, with a fresh
/// credential of the test key for [`TEST_SCOPE`] and this request: (status, body).
pub async fn http(addr: SocketAddr, method: &str, path: &str, body: &str) -> (u16, String) {
    let c = credential(&test_signer(), TEST_SCOPE, method, path);
    http_as(addr, Some(&c), method, path, body).await
}

/// The same without a credential (`/ready`, or to see one refused).
pub async fn http_open(addr: SocketAddr, method: &str, path: &str, body: &str) -> (u16, String) {
    http_as(addr, None, method, path, body).await
}

/// The same, presenting `token` as a Bearer token when given.
pub async fn http_as(
    addr: SocketAddr,
    token: Option<&str>,
    method: &str,
    path: &str,
    body: &str,
) -> (u16, String) {
    let mut s = tokio::net::TcpStream::connect(addr).await.expect("connect");
    let auth = token.map_or(String::new(), |t| format!("Authorization: Bearer {t}\r\n"));
    let req = format!(
        "{method} {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n{auth}Content-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    tokio::io::AsyncWriteExt::write_all(&mut s, req.as_bytes())
        .await
        .expect("write");
    let mut out = String::new();
    tokio::io::AsyncReadExt::read_to_string(&mut s, &mut out)
        .await
        .expect("read");
    let status = out[9..12].parse().expect("status code");
    let body = out.split_once("\r\n\r\n").map_or("", |x| x.1).to_string();
    (status, body)
}

/// Serves a fault agent on a free loopback port.
pub async fn serve_fault_agent(
    agent: std::sync::Arc<bench_runner::fault_agent::FaultAgent>,
) -> SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let app = bench_runner::fault_agent::router(agent);
    tokio::spawn(async move { axum::serve(listener, app).await });
    addr
}
