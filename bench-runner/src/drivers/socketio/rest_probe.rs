//! Optional REST latency during a socketio run (`socketio.rest`): every path is fetched with
//! GET at a low fixed rate over its own keep-alive connection — TLS and the target's token as
//! the run's Socket.IO clients use them — open loop (latency from the intended send time, so a
//! stalled endpoint counts its stall), into its own histogram; the result reports it apart from
//! delivery and publish latency (issue 4: the seed's breakdown).
use crate::clock;
use crate::drivers::http_auth::TokenAuth;
use crate::tls::TlsClient;
use bytes::Bytes;
use http_body_util::{BodyExt, Empty};
use hyper::client::conn::http1::SendRequest;
use hyper_util::rt::TokioIo;
use msgbench_crds::workload::RestSampling;
use runner_api::histo::Histo;
use runner_api::result::RestLatency;
use runner_api::target::TargetUrl;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;
use tokio::task::JoinHandle;

/// A request slower than this counts as an error (its latency is still recorded).
const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);

pub struct RestProbe {
    stop: watch::Sender<bool>,
    tasks: Vec<JoinHandle<RestLatency>>,
}

impl RestProbe {
    /// Starts sampling `target` at `start_us` (process clock) until `finish`. Errors: the
    /// target's TLS files or token cannot be used (the run's clients would have failed first).
    pub fn start(target: &TargetUrl, o: &RestSampling, start_us: u64) -> anyhow::Result<RestProbe> {
        let (stop, rx) = watch::channel(false);
        let (tls, auth) = (
            crate::tls::for_tls_target(target)?,
            TokenAuth::for_target(target)?,
        );
        let tasks = o
            .paths
            .iter()
            .map(|path| {
                let conn = Connection {
                    target: target.clone(),
                    tls: tls.clone(),
                    auth: auth.clone(),
                    sender: None,
                };
                tokio::spawn(sample(
                    conn,
                    path.clone(),
                    o.rate_per_second.max(1),
                    start_us,
                    rx.clone(),
                ))
            })
            .collect();
        Ok(RestProbe { stop, tasks })
    }

    /// Stops sampling and returns one latency section per path.
    pub async fn finish(self) -> Vec<RestLatency> {
        let _ = self.stop.send(true);
        let mut out = Vec::new();
        for t in self.tasks {
            if let Ok(r) = t.await {
                out.push(r);
            }
        }
        out
    }
}

/// One keep-alive HTTP/1.1 connection to the target, opened again after it fails.
struct Connection {
    target: TargetUrl,
    tls: Option<Arc<TlsClient>>,
    auth: TokenAuth,
    sender: Option<SendRequest<Empty<Bytes>>>,
}

impl Connection {
    /// GET `path`: whether the answer was a success (any failure drops the connection).
    async fn get(&mut self, path: &str) -> anyhow::Result<bool> {
        let mut sender = match self.sender.take() {
            Some(s) if !s.is_closed() => s,
            _ => self.open().await?,
        };
        let mut req = hyper::Request::get(self.auth.path(path))
            .header(hyper::header::HOST, self.target.addr());
        if let Some((name, value)) = &self.auth.header {
            req = req.header(name.as_str(), value.as_str());
        }
        sender.ready().await?;
        let resp = sender.send_request(req.body(Empty::new())?).await?;
        let ok = resp.status().is_success();
        resp.into_body().collect().await?;
        self.sender = Some(sender);
        Ok(ok)
    }

    async fn open(&self) -> anyhow::Result<SendRequest<Empty<Bytes>>> {
        let stream = crate::net::dial(&self.target, self.tls.as_deref(), REQUEST_TIMEOUT).await?;
        let (sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream)).await?;
        tokio::spawn(conn);
        Ok(sender)
    }
}

async fn sample(
    mut conn: Connection,
    path: String,
    rate: u32,
    start_us: u64,
    mut stop: watch::Receiver<bool>,
) -> RestLatency {
    let mut r = RestLatency {
        path,
        requests: 0,
        errors: 0,
        latency: Histo::default(),
        summary: None,
    };
    for i in 0u64.. {
        let intended = start_us + i * 1_000_000 / u64::from(rate);
        tokio::select! {
            _ = tokio::time::sleep_until(clock::instant_at(intended).into()) => {}
            _ = stop.changed() => break,
        }
        if *stop.borrow() {
            break;
        }
        let ok = tokio::time::timeout(REQUEST_TIMEOUT, conn.get(&r.path)).await;
        r.latency
            .record(clock::now_us().saturating_sub(intended).max(1));
        r.requests += 1;
        if !matches!(ok, Ok(Ok(true))) {
            r.errors += 1;
        }
    }
    r.summary = r.latency.summary();
    r
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::StatusCode;
    use axum::routing::get;

    /// Each path gets its own section; failing answers count as errors; every request, ok or
    /// not, has a latency sample; stopping ends sampling at once.
    #[tokio::test]
    async fn each_path_is_sampled_into_its_own_section() {
        let app = axum::Router::new()
            .route("/health", get(|| async { "ok" }))
            .route(
                "/broken",
                get(|| async { StatusCode::INTERNAL_SERVER_ERROR }),
            );
        let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = l.local_addr().unwrap().to_string();
        tokio::spawn(async move { axum::serve(l, app).await });
        let o = RestSampling {
            paths: vec!["/health".into(), "/broken".into()],
            rate_per_second: 50,
        };
        let target = TargetUrl::parse(&format!("http://{addr}")).unwrap();
        let probe = RestProbe::start(&target, &o, clock::now_us()).unwrap();
        // 50/s: wait until some requests went out (bounded), then stop.
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        let until = clock::now_us() + 300_000;
        while clock::now_us() < until && tokio::time::Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let rest = tokio::time::timeout(Duration::from_secs(15), probe.finish())
            .await
            .expect("finish returns once stopped");
        assert_eq!(rest.len(), 2);
        let (ok, bad) = (&rest[0], &rest[1]);
        assert_eq!(ok.path, "/health");
        assert!(ok.requests >= 5, "{ok:?}");
        assert_eq!(ok.errors, 0);
        assert_eq!(ok.latency.len(), ok.requests);
        assert!(ok.summary.is_some());
        assert_eq!(bad.path, "/broken");
        assert!(bad.requests >= 5);
        assert_eq!(bad.errors, bad.requests, "500 answers are errors");
    }
}
