//! State shared by every reconcile: API client, event recorder, metrics, readiness.

use super::merge_budget::MergeBudget;
use super::metrics::Metrics;
use super::CONTROLLER_NAME;
use crate::access::control_key::RequestSigner;
use kube::runtime::events::{Recorder, Reporter};
use kube::Client;
use msgbench_operator_core::operands::OperandDefaults;
use msgbench_operator_core::run::runners::runner_access::OperatorPeer;
use runner_api::control_auth::ControlSigner;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU8, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

pub struct Context {
    pub client: Client,
    pub recorder: Recorder,
    pub metrics: Metrics,
    pub readiness: Arc<Readiness>,
    /// Whether to query nats-server `/varz` on the pod IP (needs pod network reachability).
    pub observe_varz: bool,
    /// Default images and pod additions for runner and server pods (the chart's operands.yaml).
    pub operands: Arc<OperandDefaults>,
    pub requeue: Requeue,
    pub backoff: Backoff,
    /// Signs runner control credentials (`runner_api::control_auth`); its key is the chart's
    /// control-key Secret, or a key of this process only (`--control-key-secret` unset).
    pub control: Arc<ControlSigner>,
    /// The operator's own pods, for runner NetworkPolicies; None outside a cluster.
    pub runner_peer: Option<OperatorPeer>,
    /// Generated Secrets (JetStream route passwords) known to exist.
    pub created_secrets: crate::server::apply::CreatedSecrets,
    /// What only the BenchmarkRun controller uses.
    pub runs: RunState,
}

/// State of the BenchmarkRun controller only (the server controllers never read it).
pub struct RunState {
    /// BenchmarkRun `spec.faults` may delete server pods (the chart grants `delete` on pods
    /// only with `faults.enabled`).
    pub allow_faults: bool,
    /// A runner's results may be read from its pod log once its agent let them go
    /// (`--results-from-pod-logs`; needs `get` on pods/log).
    pub results_from_pod_logs: bool,
    /// Port of the runner agents' control endpoint (tests run fake agents elsewhere).
    pub agent_port: u16,
    /// What the retention sweep deletes (the chart's `retention.*`).
    pub retention: msgbench_operator_core::run::retention::RetentionPolicy,
    /// The BenchmarkRun controller's cache, once it runs: who else uses a run's target.
    pub run_cache:
        std::sync::OnceLock<kube::runtime::reflector::Store<msgbench_crds::BenchmarkRun>>,
    /// Memory for run results, shared by every concurrent reconcile.
    pub merge_budget: Arc<MergeBudget>,
}

impl Default for RunState {
    fn default() -> Self {
        Self {
            allow_faults: false,
            results_from_pod_logs: false,
            agent_port: runner_api::agent::AGENT_PORT,
            retention: Default::default(),
            run_cache: std::sync::OnceLock::new(),
            merge_budget: Arc::new(MergeBudget::from_memory_limit(
                None,
                crate::benchmark_run::runners::gather::RESULTS_BUDGET_BYTES,
            )),
        }
    }
}

/// Requeue intervals: short while converging, long when stable (watches do the rest).
#[derive(Clone, Copy, Debug)]
pub struct Requeue {
    pub converging: Duration,
    pub stable: Duration,
    pub error_base: Duration,
    pub error_max: Duration,
}

impl Default for Requeue {
    fn default() -> Self {
        Self {
            converging: Duration::from_secs(15),
            stable: Duration::from_secs(300),
            error_base: Duration::from_secs(5),
            error_max: Duration::from_secs(300),
        }
    }
}

impl Requeue {
    /// Exponential: base, 2*base, 4*base, ... capped at `error_max`.
    pub fn error_delay(&self, consecutive_failures: u32) -> Duration {
        let factor = 2u32.saturating_pow(consecutive_failures.saturating_sub(1).min(16));
        self.error_base.saturating_mul(factor).min(self.error_max)
    }
}

/// Consecutive reconcile failures per object, for the error backoff.
#[derive(Default)]
pub struct Backoff {
    failures: Mutex<HashMap<String, u32>>,
}

impl Backoff {
    pub fn failed(&self, key: &str) -> u32 {
        let mut m = self.failures.lock().unwrap_or_else(|p| p.into_inner());
        let n = m.entry(key.to_string()).or_insert(0);
        *n += 1;
        *n
    }
    pub fn succeeded(&self, key: &str) {
        self.failures
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(key);
    }
}

impl Context {
    pub fn new(client: Client, readiness: Arc<Readiness>, observe_varz: bool) -> Self {
        let reporter = Reporter {
            controller: CONTROLLER_NAME.into(),
            instance: std::env::var("POD_NAME").ok(),
        };
        let control = ControlSigner::from_seed(rand::random());
        // Runner and fault-agent pods get the keys that check this signer's credentials.
        let operands = OperandDefaults {
            control_public_key: control.public_keys(),
            ..OperandDefaults::default()
        };
        Self {
            recorder: Recorder::new(client.clone(), reporter),
            client,
            metrics: Metrics::default(),
            readiness,
            observe_varz,
            operands: Arc::new(operands),
            requeue: Requeue::default(),
            backoff: Backoff::default(),
            control: Arc::new(control),
            runner_peer: OperatorPeer::from_env(),
            created_secrets: Default::default(),
            runs: RunState::default(),
        }
    }
}

impl Context {
    /// The context of a new term of leadership. What belongs to the process is shared: client,
    /// recorder, metrics, readiness, operand defaults, the control key, the results budget.
    /// What the controllers learned while leading starts empty (error backoffs, the run cache): another leader may have changed everything meanwhile.
    pub fn next_term(&self) -> Context {
        Context {
            client: self.client.clone(),
            recorder: self.recorder.clone(),
            metrics: self.metrics.clone(),
            readiness: self.readiness.clone(),
            observe_varz: self.observe_varz,
            operands: self.operands.clone(),
            requeue: self.requeue,
            backoff: Backoff::default(),
            control: self.control.clone(),
            runner_peer: self.runner_peer.clone(),
            // Known again by a 409 on the next create: another leader may have made more.
            created_secrets: Default::default(),
            runs: RunState {
                allow_faults: self.runs.allow_faults,
                results_from_pod_logs: self.runs.results_from_pod_logs,
                agent_port: self.runs.agent_port,
                retention: self.runs.retention.clone(),
                run_cache: std::sync::OnceLock::new(),
                merge_budget: self.runs.merge_budget.clone(),
            },
        }
    }

    /// Signs control credentials for `scope` (a run's uid for its runners, a server object's
    /// uid for its fault agents): one per request, for its method and path, valid for seconds.
    pub fn control_for<'a>(&'a self, scope: &'a str) -> RequestSigner<'a> {
        RequestSigner::new(&self.control, scope)
    }
}

/// This replica's part in leader election, as far as `/readyz` is concerned.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    /// Leader election on and the Lease not reached yet.
    Campaigning,
    /// Another replica holds the Lease; this one waits to take over.
    Standby,
    /// Runs the controllers (also the only state without leader election).
    Leader,
}

/// What `/readyz` answers: a leader is ready once every controller's store has synced once; a
/// standby is ready as soon as it has reached the Lease (it can take over), so a rolling update,
/// whose new pod starts as a standby, can proceed.
pub struct Readiness {
    expected: usize,
    synced: AtomicUsize,
    role: AtomicU8,
}

impl Readiness {
    /// Starts as [`Role::Leader`] (no leader election); see [`Readiness::set_role`].
    pub fn new(expected: usize) -> Self {
        Self {
            expected,
            synced: AtomicUsize::new(0),
            role: AtomicU8::new(Role::Leader as u8),
        }
    }
    pub fn mark_synced(&self) {
        self.synced.fetch_add(1, Ordering::SeqCst);
    }
    /// A new term of leadership: its controllers' caches have not synced yet.
    pub fn new_term(&self) {
        self.synced.store(0, Ordering::SeqCst);
    }
    pub fn set_role(&self, role: Role) {
        self.role.store(role as u8, Ordering::SeqCst);
    }
    pub fn role(&self) -> Role {
        match self.role.load(Ordering::SeqCst) {
            r if r == Role::Campaigning as u8 => Role::Campaigning,
            r if r == Role::Standby as u8 => Role::Standby,
            _ => Role::Leader,
        }
    }
    pub fn is_ready(&self) -> bool {
        self.status().0
    }
    /// (ready, reason) for `/readyz`.
    pub fn status(&self) -> (bool, &'static str) {
        match self.role() {
            Role::Campaigning => (false, "leader election: lease not reached yet"),
            Role::Standby => (true, "standby: another replica holds the lease"),
            Role::Leader if self.synced.load(Ordering::SeqCst) >= self.expected => (true, "ready"),
            Role::Leader => (false, "caches not synced"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_backoff_grows_and_caps() {
        let r = Requeue::default();
        assert_eq!(r.error_delay(1), Duration::from_secs(5));
        assert_eq!(r.error_delay(2), Duration::from_secs(10));
        assert_eq!(r.error_delay(4), Duration::from_secs(40));
        assert_eq!(r.error_delay(30), r.error_max);
        let b = Backoff::default();
        assert_eq!(b.failed("a"), 1);
        assert_eq!(b.failed("a"), 2);
        b.succeeded("a");
        assert_eq!(b.failed("a"), 1);
    }

    #[test]
    fn a_standby_is_ready_and_a_leader_only_once_synced() {
        let r = Readiness::new(2);
        assert_eq!(
            r.role(),
            Role::Leader,
            "no leader election: the only replica leads"
        );
        assert!(!r.is_ready());
        r.set_role(Role::Campaigning);
        assert_eq!(
            r.status(),
            (false, "leader election: lease not reached yet")
        );
        r.set_role(Role::Standby);
        assert!(
            r.is_ready(),
            "a standby must count as available in a rollout"
        );
        r.set_role(Role::Leader);
        assert_eq!(r.status(), (false, "caches not synced"));
        r.mark_synced();
        r.mark_synced();
        assert_eq!(r.status(), (true, "ready"));
        r.new_term();
        assert_eq!(
            r.status(),
            (false, "caches not synced"),
            "a second term waits for its own caches"
        );
    }

    #[tokio::test]
    async fn a_new_term_shares_the_process_state_and_forgets_the_leaders() {
        let client = kube::Client::new(
            tower::service_fn(|_: http::Request<kube::client::Body>| async {
                Ok::<_, std::convert::Infallible>(http::Response::new(kube::client::Body::empty()))
            }),
            "default",
        );
        let mut ctx = Context::new(client, Arc::new(Readiness::new(1)), false);
        ctx.runs.allow_faults = true;
        ctx.backoff.failed("run-a");
        ctx.runs.retention.succeeded_history_limit = Some(3);
        let (store, _writer) = kube::runtime::reflector::store::<msgbench_crds::BenchmarkRun>();
        assert!(ctx.runs.run_cache.set(store).is_ok());

        let next = ctx.next_term();
        assert_eq!(next.backoff.failed("run-a"), 1, "backoff starts over");
        assert_eq!(
            next.runs.retention, ctx.runs.retention,
            "the policy is the process's"
        );
        assert!(
            next.runs.run_cache.get().is_none(),
            "the new term sets its own cache"
        );
        assert!(next.runs.allow_faults);
        assert!(Arc::ptr_eq(&next.readiness, &ctx.readiness));
        assert!(Arc::ptr_eq(&next.control, &ctx.control));
        assert!(Arc::ptr_eq(&next.runs.merge_budget, &ctx.runs.merge_budget));
        assert_eq!(
            ctx.backoff.failed("run-a"),
            2,
            "the old term's state is untouched"
        );
    }
}
