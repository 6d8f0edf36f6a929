//! AUTH_TOKEN: the settings and their errors, where a token is accepted, and the 401s of the
//! server served in process (WebSocket upgrade, Socket.IO handshake, REST), with and without TLS.
use axum::http::{HeaderValue, Uri};

use super::*;
use crate::test_server::*;

const TOKEN: &str = "s3cr3t+t0ken/42";
/// TOKEN URL-encoded, as a client puts it in a query.
const TOKEN_QUERY: &str = "s3cr3t%2Bt0ken%2F42";

fn auth(env: &[(&str, &str)]) -> Auth {
    config(env).unwrap().auth.expect("auth configured")
}

fn admits(a: &Auth, headers: &[(&str, &str)], uri: &str) -> bool {
    let mut map = HeaderMap::new();
    for (k, v) in headers {
        let name = HeaderName::from_bytes(k.as_bytes()).unwrap();
        map.append(name, HeaderValue::from_str(v).unwrap());
    }
    a.admits(&map, &uri.parse::<Uri>().unwrap())
}

#[test]
fn settings_and_their_errors() {
    assert!(config(&[]).unwrap().auth.is_none(), "no token: open");
    let cases: [(&[(&str, &str)], &str); 6] = [
        (&[("AUTH_HEADER", "x-token")], "AUTH_HEADER"),
        (&[("AUTH_QUERY", "token")], "AUTH_QUERY"),
        (
            &[(TOKEN_VAR, TOKEN), ("AUTH_HEADER", "bad header")],
            "AUTH_HEADER",
        ),
        (&[(TOKEN_VAR, TOKEN), ("AUTH_QUERY", "a&b")], "AUTH_QUERY"),
        (&[(TOKEN_VAR, "")], TOKEN_VAR),
        (&[(TOKEN_VAR, "s3cr3t+t0ken/42\n")], TOKEN_VAR),
    ];
    for (env, var) in cases {
        let err = config(env).unwrap_err().to_string();
        assert!(err.starts_with(&format!("{var}=")), "{err}");
        assert!(
            !err.contains(TOKEN),
            "the token is never in an error: {err}"
        );
    }
    let c = config(&[(TOKEN_VAR, TOKEN), ("AUTH_HEADER", "X-Api-Key")]).unwrap();
    let debug = format!("{c:?}");
    assert!(debug.contains("x-api-key"), "{debug}");
    assert!(
        !debug.contains(TOKEN),
        "the token is never in Debug: {debug}"
    );
}

#[test]
fn where_the_token_is_accepted() {
    let a = auth(&[(TOKEN_VAR, TOKEN)]);
    assert!(admits(&a, &[("authorization", TOKEN)], "/ws"));
    assert!(admits(
        &a,
        &[("authorization", &format!("Bearer {TOKEN}"))],
        "/ws"
    ));
    assert!(admits(
        &a,
        &[("authorization", &format!("bearer {TOKEN}"))],
        "/ws"
    ));
    assert!(!admits(&a, &[], "/ws"));
    assert!(!admits(&a, &[("authorization", "Bearer wrong")], "/ws"));
    assert!(!admits(
        &a,
        &[("authorization", &format!("Basic {TOKEN}"))],
        "/ws"
    ));
    assert!(!admits(
        &a,
        &[("authorization", &format!("{TOKEN}x"))],
        "/ws"
    ));
    assert!(
        !admits(&a, &[], &format!("/ws?token={TOKEN_QUERY}")),
        "no AUTH_QUERY: a query is not looked at"
    );

    let custom = auth(&[(TOKEN_VAR, TOKEN), ("AUTH_HEADER", "X-Api-Key")]);
    assert!(admits(&custom, &[("x-api-key", TOKEN)], "/ws"));
    assert!(!admits(
        &custom,
        &[("x-api-key", &format!("Bearer {TOKEN}"))],
        "/ws"
    ));
    assert!(!admits(&custom, &[("authorization", TOKEN)], "/ws"));

    let q = auth(&[(TOKEN_VAR, TOKEN), ("AUTH_QUERY", "token")]);
    assert!(admits(&q, &[], &format!("/ws?x=1&token={TOKEN_QUERY}")));
    assert!(
        admits(&q, &[("authorization", TOKEN)], "/ws"),
        "the header too"
    );
    assert!(!admits(&q, &[], "/ws?token=wrong"));
    assert!(!admits(&q, &[], &format!("/ws?other={TOKEN_QUERY}")));
}

const WITH_TOKEN: [(&str, &str); 2] = [(TOKEN_VAR, TOKEN), ("AUTH_QUERY", "token")];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_websocket_upgrade_needs_the_token() {
    let server = start(&WITH_TOKEN).await;
    let at = server.addr;
    let refused = [
        ws(at, None, "/ws", &[]).await,
        ws(at, None, "/ws", &[("authorization", "Bearer wrong")]).await,
        ws(at, None, "/ws?token=wrong", &[]).await,
    ];
    for r in refused {
        assert_eq!(refused_status(r), 401);
    }
    let bearer = format!("Bearer {TOKEN}");
    let query = format!("/ws?token={TOKEN_QUERY}");
    for (path, headers) in [
        ("/ws", vec![("authorization", TOKEN)]),
        ("/ws", vec![("authorization", bearer.as_str())]),
        (query.as_str(), vec![]),
    ] {
        let mut c = ws(at, None, path, &headers).await.unwrap();
        send_text(&mut c, "hi").await;
        assert_eq!(next_text(&mut c).await, "hi");
    }
    assert_eq!(server.app.metrics.auth_refused.get(), 3);
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_socketio_handshake_needs_the_token() {
    let server = start(&WITH_TOKEN).await;
    let at = server.addr;
    let polling = "/socket.io/?EIO=4&transport=polling";
    let (status, body) = request(at, None, "GET", polling, &[], "").await;
    assert_eq!(status, 401, "{body}");
    let wrong = [("authorization", "Bearer wrong")];
    assert_eq!(request(at, None, "GET", polling, &wrong, "").await.0, 401);

    let bearer = format!("Bearer {TOKEN}");
    let (status, body) = request(
        at,
        None,
        "GET",
        polling,
        &[("authorization", bearer.as_str())],
        "",
    )
    .await;
    assert_eq!(status, 200, "{body}");
    assert!(body.starts_with("0{"), "an Engine.IO open packet: {body}");
    let by_query = format!("{polling}&token={TOKEN_QUERY}");
    let (status, body) = request(at, None, "GET", &by_query, &[], "").await;
    assert_eq!(status, 200, "{body}");

    let websocket = "/socket.io/?EIO=4&transport=websocket";
    assert_eq!(refused_status(ws(at, None, websocket, &[]).await), 401);
    let mut c = ws(at, None, websocket, &[("authorization", bearer.as_str())])
        .await
        .unwrap();
    assert!(next_text(&mut c).await.starts_with("0{"));
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rest_needs_the_token_but_health_and_metrics_do_not() {
    let server = start(&WITH_TOKEN).await;
    let at = server.addr;
    let body = r#"{"topic":"t","payload":1}"#;
    let (status, v) = request(at, None, "POST", "/publish", &[], body).await;
    assert_eq!(status, 401, "{v}");
    assert_eq!(v, r#"{"error":"auth: missing or wrong token"}"#);
    assert_eq!(request(at, None, "GET", "/messages", &[], "").await.0, 401);
    let token = [("authorization", TOKEN)];
    assert_eq!(
        request(at, None, "POST", "/publish", &token, body).await.0,
        200
    );
    assert_eq!(
        request(at, None, "GET", "/messages", &token, "").await.0,
        200
    );

    assert_eq!(request(at, None, "GET", "/health", &[], "").await.0, 200);
    let (status, metrics) = request(at, None, "GET", "/metrics", &[], "").await;
    assert_eq!(status, 200);
    assert!(metrics.contains("pubsub_auth_refused_total 2"), "{metrics}");
    assert!(!metrics.contains(TOKEN) && !metrics.contains(TOKEN_QUERY));
    server.stop().await;
}

/// What a team benchmarks: `wss://` with `Authorization: Bearer <token>`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tls_and_token_together() {
    let pki = Pki::new();
    let server = start_tls(&pki, &[(TOKEN_VAR, TOKEN)]).await;
    let client = pki.client();
    let refused = ws(server.addr, Some(&client), "/ws", &[]).await;
    assert_eq!(refused_status(refused), 401);
    let bearer = format!("Bearer {TOKEN}");
    let mut c = ws(
        server.addr,
        Some(&client),
        "/ws",
        &[("authorization", bearer.as_str())],
    )
    .await
    .unwrap();
    send_text(&mut c, "secure").await;
    assert_eq!(next_text(&mut c).await, "secure");
    server.stop().await;
}
