//! Connecting before the start gate. A target that is not reachable yet — a Service whose
//! endpoint is not programmed, a name that does not resolve yet, a server restarting — is
//! retried with jittered exponential backoff until the connect window ends, then reported as a
//! structured [`TargetUnreachable`]. Never used once the gate has opened: a disconnect inside
//! the measured window is counted by the driver, not retried.
use std::future::Future;
use std::hash::{BuildHasher, Hasher};
use std::time::Duration;
use tokio::time::Instant;

/// Default connect window (`connectTimeoutSeconds`, `--connect-timeout-seconds`).
pub const DEFAULT_CONNECT_TIMEOUT: Duration =
    Duration::from_secs(runner_api::agent::DEFAULT_CONNECT_TIMEOUT_SECONDS as u64);
const FIRST_BACKOFF: Duration = Duration::from_millis(100);
const MAX_BACKOFF: Duration = Duration::from_secs(2);

/// The target did not accept a connection within the connect window.
#[derive(Clone, Debug, PartialEq)]
pub struct TargetUnreachable {
    pub url: String,
    pub attempts: u32,
    pub waited: Duration,
    pub window: Duration,
    pub last_error: String,
}

impl std::fmt::Display for TargetUnreachable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "target {} unreachable: {} connect attempt(s) over {:.1}s failed \
             (connectTimeoutSeconds {}); last error: {}",
            self.url,
            self.attempts,
            self.waited.as_secs_f64(),
            self.window.as_secs(),
            self.last_error
        )
    }
}

impl std::error::Error for TargetUnreachable {}

/// One run's connect phase: every connection made before the gate shares its deadline, so a
/// target that never comes up costs the window once, not once per connection.
#[derive(Clone, Debug)]
pub struct ConnectWindow {
    url: String,
    window: Duration,
    started: Instant,
}

impl ConnectWindow {
    pub fn new(url: &str, window: Duration) -> Self {
        ConnectWindow {
            url: url.to_string(),
            window,
            started: Instant::now(),
        }
    }

    /// Runs `attempt` until it succeeds, fails with an error that is not transient (returned
    /// as is), or the window ends (a [`TargetUnreachable`] naming the last error). Always makes
    /// at least one attempt; an attempt in flight at the deadline is bounded by the driver's
    /// own connect timeout.
    pub async fn retry<T, F, Fut>(&self, mut attempt: F) -> anyhow::Result<T>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = anyhow::Result<T>>,
    {
        let deadline = self.started + self.window;
        let mut backoff = FIRST_BACKOFF;
        let mut attempts = 0u32;
        loop {
            attempts += 1;
            let e = match attempt().await {
                Ok(v) => return Ok(v),
                Err(e) if !is_transient(&e) => return Err(e),
                Err(e) => e,
            };
            let now = Instant::now();
            if now >= deadline {
                return Err(anyhow::Error::new(TargetUnreachable {
                    url: self.url.clone(),
                    attempts,
                    waited: self.started.elapsed(),
                    window: self.window,
                    last_error: first_line(&e),
                }));
            }
            tracing::info!(url = %self.url, attempt = attempts, error = %first_line(&e),
                "target not reachable yet; retrying");
            // The last attempt is made at the deadline, not a backoff before it.
            tokio::time::sleep(jittered(backoff).min(deadline - now)).await;
            backoff = (backoff * 2).min(MAX_BACKOFF);
        }
    }
}

/// Between half and all of `d` (runners that start together do not retry in lockstep).
fn jittered(d: Duration) -> Duration {
    let r = std::collections::hash_map::RandomState::new()
        .build_hasher()
        .finish();
    d / 2 + d.mul_f64((r % 1000) as f64 / 2000.0)
}

fn first_line(e: &anyhow::Error) -> String {
    let s = format!("{e:#}");
    s.lines().next().unwrap_or("").chars().take(300).collect()
}

/// Errors that a target coming up or coming back cures: refused, reset, unresolvable name,
/// unreachable network, a connection closed or timed out during the handshake. A refusal by
/// the protocol itself (authorisation, a wrong path, a missing stream) is not one, nor is a
/// [`TargetRefused`](crate::refusal::TargetRefused) (credentials, TLS, protocol version),
/// whatever its text says.
pub fn is_transient(e: &anyhow::Error) -> bool {
    use std::io::ErrorKind as K;
    if crate::refusal::refusal_of(e).is_some() {
        return false;
    }
    let io_transient = e.chain().any(|c| {
        c.downcast_ref::<std::io::Error>().is_some_and(|io| {
            matches!(
                io.kind(),
                K::ConnectionRefused
                    | K::ConnectionReset
                    | K::ConnectionAborted
                    | K::NotConnected
                    | K::BrokenPipe
                    | K::TimedOut
                    | K::UnexpectedEof
                    | K::AddrNotAvailable
                    | K::HostUnreachable
                    | K::NetworkUnreachable
            )
        })
    });
    if io_transient {
        return true;
    }
    // Most clients flatten their io::Error into text: match the message.
    let text = format!("{e:#}").to_ascii_lowercase();
    const PATTERNS: &[&str] = &[
        "connection refused",
        "connection reset",
        "connection aborted",
        "connection closed",
        "broken pipe",
        "timed out",
        "within 10 s",
        "failed to lookup address",
        "name or service not known",
        "temporary failure in name resolution",
        "no address associated",
        "dns error",
        "no route to host",
        "network is unreachable",
        "host is unreachable",
        "unexpected eof",
        // JetStream while a server restarts or a peer catches up (a stream created right after
        // a JetStreamCluster turns Ready, or after a fault killed one of its servers).
        "no suitable peers for placement",
        "peer offline",
        "jetstream system temporarily unavailable",
    ];
    PATTERNS.iter().any(|p| text.contains(p))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU32, Ordering};

    #[test]
    fn refusals_and_name_failures_are_transient_protocol_refusals_are_not() {
        let io = |k| anyhow::Error::new(std::io::Error::from(k));
        assert!(is_transient(&io(std::io::ErrorKind::ConnectionRefused)));
        assert!(is_transient(
            &io(std::io::ErrorKind::ConnectionReset).context("subscriber 0")
        ));
        for text in [
            "connect to nats://js3.ns.svc:4222: IO error: Connection refused (os error 111)",
            "connect to ws://pss.ns.svc:8080/ws: IO error: failed to lookup address information: Name or service not known",
            "connect to mqtt://b:1883: no CONNACK within 10 s",
            "connect to ws://x/: timed out",
            "creating stream \"MSGBENCH\" (replicas 3, File): insufficient resources: \
             no suitable peers for placement, peer offline",
            "creating stream: jetstream system temporarily unavailable",
        ] {
            assert!(is_transient(&anyhow::anyhow!("{text}")), "{text}");
        }
        // A refusal is never retried, even when its words look like a lost connection.
        let tls = crate::refusal::TargetRefused::tls(
            "mqtts://b:8883",
            "the server closed the connection during the TLS handshake (unexpected eof)",
        );
        assert!(!is_transient(
            &anyhow::Error::new(tls).context("subscriber 0")
        ));
        for text in [
            "socket.io connect refused: 44{\"message\":\"no\"}",
            "connect to nats://x:4222: handshake: -ERR 'Authorization Violation'",
            "jetstream.stream \"NOPE\": cannot use it: stream not found",
            "connect to ws://x/ws: HTTP error: 404 Not Found",
        ] {
            assert!(!is_transient(&anyhow::anyhow!("{text}")), "{text}");
        }
    }

    #[test]
    fn jitter_stays_within_half_and_all_of_the_backoff() {
        for _ in 0..100 {
            let j = jittered(Duration::from_millis(800));
            assert!(j >= Duration::from_millis(400) && j <= Duration::from_millis(800));
        }
    }

    /// A listener that starts accepting only after a delay: the connect succeeds within the
    /// window, after several refused attempts.
    #[tokio::test]
    async fn a_target_that_comes_up_late_is_waited_for() {
        let port = {
            let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            l.local_addr().unwrap().port()
        };
        let addr = format!("127.0.0.1:{port}");
        let server = tokio::spawn({
            let addr = addr.clone();
            async move {
                tokio::time::sleep(Duration::from_millis(700)).await;
                let l = tokio::net::TcpListener::bind(&addr).await.unwrap();
                let (_s, _) = l.accept().await.unwrap();
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
        });
        let attempts = AtomicU32::new(0);
        let w = ConnectWindow::new(&format!("tcp://{addr}"), Duration::from_secs(10));
        let t = std::time::Instant::now();
        let s = w
            .retry(|| {
                attempts.fetch_add(1, Ordering::SeqCst);
                let addr = addr.clone();
                async move { Ok(tokio::net::TcpStream::connect(addr).await?) }
            })
            .await
            .expect("connects once the listener is up");
        drop(s);
        let n = attempts.load(Ordering::SeqCst);
        assert!(
            n >= 3,
            "only {n} attempts: the listener was not late enough"
        );
        assert!(t.elapsed() < Duration::from_secs(5), "{:?}", t.elapsed());
        server.abort();
    }

    /// A port nobody listens on: fails after about the window, naming the URL, the attempts
    /// and the last error.
    #[tokio::test]
    async fn a_port_that_never_accepts_fails_after_the_window() {
        let port = {
            let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            l.local_addr().unwrap().port()
        };
        let window = Duration::from_millis(1500);
        let w = ConnectWindow::new(&format!("nats://127.0.0.1:{port}"), window);
        let t = std::time::Instant::now();
        let e = w
            .retry(|| async move { Ok(tokio::net::TcpStream::connect(("127.0.0.1", port)).await?) })
            .await
            .expect_err("nothing listens");
        let took = t.elapsed();
        assert!(
            took >= window && took <= window + Duration::from_millis(500),
            "{took:?}"
        );
        let u = e.downcast_ref::<TargetUnreachable>().expect("structured");
        assert_eq!(u.url, format!("nats://127.0.0.1:{port}"));
        assert!(u.attempts >= 5, "{u:?}");
        assert!(u.last_error.to_lowercase().contains("refused"), "{u:?}");
        let shown = e.to_string();
        assert!(
            shown.contains("connect attempt(s)") && shown.contains("last error"),
            "{shown}"
        );
    }

    /// Errors that retrying cannot cure are returned at once.
    #[tokio::test]
    async fn a_protocol_refusal_is_not_retried() {
        let attempts = AtomicU32::new(0);
        let w = ConnectWindow::new("nats://x:4222", Duration::from_secs(10));
        let e = w
            .retry(|| {
                attempts.fetch_add(1, Ordering::SeqCst);
                async { Err::<(), _>(anyhow::anyhow!("-ERR 'Authorization Violation'")) }
            })
            .await
            .unwrap_err();
        assert_eq!(attempts.load(Ordering::SeqCst), 1);
        assert!(e.downcast_ref::<TargetUnreachable>().is_none());
    }
}
