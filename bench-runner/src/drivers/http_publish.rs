//! HTTP publish (Socket.IO's `POST /publish`, Pusher's signed events API) as pipelined
//! HTTP/1.1 over a few keep-alive connections per publisher. Requests due together go out in one
//! write; responses come back in request order (HTTP/1.1 answers pipelined requests in order), so
//! each is matched to the oldest pending request. hyper's pooled client keeps one request per
//! connection in flight and costs a task, a connection and several allocations per request: with
//! it the generator, not the server, set the pace. A window bounds the messages in flight per
//! publisher (open loop: a full window shows up as send lag; closed loop: it is the concurrency).
use crate::drivers::{record_error, Outgoing, Publisher};
use crate::net::{ReadHalf, WriteHalf};
use crate::payload::Header;
use crate::recorder::{note_sent, record_ack, record_ack_error, Shared};
use crate::refusal::keep_refusal;
use crate::tls::TlsClient;
use bytes::{Buf, BytesMut};
use futures::future::BoxFuture;
use runner_api::target::TargetUrl;
use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::Semaphore;
use tokio::task::JoinHandle;

/// Keep-alive connections per publisher (the server handles each connection's requests one at a
/// time, so several let a multi-threaded server work on one publisher's load in parallel).
pub const CONNECTIONS: usize = 4;
/// Messages in flight per publisher.
pub const WINDOW: usize = 512;
/// How long `finish` waits for outstanding responses.
const FINISH_TIMEOUT: Duration = Duration::from_secs(30);

/// Writes a protocol's publish requests.
pub trait RequestEncoder: Send + 'static {
    /// Appends one complete request carrying the first messages of `msgs` (never empty) to
    /// `buf`; returns how many it carries (a batch API may take several; at least one).
    fn encode(&mut self, msgs: &[Outgoing], buf: &mut Vec<u8>) -> usize;
}

/// Messages written on one connection and not answered yet; `dead` once the connection failed
/// (later sends count as errors at once instead of waiting for a reader that is gone).
#[derive(Default)]
struct Queue {
    /// Headers of the messages in flight, oldest first.
    pending: VecDeque<Header>,
    /// How many of them each request in flight carries, oldest first.
    requests: VecDeque<usize>,
    dead: bool,
}

struct Conn {
    wr: WriteHalf,
    queue: Arc<Mutex<Queue>>,
    reader: JoinHandle<()>,
}

pub struct PipelinedPublisher<E> {
    conns: Vec<Conn>,
    next: usize,
    window: Arc<Semaphore>,
    stats: Shared,
    enc: E,
    buf: Vec<u8>,
}

impl<E: RequestEncoder> PipelinedPublisher<E> {
    /// [`CONNECTIONS`] keep-alive connections to `target`, over TLS with `tls`.
    pub async fn connect(
        target: &TargetUrl,
        tls: Option<&TlsClient>,
        enc: E,
        stats: Shared,
    ) -> anyhow::Result<Self> {
        let window = Arc::new(Semaphore::new(WINDOW));
        let mut conns = Vec::with_capacity(CONNECTIONS);
        for _ in 0..CONNECTIONS {
            let s = crate::net::dial(target, tls, Duration::from_secs(10))
                .await
                .map_err(|e| {
                    keep_refusal(e, |e| anyhow::anyhow!("connect to {}: {e}", target.raw))
                })?;
            let (rd, wr) = s.into_split();
            let queue = Arc::new(Mutex::new(Queue::default()));
            let reader = tokio::spawn(read_responses(
                rd,
                queue.clone(),
                stats.clone(),
                window.clone(),
            ));
            conns.push(Conn { wr, queue, reader });
        }
        Ok(PipelinedPublisher {
            conns,
            next: 0,
            window,
            stats,
            enc,
            buf: Vec::with_capacity(64 * 1024),
        })
    }

    /// Encodes `chunk` into `self.buf` as requests; returns the messages per request.
    fn encode(&mut self, chunk: &[Outgoing]) -> Vec<usize> {
        self.buf.clear();
        let mut sizes = Vec::new();
        let mut rest = chunk;
        while !rest.is_empty() {
            let n = self.enc.encode(rest, &mut self.buf).clamp(1, rest.len());
            sizes.push(n);
            rest = &rest[n..];
        }
        sizes
    }

    /// Sends at most `WINDOW` messages; returns how many were written.
    async fn send_part(&mut self, batch: &[Outgoing]) -> usize {
        // Blocks while the window is full: open loop records it as send lag.
        match self.window.acquire_many(batch.len() as u32).await {
            Ok(p) => p.forget(),
            Err(_) => return 0,
        }
        // Spread the batch over the connections, one write per connection.
        let per = batch.len().div_ceil(self.conns.len());
        let mut sent = 0;
        for chunk in batch.chunks(per) {
            let c = self.next % self.conns.len();
            self.next = self.next.wrapping_add(1);
            let sizes = self.encode(chunk);
            let alive = {
                let mut q = self.conns[c].queue.lock().expect("queue lock");
                if !q.dead {
                    q.pending.extend(chunk.iter().map(|m| m.header));
                    q.requests.extend(sizes);
                    // Inside the queue lock, so the reader cannot answer them first (a batch
                    // is one phase's).
                    note_sent(&self.stats, chunk[0].header.phase, chunk.len() as u64);
                }
                !q.dead
            };
            if !alive {
                for m in chunk {
                    record_error(&self.stats, m.header.phase, "publish:connect");
                }
                self.window.add_permits(chunk.len());
                continue;
            }
            // A failed write closes the connection; its reader then fails what is pending.
            if self.conns[c].wr.write_all(&self.buf).await.is_err() {
                let _ = self.conns[c].wr.shutdown().await;
                continue;
            }
            sent += chunk.len();
        }
        sent
    }
}

impl<E: RequestEncoder> Publisher for PipelinedPublisher<E> {
    fn send_batch<'a>(&'a mut self, batch: &'a [Outgoing]) -> BoxFuture<'a, usize> {
        Box::pin(async move {
            let mut sent = 0;
            // A part never asks for more slots than the window has.
            for part in batch.chunks(WINDOW) {
                sent += self.send_part(part).await;
            }
            sent
        })
    }

    fn finish(&mut self) -> BoxFuture<'_, ()> {
        Box::pin(async move {
            // Every response is back once the whole window is free again.
            let all = self.window.acquire_many(WINDOW as u32);
            if let Ok(Ok(p)) = tokio::time::timeout(FINISH_TIMEOUT, all).await {
                drop(p);
            }
        })
    }
}

impl<E> Drop for PipelinedPublisher<E> {
    fn drop(&mut self) {
        for c in &self.conns {
            c.reader.abort();
        }
    }
}

/// Matches responses to pending requests until the connection ends; then fails whatever is
/// still pending (each failure returns its window slot).
async fn read_responses(
    mut rd: ReadHalf,
    queue: Arc<Mutex<Queue>>,
    stats: Shared,
    window: Arc<Semaphore>,
) {
    let mut buf = BytesMut::with_capacity(64 * 1024);
    let why = 'conn: loop {
        loop {
            let (head_len, code, body_len) = match parse_response(&buf) {
                Ok(Some(r)) => r,
                Ok(None) => break,
                Err(e) => break 'conn e,
            };
            if buf.len() < head_len + body_len {
                break;
            }
            buf.advance(head_len + body_len);
            // Acked under the queue lock (queue, then stats: the sender's order too), so the
            // hot path allocates nothing.
            let mut q = queue.lock().expect("queue lock");
            let Some(n) = q.requests.pop_front() else {
                break 'conn "unexpectedResponse";
            };
            for p in q.pending.drain(..n) {
                if (200..300).contains(&code) {
                    record_ack(&stats, &p);
                } else {
                    record_ack_error(&stats, p.phase, &format!("publish:http{code}"));
                }
            }
            window.add_permits(n);
        }
        match rd.read_buf(&mut buf).await {
            Ok(0) => break "closed",
            Ok(_) => {}
            Err(_) => break "read",
        }
    };
    let failed: Vec<Header> = {
        let mut q = queue.lock().expect("queue lock");
        q.dead = true;
        q.requests.clear();
        q.pending.drain(..).collect()
    };
    for p in &failed {
        record_ack_error(&stats, p.phase, &format!("publish:{why}"));
    }
    window.add_permits(failed.len());
}

/// (head length, status code, body length) of the response at the front of `buf`, `None` while
/// its head is incomplete. Responses must carry Content-Length (both servers send it).
pub(crate) fn parse_response(buf: &[u8]) -> Result<Option<(usize, u16, usize)>, &'static str> {
    let mut headers = [httparse::EMPTY_HEADER; 24];
    let mut r = httparse::Response::new(&mut headers);
    let head_len = match r.parse(buf) {
        Ok(httparse::Status::Complete(n)) => n,
        Ok(httparse::Status::Partial) => return Ok(None),
        Err(_) => return Err("badResponse"),
    };
    let body_len = r
        .headers
        .iter()
        .find(|h| h.name.eq_ignore_ascii_case("content-length"))
        .and_then(|h| std::str::from_utf8(h.value).ok()?.trim().parse().ok())
        .ok_or("noContentLength")?;
    Ok(Some((head_len, r.code.unwrap_or(0), body_len)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::drivers::socketio::PublishRequests;
    use crate::recorder::TaskStats;
    use runner_api::result::Delivery;
    use tokio::net::{TcpListener, TcpStream};

    fn target(addr: &str) -> TargetUrl {
        TargetUrl::parse(&format!("http://{addr}")).unwrap()
    }

    fn msg(seq: u64) -> Outgoing {
        Outgoing {
            topic: 0,
            header: Header {
                run: 0,
                runner: 1,
                phase: 0,
                publisher: 0,
                seq,
                intended_us: 1,
            },
        }
    }

    /// Reads `n` pipelined requests (each ends with the body's closing brace here).
    async fn read_requests(s: &mut TcpStream, n: usize) -> String {
        let mut buf = Vec::new();
        while buf.windows(4).filter(|w| w == b"\r\n\r\n").count() < n || !buf.ends_with(b"}") {
            let mut chunk = [0u8; 4096];
            let k = s.read(&mut chunk).await.unwrap();
            assert!(k > 0, "publisher closed early");
            buf.extend_from_slice(&chunk[..k]);
        }
        String::from_utf8(buf).unwrap()
    }

    /// A batch of 8 goes out as two pipelined requests on each of the 4 connections. The fake
    /// server answers connection 0 with 200 then 400, connection 1 with one 200 and hangs up,
    /// the others with 200s: 6 acks, one `publish:http400`, one `publish:closed`, and the
    /// window comes back whole.
    #[tokio::test]
    async fn pipelined_requests_are_matched_in_order_and_failures_counted() {
        const OK: &[u8] = b"HTTP/1.1 200 OK\r\ncontent-length: 8\r\n\r\n{\"id\":1}";
        const BAD: &[u8] = b"HTTP/1.1 400 Bad Request\r\ncontent-length: 2\r\n\r\n{}";
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = l.local_addr().unwrap().to_string();
        let server = tokio::spawn(async move {
            let mut conns = Vec::new();
            for _ in 0..CONNECTIONS {
                conns.push(l.accept().await.unwrap().0);
            }
            let mut first = String::new();
            for (i, s) in conns.iter_mut().enumerate() {
                let reqs = read_requests(s, 2).await;
                let answer = match i {
                    0 => [OK, BAD].concat(),
                    1 => OK.to_vec(),
                    _ => [OK, OK].concat(),
                };
                s.write_all(&answer).await.unwrap();
                if i == 0 {
                    first = reqs;
                }
            }
            first // dropping the connections hangs up on the publisher
        });
        let stats = Arc::new(Mutex::new(TaskStats::new(
            &["m".into()],
            1,
            Delivery::FanOut,
            0,
        )));
        let enc = PublishRequests::new(&addr, &["t \"q\"".into()], "p", 30, &Default::default());
        let mut p = PipelinedPublisher::connect(&target(&addr), None, enc, stats.clone())
            .await
            .unwrap();
        let batch: Vec<Outgoing> = (0..8).map(msg).collect();
        assert_eq!(p.send_batch(&batch).await, 8);
        let requests = server.await.unwrap();
        p.finish().await;
        assert_eq!(p.window.available_permits(), WINDOW);
        assert_eq!(requests.matches("POST /publish HTTP/1.1\r\n").count(), 2);
        assert!(
            requests.contains(r#"{"topic":"t \"q\"","publisher":"p","payload":""#),
            "topic JSON-escaped: {requests}"
        );
        let s = stats.lock().unwrap();
        let ph = &s.phases[0];
        assert_eq!(ph.ack_latency.len(), 6);
        assert_eq!(ph.errors.get("publish:http400"), Some(&1));
        assert_eq!(ph.errors.get("publish:closed"), Some(&1));
        // Two requests per connection in order (seqs 0,1 on the first, 2,3 on the second):
        // the 400 (seq 1) and the one the hang-up failed (seq 3) are not acknowledged.
        let acked: Vec<usize> = s.acks.acked_in(0).unwrap().ones().collect();
        assert_eq!(acked, [0, 2, 4, 5, 6, 7]);
        assert_eq!(s.timeline_acked.iter().sum::<u64>(), 6);
        assert!(s.acks.longest_stall(0).is_some());
    }

    #[test]
    fn responses_are_split_by_content_length() {
        let two = b"HTTP/1.1 200 OK\r\nContent-Length: 8\r\n\r\n{\"id\":1}HTTP/1.1 400 Bad Request\r\ncontent-length: 2\r\n\r\n{}";
        let (h, code, b) = parse_response(two).unwrap().unwrap();
        assert_eq!((code, b), (200, 8));
        let (h2, code2, b2) = parse_response(&two[h + b..]).unwrap().unwrap();
        assert_eq!((code2, b2), (400, 2));
        assert_eq!(h + b + h2 + b2, two.len());
        assert_eq!(
            parse_response(b"HTTP/1.1 200 OK\r\nContent-Le").unwrap(),
            None
        );
        assert_eq!(
            parse_response(b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n"),
            Err("noContentLength")
        );
    }

    /// A batch larger than the window goes out in window-sized parts instead of waiting
    /// forever for more slots than exist; every request is answered and acknowledged.
    #[tokio::test]
    async fn batches_larger_than_the_window_are_sent_in_parts() {
        const OK: &[u8] = b"HTTP/1.1 200 OK\r\ncontent-length: 8\r\n\r\n{\"id\":1}";
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = l.local_addr().unwrap().to_string();
        tokio::spawn(async move {
            while let Ok((mut s, _)) = l.accept().await {
                // Answers each request head seen so far (heads never split a "POST " here
                // because counting runs over everything read).
                tokio::spawn(async move {
                    let (mut seen, mut answered, mut buf) = (0, 0, Vec::new());
                    let mut chunk = [0u8; 8192];
                    while let Ok(n) = s.read(&mut chunk).await {
                        if n == 0 {
                            break;
                        }
                        buf.extend_from_slice(&chunk[..n]);
                        seen += buf.windows(5).filter(|w| w == b"POST ").count();
                        let keep = buf.len().saturating_sub(4);
                        buf.drain(..keep);
                        let reply: Vec<u8> = OK.repeat(seen - answered);
                        answered = seen;
                        if s.write_all(&reply).await.is_err() {
                            break;
                        }
                    }
                });
            }
        });
        let stats = Arc::new(Mutex::new(TaskStats::new(
            &["m".into()],
            1,
            Delivery::FanOut,
            0,
        )));
        let enc = PublishRequests::new(&addr, &["t".into()], "p", 30, &Default::default());
        let mut p = PipelinedPublisher::connect(&target(&addr), None, enc, stats.clone())
            .await
            .unwrap();
        let batch: Vec<Outgoing> = (0..(2 * WINDOW as u64 + 7)).map(msg).collect();
        let sent = tokio::time::timeout(Duration::from_secs(20), p.send_batch(&batch))
            .await
            .expect("a batch larger than the window must not wait forever");
        assert_eq!(sent, batch.len());
        p.finish().await;
        let s = stats.lock().unwrap();
        assert_eq!(s.phases[0].ack_latency.len(), batch.len() as u64);
        assert!(s.phases[0].errors.is_empty(), "{:?}", s.phases[0].errors);
    }

    /// Packs up to 3 messages into one request (like a batch API).
    struct Threes;
    impl RequestEncoder for Threes {
        fn encode(&mut self, msgs: &[Outgoing], buf: &mut Vec<u8>) -> usize {
            buf.extend_from_slice(b"POST /batch HTTP/1.1\r\ncontent-length: 2\r\n\r\n{}");
            msgs.len().min(3)
        }
    }

    /// One answer settles every message its request carried: 12 messages go out as one
    /// request of 3 on each connection; the 400 on the first fails all 3 of its messages.
    #[tokio::test]
    async fn an_answer_acks_or_fails_every_message_of_its_request() {
        const OK: &[u8] = b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\n{}";
        const BAD: &[u8] = b"HTTP/1.1 400 Bad Request\r\ncontent-length: 2\r\n\r\n{}";
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = l.local_addr().unwrap().to_string();
        tokio::spawn(async move {
            let mut conns = Vec::new();
            for _ in 0..CONNECTIONS {
                conns.push(l.accept().await.unwrap().0);
            }
            for (i, s) in conns.iter_mut().enumerate() {
                read_requests(s, 1).await;
                s.write_all(if i == 0 { BAD } else { OK }).await.unwrap();
            }
            // Held open until the publisher is done, so no hang-up fails anything.
            std::future::pending::<()>().await;
        });
        let stats = Arc::new(Mutex::new(TaskStats::new(
            &["m".into()],
            1,
            Delivery::FanOut,
            0,
        )));
        let mut p = PipelinedPublisher::connect(&target(&addr), None, Threes, stats.clone())
            .await
            .unwrap();
        let batch: Vec<Outgoing> = (0..12).map(msg).collect();
        assert_eq!(p.send_batch(&batch).await, 12);
        p.finish().await;
        assert_eq!(p.window.available_permits(), WINDOW);
        let s = stats.lock().unwrap();
        assert_eq!(s.phases[0].ack_latency.len(), 9);
        assert_eq!(s.phases[0].errors.get("publish:http400"), Some(&3));
        let acked: Vec<usize> = s.acks.acked_in(0).unwrap().ones().collect();
        assert_eq!(acked, (3..12).collect::<Vec<_>>());
    }
}
