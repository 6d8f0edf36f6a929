//! Pusher's HTTP API: every request is signed with the app's secret (auth_key, auth_timestamp,
//! auth_version, body_md5 of a POST body, auth_signature = hex HMAC-SHA256 of
//! `METHOD\npath\nsorted query`). Publishes go out as pipelined requests: one event by
//! `/events`, several due together by `/batch_events` (at most `BATCH_LIMIT`).
use crate::drivers::http_publish::RequestEncoder;
use crate::drivers::Outgoing;
use hmac::{Hmac, Mac};
use md5::{Digest, Md5};
use sha2::Sha256;
use std::io::Write as _;
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// Pusher's documented limit of events per `/batch_events` request.
pub const BATCH_LIMIT: usize = 10;
/// Name of the events msgbench publishes (subscribers record only these).
pub const EVENT: &str = "msgbench";

/// A Pusher app's credentials.
#[derive(Clone)]
pub struct App {
    pub id: String,
    pub key: String,
    pub secret: String,
}

/// Hex HMAC-SHA256 of `text` under `secret`.
pub fn sign(secret: &str, text: &str) -> String {
    let mut mac = Hmac::<Sha256>::new_from_slice(secret.as_bytes()).expect("HMAC takes any key");
    mac.update(text.as_bytes());
    hex::encode(mac.finalize().into_bytes())
}

/// The query string of a signed request (`auth_signature` last). Parameter values must not need
/// percent-encoding (the driver checks the app id and key; the rest are digits and hex).
pub fn signed_query(app: &App, method: &str, path: &str, body: &[u8], timestamp: u64) -> String {
    let mut q = format!(
        "auth_key={}&auth_timestamp={timestamp}&auth_version=1.0",
        app.key
    );
    if !body.is_empty() {
        q.push_str(&format!("&body_md5={}", hex::encode(Md5::digest(body))));
    }
    let signature = sign(&app.secret, &format!("{method}\n{path}\n{q}"));
    q + "&auth_signature=" + &signature
}

pub fn unix_seconds() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

/// Pipelined publish requests for one publisher.
pub struct EventRequests {
    app: App,
    host: String,
    events_path: String,
    batch_path: String,
    /// `{"name":"msgbench","channel":"…","data":"` per topic index.
    prefixes: Vec<Vec<u8>>,
    len: usize,
    body: Vec<u8>,
}

impl EventRequests {
    pub fn new(app: &App, host: &str, channels: &[String], len: usize) -> Self {
        let prefixes = channels
            .iter()
            .map(|c| {
                format!(
                    "{{\"name\":\"{EVENT}\",\"channel\":{},\"data\":\"",
                    serde_json::Value::from(c.as_str())
                )
                .into_bytes()
            })
            .collect();
        EventRequests {
            app: app.clone(),
            host: host.into(),
            events_path: format!("/apps/{}/events", app.id),
            batch_path: format!("/apps/{}/batch_events", app.id),
            prefixes,
            len,
            body: Vec::with_capacity(4096),
        }
    }

    fn push_event(&mut self, m: &Outgoing) {
        self.body
            .extend_from_slice(&self.prefixes[m.topic as usize]);
        self.body
            .extend_from_slice(m.header.to_text(self.len).as_bytes());
        self.body.extend_from_slice(b"\"}");
    }
}

impl RequestEncoder for EventRequests {
    fn encode(&mut self, msgs: &[Outgoing], buf: &mut Vec<u8>) -> usize {
        let n = msgs.len().min(BATCH_LIMIT);
        self.body.clear();
        if n == 1 {
            self.push_event(&msgs[0]);
        } else {
            self.body.extend_from_slice(b"{\"batch\":[");
            for (i, m) in msgs[..n].iter().enumerate() {
                if i > 0 {
                    self.body.push(b',');
                }
                self.push_event(m);
            }
            self.body.extend_from_slice(b"]}");
        }
        let path = if n == 1 {
            &self.events_path
        } else {
            &self.batch_path
        };
        let q = signed_query(&self.app, "POST", path, &self.body, unix_seconds());
        let _ = write!(
            buf,
            "POST {path}?{q} HTTP/1.1\r\nhost: {}\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n",
            self.host,
            self.body.len()
        );
        buf.extend_from_slice(&self.body);
        n
    }
}

/// Checks the credentials with one signed read (`GET /apps/{id}/channels`), so wrong ones fail
/// the run at once with the server's reason instead of as a run of rejected publishes.
pub async fn check_credentials(addr: &str, app: &App) -> anyhow::Result<()> {
    let path = format!("/apps/{}/channels", app.id);
    let q = signed_query(app, "GET", &path, b"", unix_seconds());
    let req = format!("GET {path}?{q} HTTP/1.1\r\nhost: {addr}\r\nconnection: close\r\n\r\n");
    let answer = tokio::time::timeout(Duration::from_secs(10), async {
        let mut s = tokio::net::TcpStream::connect(addr).await?;
        s.write_all(req.as_bytes()).await?;
        let mut out = Vec::new();
        s.read_to_end(&mut out).await?;
        anyhow::Ok(out)
    })
    .await
    .map_err(|_| anyhow::anyhow!("pusher API at {addr}: no answer within 10 s"))?
    .map_err(|e| anyhow::anyhow!("pusher API at {addr}: {e}"))?;
    let text = String::from_utf8_lossy(&answer);
    let code: u16 = text.get(9..12).and_then(|c| c.parse().ok()).unwrap_or(0);
    if (200..300).contains(&code) {
        return Ok(());
    }
    let body = text.split_once("\r\n\r\n").map_or("", |(_, b)| b.trim());
    let body: String = body.chars().take(200).collect();
    anyhow::bail!(
        "pusher app {:?} at {addr}: the server refused the app credentials (HTTP {code}: {body}) — check app id, key and secret",
        app.id
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::payload::Header;

    /// The example in Pusher's HTTP API reference ("Generating authentication signatures").
    #[test]
    fn signatures_match_pushers_documented_example() {
        let app = App {
            id: "3".into(),
            key: "278d425bdf160c739803".into(),
            secret: "7ad3773142a6692b25b8".into(),
        };
        let body = br#"{"name":"foo","channels":["project-3"],"data":"{\"some\":\"data\"}"}"#;
        let q = signed_query(&app, "POST", "/apps/3/events", body, 1353088179);
        assert_eq!(
            q,
            "auth_key=278d425bdf160c739803&auth_timestamp=1353088179&auth_version=1.0\
             &body_md5=ec365a775a4cd0599faeb73354201b6f\
             &auth_signature=da454824c97ba181a32ccc17a72625ba02771f50b50e1e7430e47a1f3f457e6c"
        );
        // A bodiless request carries no body_md5.
        assert!(!signed_query(&app, "GET", "/apps/3/channels", b"", 1).contains("body_md5"));
    }

    fn msg(topic: u32, seq: u64) -> Outgoing {
        let header = Header {
            run: 0,
            runner: 1,
            phase: 0,
            publisher: 2,
            seq,
            intended_us: 9,
        };
        Outgoing { topic, header }
    }

    /// One message goes to `/events`; several to `/batch_events`, at most 10 per request, each
    /// request signed over its own body and its Content-Length exact.
    #[test]
    fn requests_are_single_events_or_batches_of_at_most_ten() {
        let app = App {
            id: "7".into(),
            key: "k".into(),
            secret: "s".into(),
        };
        let channels = ["c-0".to_string(), "c-1".to_string()];
        let mut enc = EventRequests::new(&app, "h:1", &channels, 30);
        let mut buf = Vec::new();
        assert_eq!(enc.encode(&[msg(1, 5)], &mut buf), 1);
        let text = String::from_utf8(buf.clone()).unwrap();
        assert!(
            text.starts_with("POST /apps/7/events?auth_key=k&"),
            "{text}"
        );
        let (head, body) = text.split_once("\r\n\r\n").unwrap();
        assert!(head.contains(&format!("content-length: {}", body.len())));
        let v: serde_json::Value = serde_json::from_str(body).unwrap();
        assert_eq!(
            (v["name"].as_str(), v["channel"].as_str()),
            (Some(EVENT), Some("c-1"))
        );
        let data = v["data"].as_str().unwrap();
        assert_eq!(data.len(), 30);
        assert_eq!(Header::from_text(data), Some(msg(1, 5).header));
        let md5 = hex::encode(Md5::digest(body.as_bytes()));
        assert!(head.contains(&format!("body_md5={md5}&auth_signature=")));

        let many: Vec<Outgoing> = (0..13).map(|s| msg(0, s)).collect();
        buf.clear();
        assert_eq!(enc.encode(&many, &mut buf), BATCH_LIMIT);
        let text = String::from_utf8(buf).unwrap();
        assert!(text.starts_with("POST /apps/7/batch_events?"), "{text}");
        let v: serde_json::Value =
            serde_json::from_str(text.split_once("\r\n\r\n").unwrap().1).unwrap();
        assert_eq!(v["batch"].as_array().unwrap().len(), BATCH_LIMIT);
        assert_eq!(v["batch"][9]["channel"], "c-0");
    }
}
