//! Leader election on a `coordination.k8s.io/v1` Lease, so that several operator replicas can run
//! and exactly one of them reconciles.
//!
//! Built on kube-lease-manager (maintained, server-side-apply based; its 0.13 line is the one built
//! on kube 5 / k8s-openapi 0.29 — kubert's lease module still requires kube 1.x). The crate keeps
//! renewing and says when this replica gains or loses the Lease; it does not say when a renewal
//! *fails*, and a leader that cannot renew would keep believing it leads. This wrapper closes that
//! gap, client-go style:
//! - every Lease request has short timeouts ([`Timing::api_timeout`]), so none can hang past the
//!   lease;
//! - a leader whose renewal fails, or which finds another holder, steps down at once: the caller
//!   exits the process (non-zero), so no reconcile can run without the Lease; the kubelet restarts
//!   the container, which comes back as a standby (or leads again at once if nobody took over: the
//!   identity is the pod name, which a container restart keeps);
//! - [`Timing::check`] proves the step-down happens before the Lease can expire for the others.
//!
//! A standby's `/readyz` is ready (see [`crate::context::Readiness`]): a rolling update starts the
//! new pod as a standby and must count it as available. `/metrics` has `msgbench_leader` (1 while
//! this replica holds the Lease) and `msgbench_leader_election_errors_total`; every change of
//! leadership is logged.
use crate::context::{Readiness, Role};
use crate::metrics::Metrics;
use k8s_openapi::api::coordination::v1::Lease;
use kube::{Api, Client};
use kube_lease_manager::{LeaseCreateMode, LeaseManager, LeaseManagerError, LeaseParams};
use prometheus::{IntCounter, IntGauge};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;
use tokio::task::JoinHandle;

/// Lease name when `--leader-election-lease` is not given (the chart passes `<release>-operator`).
pub const DEFAULT_LEASE_NAME: &str = "msgbench-operator";

/// How the Lease is held. Whole seconds: `leaseDurationSeconds` is an integer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Timing {
    /// A Lease not renewed for this long may be taken by a standby.
    pub lease_seconds: u64,
    /// The holder renews this long after its last renewal.
    pub renew_seconds: u64,
    /// Bound on connecting to, writing to and reading from the API server per Lease request.
    pub api_timeout: Duration,
    /// Clock difference between nodes the timing tolerates (standbys judge expiry by their clock).
    pub max_clock_skew: Duration,
}

impl Timing {
    /// 15 s lease, renewed every 5 s, 3 s request timeouts, 2 s clock skew.
    pub const DEFAULT: Timing = Timing {
        lease_seconds: 15,
        renew_seconds: 5,
        api_timeout: Duration::from_secs(3),
        max_clock_skew: Duration::from_secs(2),
    };

    /// The longest a leader can go on after the renewal time recorded in the Lease before it
    /// learns that it no longer leads: the next renewal starts `renew_seconds` later; its PATCH
    /// and the GET that follows each fail within `api_timeout`. (When the PATCH succeeds and only
    /// the GET fails, the Lease was just renewed, so the same bound holds from the new renewal.)
    pub fn step_down_within(&self) -> Duration {
        Duration::from_secs(self.renew_seconds) + 2 * self.api_timeout
    }

    /// The rule that makes two leaders impossible (short of a process frozen for longer than the
    /// lease): a leader notices a failed renewal and steps down before any standby may take the
    /// Lease, even with a skewed clock.
    pub fn check(&self) -> Result<(), String> {
        if self.renew_seconds == 0 || self.renew_seconds >= self.lease_seconds {
            return Err(format!(
                "leader election: renew interval {}s must be > 0 and < the lease duration {}s",
                self.renew_seconds, self.lease_seconds
            ));
        }
        let bound = self.step_down_within() + self.max_clock_skew;
        if bound >= Duration::from_secs(self.lease_seconds) {
            return Err(format!(
                "leader election: a leader may notice a failed renewal only {bound:?} after the \
                 last one (renew {}s + 2 x request timeout {:?} + clock skew {:?}), not before \
                 the {}s lease can expire",
                self.renew_seconds, self.api_timeout, self.max_clock_skew, self.lease_seconds
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
}

/// What to do with one answer of the lease manager (pure; the election loop acts on it).
#[derive(Debug, PartialEq, Eq)]
pub enum Step {
    /// The Lease is ours: start (or keep) reconciling.
    Lead,
    /// Someone else holds it; keep waiting.
    Wait,
    /// A standby could not reach the Lease: retry after a backoff, nothing is at stake.
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
        (false, Err(e)) => Step::Retry(e),
        (true, Err(e)) => Step::StepDown(format!(
            "could not renew the lease ({e}); it cannot be confirmed before it may expire"
        )),
    }
}

/// Backoff for a standby's failed Lease requests: 1 s doubling to 30 s.
pub fn retry_delay(consecutive_failures: u32) -> Duration {
    let exp = consecutive_failures.saturating_sub(1).min(5);
    Duration::from_secs(1 << exp).min(Duration::from_secs(30))
}

/// A client for Lease requests only: short timeouts, so a hung request cannot outlive the lease.
pub fn lease_client(config: &kube::Config, timing: &Timing) -> kube::Result<Client> {
    let mut config = config.clone();
    config.connect_timeout = Some(timing.api_timeout);
    config.read_timeout = Some(timing.api_timeout);
    config.write_timeout = Some(timing.api_timeout);
    Client::try_from(config)
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
            "Lease requests that failed (a leader steps down on the first)",
        )
        .expect("static metric");
        // Registered once per process; a second elector (tests) keeps its own copies.
        let _ = metrics.registry.register(Box::new(leader.clone()));
        let _ = metrics.registry.register(Box::new(errors.clone()));
        Self { leader, errors }
    }
}

/// The running election: a background task that keeps campaigning (and renewing once leader).
pub struct Elector {
    manager: Arc<LeaseManager>,
    state: watch::Receiver<State>,
    task: JoinHandle<()>,
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
        let manager = Arc::new(connect(client.clone(), &config, &metrics).await?);
        let holder = Api::<Lease>::namespaced(client, &config.namespace)
            .get_opt(&config.lease)
            .await
            .ok()
            .flatten()
            .and_then(|l| l.spec?.holder_identity);
        tracing::info!(lease = %config.lease, namespace = %config.namespace,
            identity = %config.identity, holder = ?holder, "leader election: campaigning");
        readiness.set_role(Role::Standby);
        let (tx, state) = watch::channel(State::Standby);
        let task = tokio::spawn(campaign(
            manager.clone(),
            tx,
            metrics,
            readiness,
            config.clone(),
        ));
        Ok(Self {
            manager,
            state,
            task,
            config,
        })
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

    /// Stops campaigning and frees the Lease if this replica holds it, so a standby takes over at
    /// once instead of after the lease duration (graceful shutdown, rolling update).
    pub async fn release(self) {
        self.task.abort();
        let _ = self.task.await;
        let timeout = self.config.timing.api_timeout * 2;
        match tokio::time::timeout(timeout, self.manager.release()).await {
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

/// Keeps asking the manager for changes; publishes Leader / Lost. Ends after Lost.
async fn campaign(
    manager: Arc<LeaseManager>,
    tx: watch::Sender<State>,
    metrics: ElectionMetrics,
    readiness: Arc<Readiness>,
    config: Config,
) {
    let (lease, me) = (&config.lease, &config.identity);
    let mut failures = 0;
    loop {
        let answer = manager.changed().await.map_err(|e| e.to_string());
        let leading = *tx.borrow() == State::Leader;
        match next_step(leading, answer) {
            Step::Lead => {
                failures = 0;
                if !leading {
                    metrics.leader.set(1);
                    readiness.set_role(Role::Leader);
                    tracing::info!(%lease, identity = %me, "leader election: acquired the lease; starting controllers");
                    tx.send_replace(State::Leader);
                }
            }
            Step::Wait => failures = 0,
            Step::Retry(e) => {
                failures += 1;
                metrics.errors.inc();
                let delay = retry_delay(failures);
                tracing::warn!(%lease, error = %e, retry_in = ?delay, "leader election: lease request failed (standby)");
                tokio::time::sleep(delay).await;
            }
            Step::StepDown(why) => {
                metrics.errors.inc();
                metrics.leader.set(0);
                readiness.set_role(Role::Campaigning);
                tracing::error!(%lease, identity = %me, reason = %why, "leader election: lost the lease");
                tx.send_replace(State::Lost(why));
                return;
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
        assert_eq!(t.step_down_within(), Duration::from_secs(11));
    }

    #[test]
    fn timings_that_allow_two_leaders_are_refused() {
        let slow_requests = Timing {
            api_timeout: Duration::from_secs(5),
            ..Timing::DEFAULT
        };
        let err = slow_requests.check().unwrap_err();
        assert!(err.contains("request timeout"), "{err}");
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
    fn a_leader_steps_down_on_loss_and_on_any_failed_renewal() {
        assert_eq!(next_step(false, Ok(true)), Step::Lead);
        assert_eq!(next_step(true, Ok(true)), Step::Lead);
        assert_eq!(next_step(false, Ok(false)), Step::Wait);
        assert!(
            matches!(next_step(true, Ok(false)), Step::StepDown(m) if m.contains("another replica"))
        );
        assert!(
            matches!(next_step(true, Err("timed out".into())), Step::StepDown(m) if m.contains("timed out"))
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
