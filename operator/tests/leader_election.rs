//! Leader election against an in-memory Lease API that behaves like the API server where
//! kube-lease-manager relies on it: server-side apply refuses to move `holderIdentity` away from
//! another field manager (409), a strategic merge patch takes the field over or clears it.
//! It also enforces `rbac::LEASE_RULES` (403 otherwise), so the documented RBAC is exactly what
//! the election needs. Faults are injected per request: a status, a late answer, or none at all
//! (a hang). Short timings keep each test to a few seconds of real time (paused time cannot be
//! used: kube-lease-manager judges expiry by the wall clock). The last tests run whole terms of
//! leadership (`terms::lead_terms`) with fake controllers: stopped on step-down, started again
//! when this same process leads again.
use bytes::Bytes;
use http::{Request, Response, StatusCode};
use http_body_util::{BodyExt, Full};
use msgbench_operator::access::rbac::LEASE_RULES;
use msgbench_operator::runtime::context::{Readiness, Role};
use msgbench_operator::runtime::leader::{Config, Elector, Timing};
use msgbench_operator::runtime::metrics::Metrics;
use msgbench_operator::runtime::terms::lead_terms;
use msgbench_operator::runtime::watch::run_until_stopped;
use serde_json::{json, Map, Value};
use std::convert::Infallible;
use std::future::{pending, Future};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;

const NS: &str = "msgbench-system";
const LEASE: &str = "msgbench-operator";
const PATH: &str = "/apis/coordination.k8s.io/v1/namespaces/msgbench-system/leases";

const FAST: Timing = Timing {
    lease_seconds: 2,
    renew_seconds: 1,
    renew_deadline: Duration::from_millis(1500),
    api_timeout: Duration::from_millis(400),
    max_clock_skew: Duration::from_millis(100),
    stop_within: Duration::from_millis(200),
};

/// Room for a burst of failures and a few retries before the renew deadline.
const TOLERANT: Timing = Timing {
    lease_seconds: 4,
    renew_seconds: 1,
    renew_deadline: Duration::from_millis(2500),
    api_timeout: Duration::from_secs(1),
    max_clock_skew: Duration::from_millis(500),
    stop_within: Duration::from_millis(500),
};

/// Requests may take 2 s and still count.
const PATIENT: Timing = Timing {
    lease_seconds: 10,
    renew_seconds: 1,
    renew_deadline: Duration::from_secs(7),
    api_timeout: Duration::from_millis(2500),
    max_clock_skew: Duration::from_secs(1),
    stop_within: Duration::from_secs(1),
};

#[derive(Default)]
struct LeaseStore {
    lease: Option<Value>,
    /// Field manager owning spec.holderIdentity (server-side apply conflicts).
    holder_owner: Option<String>,
    rv: u64,
    /// Answer every request with this status (500: API down, 403: RBAC missing).
    fail_with: Option<u16>,
    /// Answer every request this late.
    delay: Duration,
    /// Never answer.
    hang: bool,
    /// When the Lease's renewTime was last written.
    last_renewed: Option<Instant>,
}

#[derive(Clone, Default)]
struct FakeLeaseApi(Arc<Mutex<LeaseStore>>);

impl FakeLeaseApi {
    fn client(&self) -> kube::Client {
        self.client_behind(Arc::default())
    }

    /// A client whose requests never answer while `cut` is set (a partition of one replica).
    fn client_behind(&self, cut: Arc<AtomicBool>) -> kube::Client {
        let me = self.clone();
        let svc = tower::service_fn(move |req: Request<kube::client::Body>| {
            let (me, cut) = (me.clone(), cut.clone());
            async move {
                if cut.load(Ordering::SeqCst) {
                    std::future::pending::<()>().await;
                }
                Ok::<_, Infallible>(me.handle(req).await)
            }
        });
        kube::Client::new(svc, NS)
    }

    fn delay(&self, by: Duration) {
        self.0.lock().unwrap().delay = by;
    }

    fn hang(&self) {
        self.0.lock().unwrap().hang = true;
    }

    fn last_renewed(&self) -> Instant {
        self.0.lock().unwrap().last_renewed.expect("renewed once")
    }

    fn holder(&self) -> Option<String> {
        let st = self.0.lock().unwrap();
        st.lease.as_ref()?["spec"]["holderIdentity"]
            .as_str()
            .map(String::from)
    }

    fn fail_with(&self, code: Option<u16>) {
        self.0.lock().unwrap().fail_with = code;
    }

    /// Another process writes the Lease as its own, renewed now (a dead or foreign holder).
    fn held_by(&self, holder: &str) {
        let mut st = self.0.lock().unwrap();
        let now = k8s_openapi::jiff::Timestamp::now().to_string();
        st.rv += 1;
        st.lease = Some(json!({
            "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
            "metadata": {"name": LEASE, "namespace": NS, "resourceVersion": st.rv.to_string()},
            "spec": {"holderIdentity": holder, "leaseDurationSeconds": FAST.lease_seconds,
                     "acquireTime": now, "renewTime": now, "leaseTransitions": 7},
        }));
        st.holder_owner = Some(format!("elsewhere-{holder}"));
    }

    async fn handle(&self, req: Request<kube::client::Body>) -> Response<Full<Bytes>> {
        let method = req.method().as_str().to_string();
        let path = req.uri().path().to_string();
        let query = req.uri().query().unwrap_or_default().to_string();
        let apply = req
            .headers()
            .get("content-type")
            .is_some_and(|v| v.as_bytes().starts_with(b"application/apply-patch"));
        let body = req.into_body().collect().await.unwrap().to_bytes();
        let (delay, hang) = {
            let st = self.0.lock().unwrap();
            (st.delay, st.hang)
        };
        if hang {
            std::future::pending::<()>().await;
        }
        tokio::time::sleep(delay).await;
        let mut st = self.0.lock().unwrap();
        if let Some(code) = st.fail_with {
            return status(code, "Injected", "injected failure");
        }
        let item = format!("{PATH}/{LEASE}");
        let (verb, name) = match method.as_str() {
            "GET" => ("get", path.strip_prefix(&format!("{PATH}/"))),
            "POST" => ("create", None),
            "PATCH" => ("patch", path.strip_prefix(&format!("{PATH}/"))),
            other => (other, None),
        };
        if !allowed_by_rbac(verb, name) {
            return status(403, "Forbidden", &format!("RBAC: {verb} {path}"));
        }
        match (method.as_str(), path.as_str()) {
            ("GET", p) if p == item => match &st.lease {
                Some(l) => respond(StatusCode::OK, l.clone()),
                None => status(404, "NotFound", "lease not found"),
            },
            ("POST", PATH) => {
                if st.lease.is_some() {
                    return status(409, "AlreadyExists", "lease exists");
                }
                let mut l: Value = serde_json::from_slice(&body).unwrap();
                st.rv += 1;
                l["metadata"]["resourceVersion"] = json!(st.rv.to_string());
                l["metadata"]["namespace"] = json!(NS);
                st.lease = Some(l.clone());
                respond(StatusCode::CREATED, l)
            }
            ("PATCH", p) if p == item => {
                let patch: Value = serde_json::from_slice(&body).unwrap();
                let manager = query
                    .split('&')
                    .find_map(|kv| kv.strip_prefix("fieldManager="))
                    .unwrap_or("unknown")
                    .to_string();
                st.patch(&patch, &manager, apply)
            }
            _ => panic!("fake lease API: unexpected {method} {path}"),
        }
    }
}

impl LeaseStore {
    fn patch(&mut self, patch: &Value, manager: &str, apply: bool) -> Response<Full<Bytes>> {
        let Some(lease) = self.lease.as_mut() else {
            return status(404, "NotFound", "lease not found");
        };
        let spec_patch = patch["spec"].as_object().cloned().unwrap_or_default();
        if spec_patch.contains_key("renewTime") {
            self.last_renewed = Some(Instant::now());
        }
        let current = lease["spec"]["holderIdentity"].clone();
        if let Some(wanted) = spec_patch.get("holderIdentity") {
            let owned_elsewhere = self.holder_owner.as_deref().is_some_and(|o| o != manager);
            if apply && !current.is_null() && current != *wanted && owned_elsewhere {
                return status(
                    409,
                    "Conflict",
                    "holderIdentity is owned by another manager",
                );
            }
            self.holder_owner = (!wanted.is_null()).then(|| manager.to_string());
        }
        if !lease["spec"].is_object() {
            lease["spec"] = Value::Object(Map::new());
        }
        let spec = lease["spec"].as_object_mut().unwrap();
        for (k, v) in spec_patch {
            if v.is_null() {
                spec.remove(&k);
            } else {
                spec.insert(k, v);
            }
        }
        self.rv += 1;
        lease["metadata"]["resourceVersion"] = json!(self.rv.to_string());
        respond(StatusCode::OK, lease.clone())
    }
}

/// What the chart's leader election Role allows (`rbac::LEASE_RULES`), the Lease named [`LEASE`].
fn allowed_by_rbac(verb: &str, name: Option<&str>) -> bool {
    LEASE_RULES
        .iter()
        .any(|(group, resources, verbs, by_name)| {
            *group == "coordination.k8s.io"
                && resources.contains(&"leases")
                && verbs.contains(&verb)
                && (!by_name || name == Some(LEASE))
        })
}

fn respond(code: StatusCode, v: Value) -> Response<Full<Bytes>> {
    Response::builder()
        .status(code)
        .header("content-type", "application/json")
        .body(Full::new(Bytes::from(serde_json::to_vec(&v).unwrap())))
        .unwrap()
}

fn status(code: u16, reason: &str, message: &str) -> Response<Full<Bytes>> {
    respond(
        StatusCode::from_u16(code).unwrap(),
        json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
               "message": message, "reason": reason, "code": code}),
    )
}

struct Replica {
    elector: Elector,
    readiness: Arc<Readiness>,
    metrics: Metrics,
}

async fn replica(api: &FakeLeaseApi, identity: &str) -> anyhow::Result<Replica> {
    replica_with(api.client(), identity, FAST).await
}

async fn replica_with(
    client: kube::Client,
    identity: &str,
    timing: Timing,
) -> anyhow::Result<Replica> {
    let readiness = Arc::new(Readiness::new(0));
    let metrics = Metrics::default();
    let config = Config {
        lease: LEASE.into(),
        namespace: NS.into(),
        identity: identity.into(),
        timing,
    };
    let elector = Elector::start(client, config, &metrics, readiness.clone()).await?;
    Ok(Replica {
        elector,
        readiness,
        metrics,
    })
}

async fn leads_within(r: &mut Replica, bound: Duration) -> bool {
    tokio::time::timeout(bound, r.elector.until_leader())
        .await
        .is_ok_and(|led| led.is_ok())
}

#[tokio::test]
async fn one_replica_leads_the_other_waits_and_takes_over_when_the_lease_is_released() {
    let api = FakeLeaseApi::default();
    let mut a = replica(&api, "pod-a").await.unwrap();
    assert!(leads_within(&mut a, Duration::from_secs(5)).await);
    assert_eq!(api.holder().as_deref(), Some("pod-a"));
    assert_eq!(a.readiness.role(), Role::Leader);
    assert!(a.metrics.render().contains("msgbench_leader 1"));

    let mut b = replica(&api, "pod-b").await.unwrap();
    // Longer than a whole lease: a held, renewed Lease is never taken.
    assert!(!leads_within(&mut b, Duration::from_secs(3)).await);
    assert_eq!(api.holder().as_deref(), Some("pod-a"));
    assert_eq!(b.readiness.role(), Role::Standby);
    assert!(
        b.readiness.is_ready(),
        "a standby is ready (rolling updates)"
    );
    assert!(b.metrics.render().contains("msgbench_leader 0"));

    a.elector.release().await;
    assert_eq!(api.holder(), None, "released on shutdown");
    // The standby looks again when the lease it saw would have expired (at most 2 s).
    assert!(leads_within(&mut b, Duration::from_secs(5)).await);
    assert_eq!(api.holder().as_deref(), Some("pod-b"));
}

#[tokio::test]
async fn a_standby_takes_an_abandoned_lease_only_after_it_expires() {
    let api = FakeLeaseApi::default();
    // A leader that died without releasing: its last renewal is now.
    api.held_by("dead-pod");
    let t0 = Instant::now();
    let mut b = replica(&api, "pod-b").await.unwrap();
    assert!(leads_within(&mut b, Duration::from_secs(8)).await);
    let waited = t0.elapsed();
    assert!(
        waited >= Duration::from_millis(1900),
        "took a 2 s lease after {waited:?}"
    );
    assert_eq!(api.holder().as_deref(), Some("pod-b"));
}

/// Upper bound on a renewal's trip from the elector to the fake API on a loaded machine.
const SEND_TO_ARRIVAL: Duration = Duration::from_millis(100);

/// Waits for `r` to step down; returns why and when.
async fn steps_down_within(r: &mut Replica, bound: Duration) -> (String, Instant) {
    let why = tokio::time::timeout(bound, r.elector.until_lost())
        .await
        .expect("the leader must step down");
    (why, Instant::now())
}

/// `r` is still the leader after `window` (its step-down would have ended the wait).
async fn still_leads_after(r: &mut Replica, window: Duration) -> bool {
    tokio::time::timeout(window, r.elector.until_lost())
        .await
        .is_err()
}

#[tokio::test]
async fn a_leader_that_cannot_renew_steps_down_after_the_deadline_before_the_lease_expires() {
    let api = FakeLeaseApi::default();
    let mut a = replica(&api, "pod-a").await.unwrap();
    assert!(leads_within(&mut a, Duration::from_secs(5)).await);
    api.fail_with(Some(500));
    let (why, at) = steps_down_within(&mut a, Duration::from_secs(5)).await;
    assert!(why.contains("renew deadline"), "{why}");
    let since_renewal = at - api.last_renewed();
    // The leader counts its deadline from when it sent its last good renewal (the safe end);
    // the fake records when that request arrived, a moment later.
    assert!(
        since_renewal + SEND_TO_ARRIVAL >= FAST.renew_deadline,
        "{since_renewal:?}: retries first"
    );
    let expiry = Duration::from_secs(FAST.lease_seconds) - FAST.max_clock_skew;
    assert!(
        since_renewal < expiry,
        "stepped down {since_renewal:?} after the last renewal"
    );
    assert!(a.metrics.render().contains("msgbench_leader 0"));
    assert!(!a.readiness.is_ready());
}

#[tokio::test]
async fn a_leader_facing_a_hanging_api_steps_down_before_the_lease_expires() {
    let api = FakeLeaseApi::default();
    let mut a = replica_with(api.client(), "pod-a", TOLERANT).await.unwrap();
    assert!(leads_within(&mut a, Duration::from_secs(5)).await);
    api.hang();
    let (why, at) = steps_down_within(&mut a, Duration::from_secs(8)).await;
    assert!(why.contains("renew deadline"), "{why}");
    let since_renewal = at - api.last_renewed();
    let expiry = Duration::from_secs(TOLERANT.lease_seconds) - TOLERANT.max_clock_skew;
    assert!(
        since_renewal < expiry,
        "stepped down {since_renewal:?} after the last renewal"
    );
    assert!(a
        .metrics
        .render()
        .contains("msgbench_leader_election_errors_total"));
}

#[tokio::test]
async fn a_leader_rides_out_a_burst_of_errors_shorter_than_the_deadline() {
    let api = FakeLeaseApi::default();
    let mut a = replica_with(api.client(), "pod-a", TOLERANT).await.unwrap();
    assert!(leads_within(&mut a, Duration::from_secs(5)).await);
    let before = api.last_renewed();
    api.fail_with(Some(500));
    // Until just past the first failed renewal (1 s after the last good one) and a retry.
    assert!(still_leads_after(&mut a, Duration::from_millis(1500)).await);
    api.fail_with(None);
    // Two whole leases later: still the leader, and renewing again.
    assert!(still_leads_after(&mut a, Duration::from_secs(2 * TOLERANT.lease_seconds)).await);
    assert_eq!(api.holder().as_deref(), Some("pod-a"));
    assert!(api.last_renewed() > before + Duration::from_millis(1500));
    let errors = a.metrics.render();
    assert!(
        !errors.contains("msgbench_leader_election_errors_total 0"),
        "{errors}"
    );
    assert_eq!(a.readiness.role(), Role::Leader);
}

#[tokio::test]
async fn a_leader_rides_out_answers_slower_than_a_second() {
    let api = FakeLeaseApi::default();
    let mut a = replica_with(api.client(), "pod-a", PATIENT).await.unwrap();
    assert!(leads_within(&mut a, Duration::from_secs(5)).await);
    api.delay(Duration::from_secs(2));
    let before = api.last_renewed();
    assert!(still_leads_after(&mut a, Duration::from_secs(PATIENT.lease_seconds)).await);
    assert!(api.last_renewed() > before, "slow renewals still count");
    assert_eq!(api.holder().as_deref(), Some("pod-a"));
}

#[tokio::test]
async fn a_partitioned_leader_stops_before_the_standby_takes_over() {
    let api = FakeLeaseApi::default();
    let cut = Arc::new(AtomicBool::new(false));
    let mut a = replica_with(api.client_behind(cut.clone()), "pod-a", TOLERANT)
        .await
        .unwrap();
    assert!(leads_within(&mut a, Duration::from_secs(5)).await);
    let mut b = replica_with(api.client(), "pod-b", TOLERANT).await.unwrap();
    cut.store(true, Ordering::SeqCst);
    let a_lost =
        tokio::spawn(async move { steps_down_within(&mut a, Duration::from_secs(8)).await.1 });
    assert!(leads_within(&mut b, Duration::from_secs(15)).await);
    let b_leads = Instant::now();
    let a_lost = a_lost.await.unwrap();
    assert!(
        a_lost < b_leads,
        "two leaders: b led {:?} before a stopped",
        a_lost - b_leads
    );
    assert_eq!(api.holder().as_deref(), Some("pod-b"));
}

#[tokio::test]
async fn a_leader_that_finds_another_holder_steps_down() {
    let api = FakeLeaseApi::default();
    let mut a = replica(&api, "pod-a").await.unwrap();
    assert!(leads_within(&mut a, Duration::from_secs(5)).await);
    api.held_by("usurper");
    let why = tokio::time::timeout(Duration::from_secs(5), a.elector.until_lost())
        .await
        .expect("a leader must notice another holder at its next renewal");
    assert!(why.contains("another replica"), "{why}");
}

#[tokio::test]
async fn missing_rbac_is_an_error_naming_the_role() {
    let api = FakeLeaseApi::default();
    api.fail_with(Some(403));
    let err = match replica(&api, "pod-a").await {
        Ok(_) => panic!("a Forbidden lease must not be retried forever"),
        Err(e) => e.to_string(),
    };
    assert!(err.contains("get, create and patch on leases"), "{err}");
}

#[tokio::test]
async fn a_standby_waits_out_an_unreachable_api_and_then_leads() {
    let api = FakeLeaseApi::default();
    api.fail_with(Some(503));
    let api2 = api.clone();
    let start = tokio::spawn(async move { replica(&api2, "pod-a").await });
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert!(!start.is_finished(), "retries while the API is down");
    api.fail_with(None);
    let mut a = tokio::time::timeout(Duration::from_secs(5), start)
        .await
        .expect("reaches the lease once the API answers")
        .unwrap()
        .unwrap();
    assert!(leads_within(&mut a, Duration::from_secs(5)).await);
}

/// Stands in for the four controllers: each term runs until its `stop` is cancelled, through
/// the same `run_until_stopped` as the real ones, and is counted when it starts and stops.
#[derive(Default)]
struct FakeControllers {
    started: AtomicUsize,
    running: AtomicUsize,
    stopped: AtomicUsize,
    last_stop: Mutex<Option<Instant>>,
}

/// Held by a running term; dropping it (the term's future ended or was dropped) counts a stop.
struct Term(Arc<FakeControllers>);

impl Drop for Term {
    fn drop(&mut self) {
        *self.0.last_stop.lock().unwrap() = Some(Instant::now());
        self.0.running.fetch_sub(1, Ordering::SeqCst);
        self.0.stopped.fetch_add(1, Ordering::SeqCst);
    }
}

impl FakeControllers {
    fn start(
        self: &Arc<Self>,
    ) -> impl FnMut(CancellationToken) -> std::pin::Pin<Box<dyn Future<Output = ()> + Send>> {
        let me = self.clone();
        move |stop| {
            me.started.fetch_add(1, Ordering::SeqCst);
            me.running.fetch_add(1, Ordering::SeqCst);
            let term = Term(me.clone());
            Box::pin(async move {
                let _term = term;
                run_until_stopped(&stop, pending(), pending()).await;
            })
        }
    }

    /// (started, running, stopped)
    fn counts(&self) -> (usize, usize, usize) {
        (
            self.started.load(Ordering::SeqCst),
            self.running.load(Ordering::SeqCst),
            self.stopped.load(Ordering::SeqCst),
        )
    }
}

/// Waits until `cond` holds, failing the test with `what` after `bound`.
async fn eventually(bound: Duration, what: &str, cond: impl Fn() -> bool) {
    let deadline = Instant::now() + bound;
    while !cond() {
        assert!(Instant::now() < deadline, "not within {bound:?}: {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Runs `r`'s terms of leadership in the background, with `controllers` for each term.
fn lead_in_background(
    mut r: Replica,
    controllers: Arc<FakeControllers>,
) -> tokio::task::JoinHandle<anyhow::Result<()>> {
    tokio::spawn(async move { lead_terms(&mut r.elector, controllers.start(), pending()).await })
}

#[tokio::test]
async fn a_leader_that_loses_the_lease_stops_its_controllers_and_leads_again_in_process() {
    let api = FakeLeaseApi::default();
    let a = replica(&api, "pod-a").await.unwrap();
    let (readiness, metrics) = (a.readiness.clone(), a.metrics.clone());
    let fake = Arc::new(FakeControllers::default());
    let terms = lead_in_background(a, fake.clone());
    eventually(Duration::from_secs(5), "first term running", || {
        fake.counts() == (1, 1, 0)
    })
    .await;
    assert_eq!(api.holder().as_deref(), Some("pod-a"));
    assert_eq!(readiness.role(), Role::Leader);

    api.held_by("usurper");
    eventually(Duration::from_secs(5), "first term stopped", || {
        fake.counts() == (1, 0, 1)
    })
    .await;
    eventually(Duration::from_secs(2), "standby again", || {
        readiness.role() == Role::Standby
    })
    .await;
    assert!(readiness.is_ready(), "a standby is ready");
    assert!(metrics.render().contains("msgbench_leader 0"));
    assert!(!terms.is_finished(), "campaigns again instead of ending");

    // The usurper never renews: once its Lease expires (2 s) the same process leads again.
    eventually(Duration::from_secs(8), "second term running", || {
        fake.counts() == (2, 1, 1)
    })
    .await;
    assert_eq!(api.holder().as_deref(), Some("pod-a"));
    assert_eq!(readiness.role(), Role::Leader);
    assert!(metrics.render().contains("msgbench_leader 1"));
    terms.abort();
}

#[tokio::test]
async fn a_lone_leader_cut_off_past_its_deadline_stops_then_leads_again_when_the_api_is_back() {
    let api = FakeLeaseApi::default();
    let a = replica(&api, "pod-a").await.unwrap();
    let readiness = a.readiness.clone();
    let fake = Arc::new(FakeControllers::default());
    let terms = lead_in_background(a, fake.clone());
    eventually(Duration::from_secs(5), "first term running", || {
        fake.counts() == (1, 1, 0)
    })
    .await;

    api.fail_with(Some(500));
    eventually(Duration::from_secs(5), "first term stopped", || {
        fake.counts() == (1, 0, 1)
    })
    .await;
    let stopped = fake.last_stop.lock().unwrap().expect("stopped");
    let since_renewal = stopped - api.last_renewed();
    let expiry = Duration::from_secs(FAST.lease_seconds) - FAST.max_clock_skew;
    assert!(
        since_renewal < expiry,
        "controllers stopped {since_renewal:?} after the last renewal, not before {expiry:?}"
    );
    assert_eq!(
        readiness.role(),
        Role::Campaigning,
        "not ready while the Lease cannot be reached"
    );

    // The Lease still names this pod; a new campaign renews it and leads again (the old lease
    // manager would renew it silently and never report leadership).
    api.fail_with(None);
    eventually(Duration::from_secs(8), "second term running", || {
        fake.counts() == (2, 1, 1)
    })
    .await;
    assert_eq!(api.holder().as_deref(), Some("pod-a"));
    assert_eq!(readiness.role(), Role::Leader);
    assert!(!terms.is_finished());
    terms.abort();
}
