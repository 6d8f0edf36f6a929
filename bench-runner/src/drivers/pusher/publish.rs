//! Publishing to a server that closes every API connection after one answer (sockudo sends
//! `connection: close` on all its API routes), so nothing can be pipelined: each request gets
//! its own connection and task. A window bounds the messages in flight (open loop: a full
//! window shows up as send lag); several events due together share one `/batch_events` request.
use crate::drivers::http_publish::{parse_response, RequestEncoder};
use crate::drivers::{Outgoing, Publisher};
use crate::payload::Header;
use crate::recorder::{note_sent, record_ack, record_ack_error, Shared};
use futures::future::BoxFuture;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::Semaphore;

/// Messages in flight per publisher.
pub const WINDOW: usize = 256;
/// A request unanswered this long counts as failed.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);

pub struct ConnectionPerRequest<E> {
    addr: Arc<str>,
    enc: E,
    window: Arc<Semaphore>,
    stats: Shared,
}

impl<E: RequestEncoder> ConnectionPerRequest<E> {
    pub fn new(addr: &str, enc: E, stats: Shared) -> Self {
        ConnectionPerRequest {
            addr: addr.into(),
            enc,
            window: Arc::new(Semaphore::new(WINDOW)),
            stats,
        }
    }

    /// Sends one request carrying the first messages of `msgs`; returns how many it carries.
    async fn send_one(&mut self, msgs: &[Outgoing]) -> usize {
        let mut req = Vec::with_capacity(512);
        let n = self.enc.encode(msgs, &mut req).clamp(1, msgs.len());
        // Blocks while the window is full: open loop records it as send lag.
        match self.window.clone().acquire_many_owned(n as u32).await {
            Ok(permit) => {
                let headers: Vec<Header> = msgs[..n].iter().map(|m| m.header).collect();
                note_sent(&self.stats, headers[0].phase, n as u64);
                let (addr, stats) = (self.addr.clone(), self.stats.clone());
                tokio::spawn(async move {
                    let outcome = tokio::time::timeout(REQUEST_TIMEOUT, exchange(&addr, &req))
                        .await
                        .unwrap_or(Err("timeout"));
                    for h in &headers {
                        match outcome {
                            Ok(code) if (200..300).contains(&code) => record_ack(&stats, h),
                            Ok(code) => {
                                record_ack_error(&stats, h.phase, &format!("publish:http{code}"))
                            }
                            Err(why) => {
                                record_ack_error(&stats, h.phase, &format!("publish:{why}"))
                            }
                        }
                    }
                    drop(permit);
                });
                n
            }
            Err(_) => 0,
        }
    }
}

/// Writes `req` on a new connection and reads the answer's status code.
async fn exchange(addr: &str, req: &[u8]) -> Result<u16, &'static str> {
    let mut s = TcpStream::connect(addr).await.map_err(|_| "connect")?;
    let _ = s.set_nodelay(true);
    s.write_all(req).await.map_err(|_| "write")?;
    let mut buf = Vec::with_capacity(1024);
    loop {
        if let Some((head, code, body)) = parse_response(&buf)? {
            if buf.len() >= head + body {
                return Ok(code);
            }
        }
        let mut chunk = [0u8; 1024];
        match s.read(&mut chunk).await {
            Ok(0) => return Err("closed"),
            Ok(k) => buf.extend_from_slice(&chunk[..k]),
            Err(_) => return Err("read"),
        }
    }
}

impl<E: RequestEncoder> Publisher for ConnectionPerRequest<E> {
    fn send_batch<'a>(&'a mut self, batch: &'a [Outgoing]) -> BoxFuture<'a, usize> {
        Box::pin(async move {
            let mut sent = 0;
            while sent < batch.len() {
                let n = self.send_one(&batch[sent..]).await;
                if n == 0 {
                    break;
                }
                sent += n;
            }
            sent
        })
    }

    fn finish(&mut self) -> BoxFuture<'_, ()> {
        Box::pin(async move {
            // Every answer is in once the whole window is free again.
            let all = self.window.acquire_many(WINDOW as u32);
            if let Ok(Ok(p)) = tokio::time::timeout(REQUEST_TIMEOUT * 3, all).await {
                drop(p);
            }
        })
    }
}
