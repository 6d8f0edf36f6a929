//! In-process tests of the routes with hostile and odd inputs: arbitrary publish bodies and
//! query strings (proptest), the byte-bounded cache, store-then-ack through the handler.
use std::time::Duration;

use axum::body::Body;
use axum::http::{Request, StatusCode};
use http_body_util::BodyExt;
use proptest::prelude::*;
use serde_json::Value;
use tower::ServiceExt;

use crate::app::Runtime;
use crate::config::Config;
use crate::{build, Built};

fn built(env: &[(&str, &str)]) -> Built {
    let env: Vec<(String, String)> = env
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    let cfg =
        Config::from_lookup(&move |k| env.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone()))
            .unwrap();
    let runtime = Runtime {
        worker_threads: 1,
        cpus_allowed: 1,
        cpu_limit: None,
    };
    build(cfg, runtime).unwrap()
}

async fn call(b: &Built, req: Request<Body>) -> (StatusCode, Value) {
    let res = b.router.clone().oneshot(req).await.unwrap();
    let status = res.status();
    let bytes = res.into_body().collect().await.unwrap().to_bytes();
    let v = serde_json::from_slice(&bytes)
        .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&bytes).into_owned()));
    (status, v)
}

fn post(body: Vec<u8>) -> Request<Body> {
    Request::post("/publish")
        .header("content-type", "application/json")
        .body(Body::from(body))
        .unwrap()
}

/// Any JSON value, a few levels deep.
fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        any::<f64>()
            .prop_map(|f| serde_json::Number::from_f64(f).map_or(Value::Null, Value::Number)),
        ".{0,40}".prop_map(Value::from),
    ];
    leaf.prop_recursive(3, 24, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::from),
            prop::collection::btree_map(".{0,8}", inner, 0..4)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

/// Publish bodies: raw bytes, or objects with each field present, absent or of any type.
fn publish_body() -> impl Strategy<Value = Vec<u8>> {
    let field = prop::option::of(prop_oneof![".{0,300}".prop_map(Value::from), json_value()]);
    let object = (field.clone(), prop::option::of(json_value()), field).prop_map(|(t, p, u)| {
        let mut o = serde_json::Map::new();
        for (k, v) in [("topic", t), ("payload", p), ("publisher", u)] {
            if let Some(v) = v {
                o.insert(k.into(), v);
            }
        }
        serde_json::to_vec(&Value::Object(o)).unwrap()
    });
    prop_oneof![prop::collection::vec(any::<u8>(), 0..300), object]
}

/// Query strings: the parameters the endpoints use and others, with odd values and escapes.
fn query() -> impl Strategy<Value = String> {
    let key = prop_oneof![
        Just("limit".to_owned()),
        Just("before".to_owned()),
        Just("topic".to_owned()),
        Just("message_id".to_owned()),
        "[a-z_%0-9]{0,6}",
    ];
    let value = prop_oneof![
        any::<i64>().prop_map(|n| n.to_string()),
        any::<u64>().prop_map(|n| n.to_string()),
        "[a-zA-Z0-9%+._~-]{0,300}",
    ];
    prop::collection::vec((key, value), 0..5).prop_map(|kv| {
        kv.iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join("&")
    })
}

fn read_path() -> impl Strategy<Value = &'static str> {
    prop::sample::select(vec![
        "/messages",
        "/consumptions",
        "/clients",
        "/graph/state",
        "/health",
    ])
}

fn no_5xx(status: StatusCode, what: &str, v: &Value) -> Result<(), TestCaseError> {
    prop_assert!(
        status.is_success() || status.is_client_error(),
        "{what} -> {status} {v}"
    );
    Ok(())
}

#[test]
fn arbitrary_publish_and_read_inputs_get_2xx_or_4xx() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let b = rt.block_on(async { built(&[("CACHE_TTL_SECONDS", "1")]) });
    let cfg = ProptestConfig {
        cases: 128,
        failure_persistence: None,
        ..ProptestConfig::default()
    };
    proptest!(cfg, |(body in publish_body(), path in read_path(), q in query())| {
        let (status, v) = rt.block_on(call(&b, post(body.clone())));
        no_5xx(status, &String::from_utf8_lossy(&body), &v)?;
        let uri = format!("{path}?{q}");
        let req = Request::get(&uri).body(Body::empty()).unwrap();
        let (status, v) = rt.block_on(call(&b, req));
        no_5xx(status, &uri, &v)?;
    });
}

#[tokio::test]
async fn the_page_cache_is_bounded_in_bytes() {
    let cache = crate::app::page_cache(4 << 20, Duration::from_secs(3600));
    for i in 0..100 {
        let page = bytes::Bytes::from(vec![b'x'; 1 << 20]);
        cache.insert(format!("/messages?x={i}"), page).await;
    }
    cache.run_pending_tasks().await;
    assert!(
        cache.weighted_size() <= 4 << 20,
        "{} bytes cached",
        cache.weighted_size()
    );
    assert!(
        cache.entry_count() <= 4,
        "{} pages cached",
        cache.entry_count()
    );
}

/// PUBLISH_ACK=stored (the default with a file): the 200 comes after the commit.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stored_publish_is_answered_after_its_commit() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("ack.db");
    let b = built(&[("DATABASE_FILE", db.to_str().unwrap())]);
    let body = br#"{"topic":"t","payload":1}"#.to_vec();
    let (status, _) = call(&b, post(body.clone())).await; // reserves the id block
    assert_eq!(status, StatusCode::OK);

    let guard = b.app.store.hold();
    let pending = tokio::spawn(b.router.clone().oneshot(post(body)));
    let early = tokio::time::timeout(Duration::from_millis(300), async {
        while !pending.is_finished() {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await;
    assert!(
        early.is_err(),
        "answered while the database could not commit"
    );
    drop(guard);
    let res = pending.await.unwrap().unwrap();
    assert_eq!(res.status(), StatusCode::OK);
    let (items, _) = b.app.store.messages(None, None, 10).unwrap();
    assert_eq!(items.len(), 2, "both acknowledged publishes are stored");
}
