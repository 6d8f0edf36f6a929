//! Leader election on a `coordination.k8s.io/v1` Lease, so that several operator replicas can run
//! and exactly one of them reconciles.
//!
//! Built on kube-lease-manager (maintained, server-side-apply based; its 0.13 line is the one built
//! on kube 5 / k8s-openapi 0.29 — kubert's lease module still requires kube 1.x). The crate keeps
//! renewing and says when this replica gains or loses the Lease; it neither bounds a request
//! (kube's client timeouts do not cap a whole exchange) nor says when a renewal *succeeds*. This
//! wrapper adds both, client-go style, through the client it hands the crate ([`bounded_client`]):
//! - every Lease request, body included, is cut off after [`Timing::api_timeout`];
//! - every successful renewal (a PATCH setting `renewTime`) is recorded;
//! - a leader whose renewal fails retries with a short backoff and stays leader while its last
//!   successful renewal is younger than [`Timing::renew_deadline`]; past it, or on finding
//!   another holder, it steps down: [`super::terms::lead_terms`] stops the controllers within
//!   [`Timing::stop_within`] (the process exits if they do not), then campaigns again as
//!   a standby in the same process ([`Elector::campaign_again`]), with a new lease manager
//!   and counting only renewals sent after the step-down;
//! - [`Timing::check`] proves the controllers have stopped before the Lease can expire for the
//!   others.
//!
//! A standby's `/readyz` is ready (see [`crate::runtime::context::Readiness`]): a rolling update
//! starts the new pod as a standby and must count it as available. `/metrics` has `msgbench_leader` (1 while
//! this replica holds the Lease) and `msgbench_leader_election_errors_total`; every change of
//! leadership is logged.
use super::context::{Readiness, Role};
use super::metrics::Metrics;
use k8s_openapi::api::coordination::v1::Lease;
use kube::{Api, Client};
use kube_lease_manager::{LeaseCreateMode, LeaseManager, LeaseManagerError, LeaseParams};
use prometheus::{IntCounter, IntGauge};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio::time::Instant;

/// Lease name when `--leader-election-lease` is not given (the chart passes `<release>-operator`).
pub const DEFAULT_LEASE_NAME: &str = "msgbench-operator";

/// How the Lease is held. Whole seconds where the Lease has them (`leaseDurationSeconds`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Timing {
    /// A Lease not renewed for this long may be taken by a standby.
    pub lease_seconds: u64,
    /// The holder renews this long after its last renewal.
    pub renew_seconds: u64,
    /// A leader whose last successful renewal is this old steps down (failed renewals are
    /// retried until then).
    pub renew_deadline: Duration,
    /// Bound on one Lease request, answer body included.
    pub api_timeout: Duration,
    /// Clock difference between nodes the timing tolerates (standbys judge expiry by their clock).
    pub max_clock_skew: Duration,
    /// Bound on stopping the controllers once stepped down. They are dropped, not drained, so
    /// this only runs out when a reconcile holds a worker thread; then the process exits.
    pub stop_within: Duration,
}

impl Timing {
    /// 15 s lease, renewed every 5 s and retried until 10 s, 3 s per request, 2 s clock skew
    /// (client-go's lease and renew deadline), controllers stopped within 1 s: 10 + 1 + 2 s
    /// leaves 2 s before the lease can expire.
    pub const DEFAULT: Timing = Timing {
        lease_seconds: 15,
        renew_seconds: 5,
        renew_deadline: Duration::from_secs(10),
        api_timeout: Duration::from_secs(3),
        max_clock_skew: Duration::from_secs(2),
        stop_within: Duration::from_secs(1),
    };

    /// When a leader steps down after its last successful renewal: when the renew deadline
    /// passes (a timer, not a request, so nothing can hold it up).
    pub fn step_down_within(&self) -> Duration {
        self.renew_deadline
    }

    /// The longest a leader's controllers act after its last successful renewal: the step-down,
    /// then stopping them.
    pub fn acts_within(&self) -> Duration {
        self.step_down_within() + self.stop_within
    }

    /// The rule that makes two leaders impossible (short of a process frozen for longer than the
    /// lease): a leader stops before any standby may take the Lease, even with a skewed clock;
    /// and at least one whole renewal attempt fits before the deadline.
    pub fn check(&self) -> Result<(), String> {
        if self.renew_seconds == 0 || self.renew_seconds >= self.lease_seconds {
            return Err(format!(
                "leader election: renew interval {}s must be > 0 and < the lease duration {}s",
                self.renew_seconds, self.lease_seconds
            ));
        }
        let first_attempt = Duration::from_secs(self.renew_seconds) + self.api_timeout;
        if first_attempt > self.renew_deadline {
            return Err(format!(
                "leader election: renew deadline {:?} leaves no whole attempt (renew {}s + \
                 request timeout {:?})",
                self.renew_deadline, self.renew_seconds, self.api_timeout
            ));
        }
        let bound = self.acts_within() + self.max_clock_skew;
        if bound >= Duration::from_secs(self.lease_seconds) {
            return Err(format!(
                "leader election: a leader may act until {bound:?} after its last renewal \
                 (renew deadline {:?} + stopping {:?} + clock skew {:?}), not before the {}s \
                 lease can expire",
                self.renew_deadline, self.stop_within, self.max_clock_skew, self.lease_seconds
            ));
        }
        Ok(())
    }

    /// kube-lease-manager's "grace": the holder renews this long before the lease would expire.
    fn grace_seconds(&self) -> u64 {
        self.lease_seconds - self.renew_seconds
    }
}

/// Where the Lease lives and who this replica is.
#[derive(Clone, Debug)]
pub struct Config {
    pub lease: String,
    pub namespace: String,
    /// Unique among the replicas: the pod name.
    pub identity: String,
    pub timing: Timing,
}

/// What this replica is, as the election task reports it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum State {
    Standby,
    Leader,
    /// Was the leader and is no more: stop reconciling now.
    Lost(String),
    /// Cannot campaign again (the Lease is refused: RBAC).
    Failed(String),
}

/// What to do with one answer of the lease manager (pure; the election loop acts on it).
#[derive(Debug, PartialEq, Eq)]
pub enum Step {
    /// The Lease is ours: start (or keep) reconciling.
    Lead,
    /// Someone else holds it; keep waiting.
    Wait,
    /// A Lease request failed: retry after a backoff (a leader only until its renew deadline).
    Retry(String),
    /// A leader lost the Lease or cannot confirm it: stop reconciling at once.
    StepDown(String),
}

/// `answer`: `Ok(holds)` when the manager saw the holder change, `Err` when a Lease request
/// failed (the manager itself retries only write conflicts).
pub fn next_step(leading: bool, answer: Result<bool, String>) -> Step {
    match (leading, answer) {
        (_, Ok(true)) => Step::Lead,
        (false, Ok(false)) => Step::Wait,
        (true, Ok(false)) => Step::StepDown("another replica holds the lease".into()),
        // A leader retries too: the renew deadline, not one request, decides when it stops.
        (_, Err(e)) => Step::Retry(e),
    }
}

/// Backoff for a standby's failed Lease requests: 1 s doubling to 30 s.
pub fn retry_delay(consecutive_failures: u32) -> Duration {
    let exp = consecutive_failures.saturating_sub(1).min(5);
    Duration::from_secs(1 << exp).min(Duration::from_secs(30))
}

/// Backoff for a leader's failed renewals: 100 ms doubling to 1 s, so several attempts fit
/// before the renew deadline.
pub fn renew_retry_delay(consecutive_failures: u32) -> Duration {
    let exp = consecutive_failures.saturating_sub(1).min(4);
    Duration::from_millis(100 << exp).min(Duration::from_secs(1))
}

/// The last renewal the current term may count: one sent after the last step-down. An older
/// one, even if its answer came later, proves nothing about this term.
pub fn renewal_of_term(last: Option<Instant>, stepped_down: Option<Instant>) -> Option<Instant> {
    last.filter(|sent| stepped_down.is_none_or(|down| *sent > down))
}

/// A client for Lease requests only: short connection timeouts (each request is bounded as a
/// whole by [`bounded_client`] besides).
pub fn lease_client(config: &kube::Config, timing: &Timing) -> kube::Result<Client> {
    let mut config = config.clone();
    config.connect_timeout = Some(timing.api_timeout);
    config.read_timeout = Some(timing.api_timeout);
    config.write_timeout = Some(timing.api_timeout);
    Client::try_from(config)
}

/// When this process last renewed the Lease successfully (when that request was sent, which is
/// no earlier than the `renewTime` it wrote).
pub type Renewals = watch::Receiver<Option<Instant>>;

#[derive(Debug, thiserror::Error)]
#[error("lease request: no complete answer within {0:?}")]
pub struct RequestTimedOut(Duration);

/// `inner`, with each request (answer body included) cut off after `timeout`, and every 2xx
/// PATCH that sets `renewTime` recorded in the returned [`Renewals`].
pub fn bounded_client(inner: Client, timeout: Duration) -> (Client, Renewals) {
    let (tx, rx) = watch::channel(None);
    let tx = Arc::new(tx);
    let ns = inner.default_namespace().to_string();
    let svc = tower::service_fn(move |req: hyper::Request<kube::client::Body>| {
        let (inner, tx) = (inner.clone(), tx.clone());
        async move {
            let copy = (req.method() == hyper::Method::PATCH)
                .then(|| req.body().try_clone())
                .flatten();
            let renews = match copy {
                Some(body) => sets_renew_time(body).await,
                None => false,
            };
            let sent = Instant::now();
            let exchange = async {
                let (parts, body) = inner.send(req).await?.into_parts();
                let body = body.collect_bytes().await?;
                Ok::<_, kube::Error>(hyper::Response::from_parts(
                    parts,
                    kube::client::Body::from(body),
                ))
            };
            let resp = tokio::time::timeout(timeout, exchange)
                .await
                .map_err(|_| tower::BoxError::from(RequestTimedOut(timeout)))??;
            if renews && resp.status().is_success() {
                tx.send_replace(Some(sent));
            }
            Ok::<_, tower::BoxError>(resp)
        }
    });
    (Client::new(svc, ns), rx)
}

/// Whether a (small, in-memory) Lease patch writes `renewTime`.
async fn sets_renew_time(body: kube::client::Body) -> bool {
    let bytes = body.collect_bytes().await.unwrap_or_default();
    bytes.windows(b"renewTime".len()).any(|w| w == b"renewTime")
}

/// `msgbench_leader` and `msgbench_leader_election_errors_total` (public so the dashboard
/// test sees every series the running operator exports).
#[derive(Clone)]
pub struct ElectionMetrics {
    leader: IntGauge,
    errors: IntCounter,
}

impl ElectionMetrics {
    pub fn register(metrics: &Metrics) -> Self {
        let leader = IntGauge::new("leader", "1 while this replica holds the leader Lease")
            .expect("static metric");
        let errors = IntCounter::new(
            "leader_election_errors_total",
            "Lease requests that failed (a leader retries until its renew deadline)",
        )
        .expect("static metric");
        // Registered once per process; a second elector (tests) keeps its own copies.
        let _ = metrics.registry.register(Box::new(leader.clone()));
        let _ = metrics.registry.register(Box::new(errors.clone()));
        Self { leader, errors }
    }
}

/// The running election: a background task that campaigns (and renews once leader) until this
/// replica steps down; [`Elector::campaign_again`] starts the next campaign.
pub struct Elector {
    /// The current campaign's lease manager (one per campaign), for [`Elector::release`].
    manager: Arc<Mutex<Arc<LeaseManager>>>,
    state: watch::Receiver<State>,
    task: JoinHandle<Election>,
    readiness: Arc<Readiness>,
    config: Config,
}

impl Elector {
    /// Reaches the Lease (creating it when missing), retrying transient API errors with a
    /// backoff; `/readyz` stays not-ready until then. An RBAC refusal is returned as an error.
    pub async fn start(
        client: Client,
        config: Config,
        metrics: &Metrics,
        readiness: Arc<Readiness>,
    ) -> anyhow::Result<Self> {
        config.timing.check().map_err(anyhow::Error::msg)?;
        readiness.set_role(Role::Campaigning);
        let metrics = ElectionMetrics::register(metrics);
        let (client, renewals) = bounded_client(client, config.timing.api_timeout);
        let manager = Arc::new(connect(client.clone(), &config, &metrics).await?);
        let holder = Api::<Lease>::namespaced(client.clone(), &config.namespace)
            .get_opt(&config.lease)
            .await
            .ok()
            .flatten()
            .and_then(|l| l.spec?.holder_identity);
        tracing::info!(lease = %config.lease, namespace = %config.namespace,
            identity = %config.identity, holder = ?holder, "leader election: campaigning");
        readiness.set_role(Role::Standby);
        let (tx, state) = watch::channel(State::Standby);
        let shared = Arc::new(Mutex::new(manager.clone()));
        let election = Election {
            manager,
            shared: shared.clone(),
            client,
            renewals,
            tx,
            metrics,
            readiness: readiness.clone(),
            config: config.clone(),
            stepped_down: None,
        };
        let task = tokio::spawn(election.campaign());
        Ok(Self {
            manager: shared,
            state,
            task,
            readiness,
            config,
        })
    }

    pub fn timing(&self) -> &Timing {
        &self.config.timing
    }

    /// Returns once this replica leads.
    pub async fn until_leader(&mut self) -> Result<(), String> {
        let s = self
            .state
            .wait_for(|s| *s != State::Standby)
            .await
            .map_err(|_| "leader election task ended".to_string())?;
        match &*s {
            State::Leader => Ok(()),
            other => Err(format!("{other:?}")),
        }
    }

    /// Returns (with the reason) once this replica no longer leads.
    pub async fn until_lost(&mut self) -> String {
        match self.state.wait_for(|s| matches!(s, State::Lost(_))).await {
            Ok(s) => match &*s {
                State::Lost(why) => why.clone(),
                _ => unreachable!("waited for Lost"),
            },
            Err(_) => "leader election task ended".into(),
        }
    }

    /// After [`Elector::until_lost`], once the controllers have stopped: campaigns again as a
    /// standby. With a new lease manager (the old one still counts itself leader, and would go
    /// on renewing a Lease in this pod's name without ever reporting it), counting only
    /// renewals sent from now on; the caches must sync again before `/readyz` is ready.
    pub async fn campaign_again(&mut self) -> anyhow::Result<()> {
        let election = (&mut self.task)
            .await
            .map_err(|e| anyhow::anyhow!("leader election task: {e}"))?;
        self.readiness.new_term();
        election.tx.send_replace(State::Standby);
        tracing::info!(lease = %self.config.lease, identity = %self.config.identity,
            "leader election: campaigning again after stepping down");
        self.task = tokio::spawn(election.recampaign());
        Ok(())
    }

    /// Stops campaigning and frees the Lease if this replica holds it, so a standby takes over at
    /// once instead of after the lease duration (graceful shutdown, rolling update).
    pub async fn release(self) {
        self.task.abort();
        let _ = self.task.await;
        let manager = self
            .manager
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        let timeout = self.config.timing.api_timeout * 2;
        match tokio::time::timeout(timeout, manager.release()).await {
            Ok(Ok(())) => {
                tracing::info!(lease = %self.config.lease, "leader election: lease released")
            }
            Ok(Err(e)) => tracing::warn!(lease = %self.config.lease, error = %e,
                "leader election: could not release the lease; a standby takes it when it expires"),
            Err(_) => tracing::warn!(lease = %self.config.lease,
                "leader election: releasing the lease timed out; a standby takes it when it expires"),
        }
    }
}

async fn connect(
    client: Client,
    config: &Config,
    metrics: &ElectionMetrics,
) -> anyhow::Result<LeaseManager> {
    let params = LeaseParams::new(
        config.identity.clone(),
        config.timing.lease_seconds,
        config.timing.grace_seconds(),
    );
    let mut failures = 0;
    loop {
        let built = LeaseManager::new(
            client.clone(),
            &config.lease,
            &config.namespace,
            params.clone(),
            LeaseCreateMode::AutoCreate,
        )
        .await;
        match built {
            Ok(m) => return Ok(m),
            Err(LeaseManagerError::KubeError(kube::Error::Api(e)))
                if e.code == 401 || e.code == 403 =>
            {
                anyhow::bail!(
                    "leader election: not allowed to get/create Lease {}/{} ({}): the operator's \
                     Role must grant get, create and patch on leases (operator/RBAC.md)",
                    config.namespace,
                    config.lease,
                    e.message
                );
            }
            Err(e) => {
                failures += 1;
                metrics.errors.inc();
                let delay = retry_delay(failures);
                tracing::warn!(lease = %config.lease, error = %e, retry_in = ?delay,
                    "leader election: cannot reach the lease yet");
                tokio::time::sleep(delay).await;
            }
        }
    }
}

/// What the election task works with; handed back when it steps down, for the next campaign.
struct Election {
    manager: Arc<LeaseManager>,
    /// Where [`Elector::release`] finds the current manager.
    shared: Arc<Mutex<Arc<LeaseManager>>>,
    /// The bounded client, for the next campaign's manager.
    client: Client,
    renewals: Renewals,
    tx: watch::Sender<State>,
    metrics: ElectionMetrics,
    readiness: Arc<Readiness>,
    config: Config,
    /// When this process last stepped down: renewals sent before it belong to a past term.
    stepped_down: Option<Instant>,
}

impl Election {
    /// A campaign after a step-down: reaches the Lease again with a new manager (`/readyz` not
    /// ready until then, as at start), then as [`Election::campaign`].
    async fn recampaign(mut self) -> Self {
        match connect(self.client.clone(), &self.config, &self.metrics).await {
            Ok(m) => {
                self.manager = Arc::new(m);
                *self.shared.lock().unwrap_or_else(|p| p.into_inner()) = self.manager.clone();
            }
            Err(e) => {
                tracing::error!(lease = %self.config.lease, error = %e,
                    "leader election: cannot campaign again");
                self.tx.send_replace(State::Failed(e.to_string()));
                return self;
            }
        }
        self.readiness.set_role(Role::Standby);
        self.campaign().await
    }

    /// Waits for the Lease as a standby, then leads until it steps down; publishes Leader and
    /// Lost. Ends after Lost, handing itself back.
    async fn campaign(mut self) -> Self {
        let (lease, me) = (&self.config.lease, &self.config.identity);
        let mut failures = 0;
        loop {
            let answer = self.manager.changed().await.map_err(|e| e.to_string());
            match next_step(false, answer) {
                Step::Lead => break,
                Step::Wait | Step::StepDown(_) => failures = 0,
                Step::Retry(e) => {
                    failures += 1;
                    self.metrics.errors.inc();
                    let delay = retry_delay(failures);
                    tracing::warn!(%lease, error = %e, retry_in = ?delay, "leader election: lease request failed (standby)");
                    tokio::time::sleep(delay).await;
                }
            }
        }
        let why = self.lead().await;
        self.metrics.leader.set(0);
        self.readiness.set_role(Role::Campaigning);
        tracing::error!(%lease, identity = %me, reason = %why, "leader election: lost the lease");
        self.stepped_down = Some(Instant::now());
        self.tx.send_replace(State::Lost(why));
        self
    }

    /// Holds the Lease: the manager keeps renewing, failed renewals are retried, and the renew
    /// deadline is watched beside them. Leader is published only after a renewal of this
    /// term (a Lease found already in this pod's name, after a restart or a step-down, has an
    /// unknown age). Returns why it stepped down.
    async fn lead(&self) -> String {
        let entered = Instant::now();
        let deadline = self.config.timing.renew_deadline;
        let since = self.stepped_down;
        let mut failures = 0;
        loop {
            let changed = self.manager.changed();
            tokio::pin!(changed);
            let answer = loop {
                let published = *self.tx.borrow() == State::Leader;
                tokio::select! {
                    why = deadline_passed(self.renewals.clone(), since, entered, deadline) => return why,
                    _ = first_renewal(self.renewals.clone(), since), if !published => self.publish_leader(),
                    answer = &mut changed => break answer,
                }
            };
            match next_step(true, answer.map_err(|e| e.to_string())) {
                Step::Lead | Step::Wait => failures = 0,
                Step::StepDown(why) => return why,
                Step::Retry(e) => {
                    failures += 1;
                    self.metrics.errors.inc();
                    let delay = renew_retry_delay(failures);
                    tracing::warn!(lease = %self.config.lease, error = %e, retry_in = ?delay,
                        "leader election: renewal failed; retrying until the renew deadline");
                    tokio::select! {
                        why = deadline_passed(self.renewals.clone(), since, entered, deadline) => return why,
                        _ = tokio::time::sleep(delay) => {}
                    }
                }
            }
        }
    }

    fn publish_leader(&self) {
        self.metrics.leader.set(1);
        self.readiness.set_role(Role::Leader);
        tracing::info!(lease = %self.config.lease, identity = %self.config.identity,
            "leader election: acquired the lease; starting controllers");
        self.tx.send_replace(State::Leader);
    }
}

/// Resolves once this process has renewed the Lease in this term (after `since`, the last
/// step-down).
async fn first_renewal(mut renewals: Renewals, since: Option<Instant>) {
    let _ = renewals
        .wait_for(|r| renewal_of_term(*r, since).is_some())
        .await;
}

/// Resolves (with the reason) once `deadline` has passed since the last successful renewal of
/// this term, or since `entered` when there was none.
async fn deadline_passed(
    mut renewals: Renewals,
    since: Option<Instant>,
    entered: Instant,
    deadline: Duration,
) -> String {
    loop {
        let last = renewal_of_term(*renewals.borrow_and_update(), since).unwrap_or(entered);
        tokio::select! {
            _ = tokio::time::sleep_until(last + deadline) => {
                return format!(
                    "no lease renewal succeeded within the renew deadline ({deadline:?}); \
                     stepping down before the lease can expire"
                );
            }
            changed = renewals.changed() => {
                if changed.is_err() {
                    // The client is gone: no renewal can come any more; wait out the deadline.
                    tokio::time::sleep_until(last + deadline).await;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_timing_steps_down_before_the_lease_can_expire() {
        let t = Timing::DEFAULT;
        assert_eq!(t.check(), Ok(()));
        assert_eq!(
            t.grace_seconds(),
            10,
            "renew 10 s before the 15 s lease expires"
        );
        assert_eq!(t.step_down_within(), Duration::from_secs(10));
        assert_eq!(
            t.acts_within(),
            Duration::from_secs(11),
            "controllers stopped by 11 s, 2 s of skew still leaves 2 s before 15 s"
        );
    }

    #[test]
    fn stopping_the_controllers_must_fit_before_the_lease_can_expire() {
        let slow_stop = Timing {
            stop_within: Duration::from_secs(3),
            ..Timing::DEFAULT
        };
        let err = slow_stop.check().unwrap_err();
        assert!(err.contains("stopping 3s"), "{err}");
        let just_fits = Timing {
            stop_within: Duration::from_millis(2999),
            ..Timing::DEFAULT
        };
        assert_eq!(just_fits.check(), Ok(()));
    }

    #[test]
    fn a_term_counts_only_renewals_sent_after_the_last_step_down() {
        let t0 = Instant::now();
        let (before, down, after) = (t0, t0 + Duration::from_secs(1), t0 + Duration::from_secs(2));
        assert_eq!(renewal_of_term(None, None), None);
        assert_eq!(
            renewal_of_term(Some(before), None),
            Some(before),
            "first term"
        );
        assert_eq!(
            renewal_of_term(Some(before), Some(down)),
            None,
            "a renewal of the previous term proves nothing now"
        );
        assert_eq!(renewal_of_term(Some(down), Some(down)), None);
        assert_eq!(renewal_of_term(Some(after), Some(down)), Some(after));
    }

    #[test]
    fn timings_that_allow_two_leaders_are_refused() {
        let slow_requests = Timing {
            api_timeout: Duration::from_secs(6),
            ..Timing::DEFAULT
        };
        let err = slow_requests.check().unwrap_err();
        assert!(err.contains("leaves no whole attempt"), "{err}");
        let late_deadline = Timing {
            renew_deadline: Duration::from_secs(13),
            ..Timing::DEFAULT
        };
        let err = late_deadline.check().unwrap_err();
        assert!(err.contains("not before the 15s lease can expire"), "{err}");
        let late_renewal = Timing {
            renew_seconds: 15,
            ..Timing::DEFAULT
        };
        assert!(late_renewal.check().unwrap_err().contains("renew interval"));
        let no_renewal = Timing {
            renew_seconds: 0,
            ..Timing::DEFAULT
        };
        assert!(no_renewal.check().is_err());
    }

    #[test]
    fn a_leader_steps_down_on_loss_and_retries_a_failed_renewal() {
        assert_eq!(next_step(false, Ok(true)), Step::Lead);
        assert_eq!(next_step(true, Ok(true)), Step::Lead);
        assert_eq!(next_step(false, Ok(false)), Step::Wait);
        assert!(
            matches!(next_step(true, Ok(false)), Step::StepDown(m) if m.contains("another replica"))
        );
        assert_eq!(
            next_step(true, Err("timed out".into())),
            Step::Retry("timed out".into())
        );
        assert_eq!(
            next_step(false, Err("timed out".into())),
            Step::Retry("timed out".into())
        );
    }

    #[test]
    fn standby_retries_back_off_and_cap() {
        assert_eq!(retry_delay(1), Duration::from_secs(1));
        assert_eq!(retry_delay(2), Duration::from_secs(2));
        assert_eq!(retry_delay(5), Duration::from_secs(16));
        assert_eq!(retry_delay(6), Duration::from_secs(30));
        assert_eq!(retry_delay(100), Duration::from_secs(30));
    }
}
