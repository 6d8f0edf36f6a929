//! HTTP/1 requests to pods on their IPs (runner agents, servers' monitoring endpoints): one
//! client for all of them, with a timeout over the whole exchange, a bounded response body, an
//! optional control credential signed for that very request, and errors that name the method,
//! the URL and what went wrong.
use super::control_key::RequestSigner;
use crate::runtime::merge_budget::{BudgetError, Reservation};
use http_body_util::{BodyExt, Full, LengthLimitError, Limited};
use hyper::body::{Bytes, Incoming};
use hyper::{header, Method, Request, StatusCode};
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use msgbench_operator_core::status_text::plain_bounded;
use serde::de::DeserializeOwned;
use serde::Serialize;
use std::fmt;
use std::net::SocketAddr;
use std::sync::LazyLock;
use std::time::Duration;

/// No idle connections are kept: pod IPs come and go and calls are seconds apart, and a pooled
/// connection would stay tied to the runtime that opened it.
static CLIENT: LazyLock<Client<HttpConnector, Full<Bytes>>> = LazyLock::new(|| {
    Client::builder(TokioExecutor::new())
        .pool_max_idle_per_host(0)
        .build_http()
});

/// Most of an error response's body quoted in the error (the agents answer with one line).
const ERROR_BODY_BYTES: usize = 200;

/// How one request is made.
#[derive(Clone, Copy, Debug)]
pub struct Options<'a> {
    /// For the whole exchange: connect, headers and body.
    pub timeout: Duration,
    /// Longest response body read; a longer one is an error, never a truncation.
    pub max_body_bytes: usize,
    /// Signs a credential for each request (its method and path), sent as
    /// `Authorization: Bearer <credential>`: a credential is good for one request only.
    pub control: Option<RequestSigner<'a>>,
}

impl<'a> Options<'a> {
    pub const fn new(timeout: Duration, max_body_bytes: usize) -> Self {
        Self {
            timeout,
            max_body_bytes,
            control: None,
        }
    }

    pub const fn signed(self, control: RequestSigner<'a>) -> Self {
        Self {
            control: Some(control),
            ..self
        }
    }
}

/// A 2xx answer and what it answered.
#[derive(Debug)]
pub struct Reply {
    pub method: Method,
    pub url: String,
    pub body: Bytes,
}

impl Reply {
    /// The body as JSON; an error names the request.
    pub fn json<T: DeserializeOwned>(&self) -> Result<T, Error> {
        serde_json::from_slice(&self.body).map_err(|e| Error {
            method: self.method.clone(),
            url: self.url.clone(),
            kind: ErrorKind::Decode(e),
        })
    }
}

/// A failed request: `GET http://10.0.0.7:9090/progress: 403 Forbidden: wrong token`.
#[derive(Debug, thiserror::Error)]
#[error("{method} {url}: {kind}")]
pub struct Error {
    pub method: Method,
    pub url: String,
    pub kind: ErrorKind,
}

#[derive(Debug)]
pub enum ErrorKind {
    /// No complete answer within the request's timeout.
    Timeout(Duration),
    /// A non-2xx answer, with the start of its body as plain text.
    Status { status: StatusCode, body: String },
    /// The body exceeds the request's bound.
    TooLarge(usize),
    /// Connecting, sending or reading failed (the error chain, joined).
    Transport(String),
    /// The request could not be built or its body not encoded.
    Request(String),
    /// A 2xx body that is not the expected JSON.
    Decode(serde_json::Error),
    /// The body could not be given room in the operator's memory budget.
    Budget(BudgetError),
}

impl fmt::Display for ErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ErrorKind::Timeout(d) => write!(f, "no answer within {d:?}"),
            ErrorKind::Status { status, body } if body.is_empty() => write!(f, "{status}"),
            ErrorKind::Status { status, body } => write!(f, "{status}: {body}"),
            ErrorKind::TooLarge(max) => write!(f, "response body over {max} bytes"),
            ErrorKind::Transport(why) => f.write_str(why),
            ErrorKind::Request(why) => write!(f, "bad request: {why}"),
            ErrorKind::Decode(e) => write!(f, "response is not the expected JSON: {e}"),
            ErrorKind::Budget(e) => e.fmt(f),
        }
    }
}

impl Error {
    /// The status of a non-2xx answer.
    pub fn status(&self) -> Option<StatusCode> {
        match self.kind {
            ErrorKind::Status { status, .. } => Some(status),
            _ => None,
        }
    }
}

/// `GET http://{addr}{path}`.
pub async fn get(addr: SocketAddr, path: &str, opts: Options<'_>) -> Result<Reply, Error> {
    send(Method::GET, &addr.to_string(), path, None, opts).await
}

/// `GET http://{host}:{port}{path}`, the host resolved by the cluster's DNS: a Service or a
/// pod behind a headless Service. Callers check the host first (it is not a pod IP the
/// operator listed).
pub async fn get_host(
    host: &str,
    port: u16,
    path: &str,
    opts: Options<'_>,
) -> Result<Reply, Error> {
    send(Method::GET, &format!("{host}:{port}"), path, None, opts).await
}

/// `GET http://{addr}{path}` whose body is counted in `held`: reserved before it is read (by
/// its Content-Length, which is refused at once when over `max_body_bytes`), grown frame by
/// frame otherwise. `timeout` bounds the network time; waiting for the budget is not counted.
pub async fn get_reserved(
    addr: SocketAddr,
    path: &str,
    opts: Options<'_>,
    held: &mut Reservation,
) -> Result<Reply, Error> {
    let (method, url) = (Method::GET, url(addr, path));
    let fail = |kind| Error {
        method: Method::GET,
        url: url.clone(),
        kind,
    };
    let req = request(&method, path, &url, None, opts.control).map_err(fail)?;
    let resp = match tokio::time::timeout(opts.timeout, CLIENT.request(req)).await {
        Err(_) => return Err(fail(ErrorKind::Timeout(opts.timeout))),
        Ok(Err(e)) => return Err(fail(ErrorKind::Transport(chain(&e)))),
        Ok(Ok(resp)) => resp,
    };
    let body = read_reserved(resp, opts, held).await.map_err(fail)?;
    Ok(Reply { method, url, body })
}

async fn read_reserved(
    resp: hyper::Response<Incoming>,
    opts: Options<'_>,
    held: &mut Reservation,
) -> Result<Bytes, ErrorKind> {
    if !resp.status().is_success() {
        return Err(status_error(resp).await);
    }
    let (max, base) = (opts.max_body_bytes, held.bytes());
    let announced = resp
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok()?.parse::<usize>().ok());
    if let Some(n) = announced {
        if n > max {
            return Err(ErrorKind::TooLarge(max));
        }
        held.hold(base + n).await.map_err(ErrorKind::Budget)?;
    }
    let mut deadline = tokio::time::Instant::now() + opts.timeout;
    let mut body = resp.into_body();
    let mut out = Vec::with_capacity(announced.unwrap_or(0));
    loop {
        let frame = match tokio::time::timeout_at(deadline, body.frame()).await {
            Err(_) => return Err(ErrorKind::Timeout(opts.timeout)),
            Ok(None) => break,
            Ok(Some(Err(e))) => return Err(ErrorKind::Transport(chain(&e))),
            Ok(Some(Ok(frame))) => frame,
        };
        let Ok(data) = frame.into_data() else {
            continue; // trailers
        };
        let len = out.len() + data.len();
        if len > max {
            return Err(ErrorKind::TooLarge(max));
        }
        let waited_from = tokio::time::Instant::now();
        held.hold(base + len).await.map_err(ErrorKind::Budget)?;
        deadline += waited_from.elapsed();
        out.extend_from_slice(&data);
    }
    Ok(Bytes::from(out))
}

/// `POST http://{addr}{path}` with `body` as JSON.
pub async fn post_json<B: Serialize + ?Sized>(
    addr: SocketAddr,
    path: &str,
    body: &B,
    opts: Options<'_>,
) -> Result<Reply, Error> {
    let json = serde_json::to_vec(body).map_err(|e| Error {
        method: Method::POST,
        url: url(addr, path),
        kind: ErrorKind::Request(e.to_string()),
    })?;
    send(Method::POST, &addr.to_string(), path, Some(json), opts).await
}

fn url(authority: impl fmt::Display, path: &str) -> String {
    format!("http://{authority}{path}")
}

/// `authority`: `ip:port` (`[ip6]:port`) or `host:port`.
async fn send(
    method: Method,
    authority: &str,
    path: &str,
    json: Option<Vec<u8>>,
    opts: Options<'_>,
) -> Result<Reply, Error> {
    let url = url(authority, path);
    let exchange = async {
        let req = request(&method, path, &url, json, opts.control)?;
        let resp = CLIENT
            .request(req)
            .await
            .map_err(|e| ErrorKind::Transport(chain(&e)))?;
        read(resp, opts.max_body_bytes).await
    };
    let body = match tokio::time::timeout(opts.timeout, exchange).await {
        Ok(Ok(body)) => body,
        Ok(Err(kind)) => return Err(Error { method, url, kind }),
        Err(_) => {
            let kind = ErrorKind::Timeout(opts.timeout);
            return Err(Error { method, url, kind });
        }
    };
    Ok(Reply { method, url, body })
}

/// The request for `url`, whose path (with query) is `path`: what a credential is signed for.
fn request(
    method: &Method,
    path: &str,
    url: &str,
    json: Option<Vec<u8>>,
    control: Option<RequestSigner<'_>>,
) -> Result<Request<Full<Bytes>>, ErrorKind> {
    let mut b = Request::builder().method(method).uri(url);
    if let Some(signer) = control {
        let credential = signer.credential(method.as_str(), path);
        b = b.header(header::AUTHORIZATION, format!("Bearer {credential}"));
    }
    if json.is_some() {
        b = b.header(header::CONTENT_TYPE, "application/json");
    }
    b.body(Full::new(Bytes::from(json.unwrap_or_default())))
        .map_err(|e| ErrorKind::Request(e.to_string()))
}

/// The body of a 2xx answer, at most `max` bytes; for any other status, the status and the
/// start of its body.
async fn read(resp: hyper::Response<Incoming>, max: usize) -> Result<Bytes, ErrorKind> {
    if !resp.status().is_success() {
        return Err(status_error(resp).await);
    }
    match Limited::new(resp.into_body(), max).collect().await {
        Ok(b) => Ok(b.to_bytes()),
        Err(e) if e.is::<LengthLimitError>() => Err(ErrorKind::TooLarge(max)),
        Err(e) => Err(ErrorKind::Transport(chain(&*e))),
    }
}

/// A non-2xx answer: its status and the start of its body.
async fn status_error(resp: hyper::Response<Incoming>) -> ErrorKind {
    let status = resp.status();
    // Best effort: an error body too long or cut off is left out.
    let body = Limited::new(resp.into_body(), 4 * ERROR_BODY_BYTES)
        .collect()
        .await
        .map(|b| b.to_bytes())
        .unwrap_or_default();
    let body = plain_bounded(&String::from_utf8_lossy(&body), ERROR_BODY_BYTES);
    ErrorKind::Status { status, body }
}

/// `e` and its sources, joined: hyper's own message alone ("client error (Connect)") does not
/// say that the connection was refused.
fn chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut out = e.to_string();
    let mut next = e.source();
    while let Some(s) = next {
        out.push_str(": ");
        out.push_str(&s.to_string());
        next = s.source();
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runtime::merge_budget::MergeBudget;
    use axum::http::HeaderMap;
    use axum::routing::{get as route_get, post as route_post};
    use axum::{Json, Router};
    use std::sync::Arc;

    /// A local server standing in for a pod: echoes the credential and JSON, answers late, too
    /// much or with an error.
    async fn pod() -> SocketAddr {
        let app = Router::new()
            .route(
                "/token",
                route_get(|h: HeaderMap| async move {
                    let auth = h.get(header::AUTHORIZATION).map(|v| v.to_str().unwrap());
                    auth.unwrap_or("none").to_string()
                }),
            )
            .route(
                "/token/post",
                route_post(|h: HeaderMap| async move {
                    let auth = h.get(header::AUTHORIZATION).map(|v| v.to_str().unwrap());
                    auth.unwrap_or("none").to_string()
                }),
            )
            .route(
                "/echo",
                route_post(|Json(v): Json<serde_json::Value>| async move { Json(v) }),
            )
            .route(
                "/slow",
                route_get(|| async {
                    tokio::time::sleep(Duration::from_secs(10)).await;
                    "late"
                }),
            )
            .route("/big", route_get(|| async { "x".repeat(2048) }))
            .route(
                "/chunked",
                route_get(|| async {
                    // No Content-Length: three chunks of 1000 bytes.
                    let chunks = (0..3).map(|_| Ok::<_, std::io::Error>(vec![b'y'; 1000]));
                    axum::body::Body::from_stream(futures::stream::iter(chunks))
                }),
            )
            .route(
                "/busy",
                route_get(|| async { (StatusCode::SERVICE_UNAVAILABLE, "connecting\n") }),
            );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        addr
    }

    const OPTS: Options<'static> = Options::new(Duration::from_secs(5), 1024);

    /// With a signer, each request carries a credential of its own, for its own method and
    /// path (with query); without one, none.
    #[tokio::test]
    async fn each_request_carries_a_credential_signed_for_it() {
        use runner_api::control_auth::{ControlSigner, ControlVerifier};
        let addr = pod().await;
        let signer = ControlSigner::from_seed([5; 32]);
        let opts = OPTS.signed(RequestSigner::new(&signer, "uid-9"));
        let v = ControlVerifier::new(&signer.public_keys(), "uid-9").unwrap();
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs();
        let sent = |r: Reply| {
            let body = String::from_utf8(r.body.to_vec()).unwrap();
            body.strip_prefix("Bearer ")
                .expect("a Bearer credential")
                .to_string()
        };
        let first = sent(get(addr, "/token?q=1", opts).await.unwrap());
        let second = sent(get(addr, "/token?q=1", opts).await.unwrap());
        assert_ne!(first, second);
        assert_eq!(v.check(&first, "GET", "/token?q=1", now), Ok(()));
        assert_eq!(v.check(&second, "GET", "/token?q=1", now), Ok(()));
        let posted = sent(post_json(addr, "/token/post", &1, opts).await.unwrap());
        assert!(v.check(&posted, "GET", "/token/post", now).is_err());
        assert_eq!(v.check(&posted, "POST", "/token/post", now), Ok(()));
        let without = get(addr, "/token", OPTS).await.unwrap();
        assert_eq!(without.body, "none");
    }

    #[tokio::test]
    async fn json_goes_out_and_comes_back() {
        let addr = pod().await;
        let sent = serde_json::json!({"trial": 2, "start_at_unix_ms": 5});
        let reply = post_json(addr, "/echo", &sent, OPTS).await.unwrap();
        assert_eq!(reply.json::<serde_json::Value>().unwrap(), sent);
        let err = reply.json::<Vec<u8>>().unwrap_err().to_string();
        assert!(
            err.starts_with(&format!("POST http://{addr}/echo: response is not")),
            "{err}"
        );
    }

    #[tokio::test]
    async fn the_timeout_fires() {
        let addr = pod().await;
        let opts = Options::new(Duration::from_millis(200), 1024);
        let started = std::time::Instant::now();
        let err = get(addr, "/slow", opts).await.unwrap_err();
        assert!(started.elapsed() < Duration::from_secs(5));
        assert!(matches!(err.kind, ErrorKind::Timeout(_)), "{err}");
        assert_eq!(
            err.to_string(),
            format!("GET http://{addr}/slow: no answer within 200ms")
        );
    }

    #[tokio::test]
    async fn an_oversize_body_is_refused() {
        let addr = pod().await;
        let err = get(addr, "/big", OPTS).await.unwrap_err();
        assert!(matches!(err.kind, ErrorKind::TooLarge(1024)), "{err}");
        assert!(err.to_string().ends_with("response body over 1024 bytes"));
        let exact = Options::new(Duration::from_secs(5), 2048);
        assert_eq!(get(addr, "/big", exact).await.unwrap().body.len(), 2048);
    }

    const KIB: usize = 1024;

    #[tokio::test]
    async fn an_announced_body_over_the_share_is_refused_before_reading() {
        let addr = pod().await;
        let budget = MergeBudget::new(64 * KIB, 64 * KIB, Duration::from_secs(5));
        let mut held = budget.reservation();
        let err = get_reserved(addr, "/big", OPTS, &mut held)
            .await
            .unwrap_err();
        assert!(matches!(err.kind, ErrorKind::TooLarge(1024)), "{err}");
        assert_eq!(held.bytes(), 0, "nothing reserved for a refused body");
        let opts = Options::new(Duration::from_secs(5), 4 * KIB);
        let reply = get_reserved(addr, "/big", opts, &mut held).await.unwrap();
        assert_eq!((reply.body.len(), held.bytes()), (2048, 2048));
    }

    #[tokio::test]
    async fn an_unannounced_body_grows_its_reservation_up_to_the_run_cap() {
        let addr = pod().await;
        let opts = Options::new(Duration::from_secs(5), 64 * KIB);
        let budget = MergeBudget::new(64 * KIB, 64 * KIB, Duration::from_secs(5));
        let mut held = budget.reservation();
        let reply = get_reserved(addr, "/chunked", opts, &mut held)
            .await
            .unwrap();
        assert_eq!((reply.body.len(), held.bytes()), (3000, 3000));
        // The per-run cap (2 KiB here) refuses the stream part-way, never past it.
        let small = MergeBudget::new(64 * KIB, 2 * KIB, Duration::from_secs(5));
        let mut held = small.reservation();
        let err = get_reserved(addr, "/chunked", opts, &mut held)
            .await
            .unwrap_err();
        assert!(
            matches!(
                err.kind,
                ErrorKind::Budget(BudgetError::OverShare { cap: 2048, .. })
            ),
            "{err}"
        );
        assert!(held.bytes() <= 2 * KIB);
    }

    #[tokio::test]
    async fn downloads_beyond_the_budget_wait_for_each_other() {
        let addr = pod().await;
        let opts = Options::new(Duration::from_secs(5), 4 * KIB);
        // Room for one 2 KiB body at a time (plus a little), not two.
        let budget = Arc::new(MergeBudget::new(3 * KIB, 3 * KIB, Duration::from_secs(30)));
        let mut first = budget.reservation();
        get_reserved(addr, "/big", opts, &mut first).await.unwrap();
        let b = budget.clone();
        let second = tokio::spawn(async move {
            let mut held = b.reservation();
            let reply = get_reserved(addr, "/big", opts, &mut held).await;
            reply.map(|r| (r.body.len(), held))
        });
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        while budget.waiting() == 0 {
            assert!(
                tokio::time::Instant::now() < deadline,
                "second never waited"
            );
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        assert!(!second.is_finished());
        drop(first); // the first run's merge is done
        let (len, held) = second.await.unwrap().unwrap();
        assert_eq!((len, held.bytes()), (2048, 2048));
    }

    #[tokio::test]
    async fn a_non_2xx_answer_is_named() {
        let addr = pod().await;
        let err = get(addr, "/busy", OPTS).await.unwrap_err();
        assert_eq!(err.status(), Some(StatusCode::SERVICE_UNAVAILABLE));
        assert_eq!(
            err.to_string(),
            format!("GET http://{addr}/busy: 503 Service Unavailable: connecting")
        );
    }

    #[tokio::test]
    async fn a_refused_connection_names_the_url_and_the_cause() {
        // A port that was just free: nothing listens there now.
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        drop(listener);
        let err = get(addr, "/progress", OPTS).await.unwrap_err();
        assert!(matches!(err.kind, ErrorKind::Transport(_)), "{err}");
        let msg = err.to_string();
        assert!(
            msg.starts_with(&format!("GET http://{addr}/progress: ")),
            "{msg}"
        );
        assert!(msg.to_lowercase().contains("refused"), "{msg}");
    }
}
