//! A TLS front that checks a token as a server that requires one does: it terminates TLS with
//! a test certificate, reads the first request head of each connection, answers 401 unless
//! the token is where [`Expect`] says, and otherwise passes the connection through to the
//! plain server behind it (the in-test WebSocket servers, the Socket.IO harness).
use super::pki::{server_config, Issued};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// Where the gateway wants the token.
#[derive(Clone, Debug)]
pub enum Expect {
    /// This header with exactly this value.
    Header(&'static str, String),
    /// This query parameter, URL-encoded as `encoded`.
    Query(&'static str, String),
}

impl Expect {
    fn accepts(&self, head: &str) -> bool {
        match self {
            Expect::Header(name, value) => head.lines().skip(1).any(|l| {
                l.split_once(':')
                    .is_some_and(|(n, v)| n.trim().eq_ignore_ascii_case(name) && v.trim() == value)
            }),
            Expect::Query(name, encoded) => {
                let target = head.split(' ').nth(1).unwrap_or_default();
                let query = target.split_once('?').map_or("", |q| q.1);
                query.split('&').any(|kv| kv == format!("{name}={encoded}"))
            }
        }
    }
}

/// Serves TLS with `cert` on a free loopback port, in front of `127.0.0.1:backend`.
pub async fn tls_token_gateway(backend: u16, cert: &Issued, expect: Expect) -> u16 {
    let acceptor = tokio_rustls::TlsAcceptor::from(server_config(cert));
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = l.local_addr().unwrap().port();
    tokio::spawn(async move {
        while let Ok((tcp, _)) = l.accept().await {
            let (acceptor, expect) = (acceptor.clone(), expect.clone());
            tokio::spawn(async move {
                let Ok(mut tls) = acceptor.accept(tcp).await else {
                    return;
                };
                let mut head = Vec::new();
                let mut buf = [0u8; 4096];
                while !head.windows(4).any(|w| w == b"\r\n\r\n") {
                    match tls.read(&mut buf).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => head.extend_from_slice(&buf[..n]),
                    }
                }
                if !expect.accepts(&String::from_utf8_lossy(&head)) {
                    let no = b"HTTP/1.1 401 Unauthorized\r\ncontent-length: 10\r\nconnection: close\r\n\r\nbad token\n";
                    let _ = tls.write_all(no).await;
                    let _ = tls.shutdown().await;
                    return;
                }
                let Ok(mut up) = TcpStream::connect(("127.0.0.1", backend)).await else {
                    return;
                };
                if up.write_all(&head).await.is_ok() {
                    let _ = tokio::io::copy_bidirectional(&mut tls, &mut up).await;
                }
            });
        }
    });
    port
}
