//! A tiny in-memory Kubernetes API behind a kube `Client`: list by label, server-side apply,
//! status apply, delete, event creation. It records every write so tests can count them.
// Each test binary uses a part of it.
#![allow(dead_code)]

mod rbac;

use bytes::Bytes;
use http::{Request, Response, StatusCode};
use http_body_util::{BodyExt, Full};
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::convert::Infallible;
use std::sync::{Arc, Mutex};

#[derive(Default)]
pub struct State {
    /// Object path (`/apis/apps/v1/namespaces/ns/statefulsets/name`) -> object.
    pub objects: BTreeMap<String, Value>,
    /// (verb, path) of every write.
    pub writes: Vec<(String, String)>,
    /// (path, DeleteOptions body) of every DELETE.
    pub delete_options: Vec<(String, Value)>,
    /// Path of every read (GET), objects and collections.
    pub reads: Vec<String>,
    /// Status writes fail (HTTP 500) once a pod was deleted, until this is cleared: a status
    /// write lost right after a fault's delete.
    pub fail_status_after_pod_delete: bool,
    pod_deleted: bool,
    next_rv: u64,
}

#[derive(Clone, Default)]
pub struct FakeApi(pub Arc<Mutex<State>>);

impl FakeApi {
    pub fn client(&self) -> kube::Client {
        let me = self.clone();
        let svc = tower::service_fn(move |req: Request<kube::client::Body>| {
            let me = me.clone();
            async move { Ok::<_, Infallible>(me.handle(req).await) }
        });
        kube::Client::new(svc, "default")
    }

    pub fn insert(&self, path: &str, obj: Value) {
        self.0.lock().unwrap().objects.insert(path.into(), obj);
    }
    pub fn get(&self, path: &str) -> Option<Value> {
        self.0.lock().unwrap().objects.get(path).cloned()
    }
    /// Status writes work again (see `fail_status_after_pod_delete`).
    pub fn heal_status_writes(&self) {
        let mut st = self.0.lock().unwrap();
        st.fail_status_after_pod_delete = false;
        st.pod_deleted = false;
    }
    pub fn remove(&self, path: &str) {
        self.0.lock().unwrap().objects.remove(path);
    }
    /// Writes since the last call.
    pub fn take_writes(&self) -> Vec<(String, String)> {
        std::mem::take(&mut self.0.lock().unwrap().writes)
    }

    async fn handle(&self, req: Request<kube::client::Body>) -> Response<Full<Bytes>> {
        let method = req.method().as_str().to_string();
        let path = req.uri().path().trim_end_matches('/').to_string();
        let query = req.uri().query().unwrap_or_default().to_string();
        let body = req
            .into_body()
            .collect()
            .await
            .map(|b| b.to_bytes())
            .unwrap_or_default();
        if let Err(why) = rbac::granted(&method, &path, &query) {
            return forbidden(&why);
        }
        let mut st = self.0.lock().unwrap();
        match method.as_str() {
            "GET" => {
                st.reads.push(path.clone());
                if let Some(obj) = st.objects.get(&path) {
                    return respond(StatusCode::OK, obj.clone());
                }
                // A collection: objects directly below the path.
                let prefix = format!("{path}/");
                let selector = label_selector(&query);
                let name = named(&query);
                let items: Vec<Value> = st
                    .objects
                    .iter()
                    .filter(|(p, _)| p.starts_with(&prefix) && !p[prefix.len()..].contains('/'))
                    .filter(|(_, o)| matches(&selector, &o["metadata"]["labels"]))
                    .filter(|(_, o)| name.as_ref().is_none_or(|n| o["metadata"]["name"] == *n))
                    .map(|(_, o)| o.clone())
                    .collect();
                if items.is_empty() && !is_collection(&path) {
                    return not_found(&path);
                }
                respond(
                    StatusCode::OK,
                    json!({"apiVersion": "v1", "kind": "List", "metadata": {"resourceVersion": "1"}, "items": items}),
                )
            }
            "PATCH" => {
                let patch: Value = serde_json::from_slice(&body).expect("apply body is JSON");
                st.writes.push(("PATCH".into(), path.clone()));
                st.next_rv += 1;
                let rv = st.next_rv.to_string();
                if let Some(obj_path) = path.strip_suffix("/status") {
                    if st.fail_status_after_pod_delete && st.pod_deleted {
                        return server_error(&path);
                    }
                    let Some(obj) = st.objects.get_mut(obj_path) else {
                        return not_found(&path);
                    };
                    obj["status"] = patch["status"].clone();
                    obj["metadata"]["resourceVersion"] = json!(rv);
                    return respond(StatusCode::OK, obj.clone());
                }
                let mut obj = patch;
                obj["metadata"]["resourceVersion"] = json!(rv);
                obj["metadata"]["uid"] = json!(format!("uid-{rv}"));
                st.objects.insert(path, obj.clone());
                respond(StatusCode::OK, obj)
            }
            "DELETE" => {
                st.writes.push(("DELETE".into(), path.clone()));
                let options = serde_json::from_slice(&body).unwrap_or(Value::Null);
                st.delete_options.push((path.clone(), options));
                st.pod_deleted |= path.contains("/pods/");
                match st.objects.remove(&path) {
                    Some(_) => respond(
                        StatusCode::OK,
                        json!({"kind": "Status", "apiVersion": "v1", "status": "Success", "metadata": {}}),
                    ),
                    None => not_found(&path),
                }
            }
            "POST" => {
                st.writes.push(("POST".into(), path.clone()));
                let mut obj: Value = serde_json::from_slice(&body).expect("JSON body");
                // Created objects are kept (events are only counted).
                if !path.ends_with("/events") {
                    let name = obj["metadata"]["name"].as_str().unwrap_or_default();
                    let at = format!("{path}/{name}");
                    if st.objects.contains_key(&at) {
                        return respond(
                            StatusCode::CONFLICT,
                            json!({"kind": "Status", "apiVersion": "v1", "metadata": {},
                                   "status": "Failure", "reason": "AlreadyExists", "code": 409}),
                        );
                    }
                    st.next_rv += 1;
                    obj["metadata"]["resourceVersion"] = json!(st.next_rv.to_string());
                    obj["metadata"]["uid"] = json!(format!("uid-{}", st.next_rv));
                    st.objects.insert(at, obj.clone());
                }
                respond(StatusCode::CREATED, obj)
            }
            other => panic!("fake API: unexpected {other} {path}"),
        }
    }
}

fn is_collection(path: &str) -> bool {
    // .../namespaces/<ns>/<plural> has an odd segment count after the API prefix.
    let segs: Vec<&str> = path.trim_start_matches('/').split('/').collect();
    let after = if segs.first() == Some(&"api") {
        &segs[2..]
    } else {
        &segs[3.min(segs.len())..]
    };
    after.len() % 2 == 1
}

/// `fieldSelector=metadata.name=<name>`, the one field selector the operator uses.
fn named(query: &str) -> Option<String> {
    query
        .split('&')
        .filter_map(|kv| kv.strip_prefix("fieldSelector="))
        .find_map(|s| {
            let s = s.replace("%3D", "=").replace("%2E", ".");
            s.strip_prefix("metadata.name=").map(str::to_string)
        })
}

fn label_selector(query: &str) -> Vec<(String, String)> {
    query
        .split('&')
        .filter_map(|kv| kv.strip_prefix("labelSelector="))
        .flat_map(|s| {
            let s = s
                .replace("%3D", "=")
                .replace("%2C", ",")
                .replace("%2F", "/");
            s.split(',')
                .filter_map(|kv| {
                    kv.split_once('=')
                        .map(|(k, v)| (k.to_string(), v.to_string()))
                })
                .collect::<Vec<_>>()
        })
        .collect()
}

fn matches(selector: &[(String, String)], labels: &Value) -> bool {
    selector
        .iter()
        .all(|(k, v)| labels.get(k).and_then(Value::as_str) == Some(v.as_str()))
}

fn respond(code: StatusCode, v: Value) -> Response<Full<Bytes>> {
    Response::builder()
        .status(code)
        .header("content-type", "application/json")
        .body(Full::new(Bytes::from(serde_json::to_vec(&v).unwrap())))
        .unwrap()
}

fn forbidden(why: &str) -> Response<Full<Bytes>> {
    respond(
        StatusCode::FORBIDDEN,
        json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
               "message": why, "reason": "Forbidden", "code": 403}),
    )
}

fn not_found(path: &str) -> Response<Full<Bytes>> {
    respond(
        StatusCode::NOT_FOUND,
        json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
               "message": format!("{path} not found"), "reason": "NotFound", "code": 404}),
    )
}

fn server_error(path: &str) -> Response<Full<Bytes>> {
    respond(
        StatusCode::INTERNAL_SERVER_ERROR,
        json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
               "message": format!("{path}: etcd timeout"), "reason": "InternalError", "code": 500}),
    )
}
