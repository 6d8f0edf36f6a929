//! What a pass decided (`Decision`), what act carries out (`Effect`) and what act learned doing
//! it (`EffectOutcome`): plain data shared by every phase module and by `settle`.
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use msgbench_crds::benchmark_run::{BenchmarkRunStatus, FaultInjection};
use runner_api::fault_agent::FaultReport;
use std::time::Duration;

/// How often a waiting or running run is looked at.
pub const POLL: Duration = Duration::from_secs(2);

/// What a pass decided.
#[derive(Clone, Debug, PartialEq)]
pub struct Decision {
    pub status: BenchmarkRunStatus,
    pub effects: Vec<Effect>,
    /// When to look again; `None`: only when something changes.
    pub requeue: Option<Duration>,
}

/// What `act` carries out, in order, before the status is written.
#[derive(Clone, Debug, PartialEq)]
pub enum Effect {
    /// Delete Jobs, ConfigMaps and NetworkPolicies of other spec generations.
    DeleteOtherGenerations,
    /// The token Secret, the NetworkPolicy, then the agent ConfigMap and the runner Job.
    CreateRunners {
        config_map: Box<ConfigMap>,
        job: Box<Job>,
    },
    /// `POST /start` for `trial` at `at_unix_ms` to these pod IPs, in parallel; the answers come
    /// back as [`EffectOutcome::Released`].
    Release {
        trial: u32,
        at_unix_ms: u64,
        ips: Vec<String>,
    },
    /// `POST /stop {afterTrial}` to these pod IPs: `spec.stopWhen` decided (and status
    /// recorded) that no trial after `after_trial` runs.
    StopRunners { after_trial: u32, ips: Vec<String> },
    /// Tell runners holding their results that the status has them (`records` per runner).
    AckResults { ips: Vec<String>, records: u32 },
    /// Stop a failed run's runners that are still active (the Job and its logs stay).
    SuspendJob { name: String },
    /// The TTL passed: delete the run's Jobs, pods, ConfigMaps and NetworkPolicies.
    DeleteChildren,
    /// Carry out `status.faults[index]`, which is due and whose pod is in status already
    /// (`injecting`). `repeat`: the choice was written by an earlier pass, which may have acted.
    InjectFault { index: usize, repeat: bool },
    /// Hold `stream_sweep::FINALIZER`: the run is about to make streams on a server.
    HoldStreams,
    /// Create the Job that deletes the run's streams by its id (`stream_sweep`).
    SweepStreams { job: Box<Job> },
    /// Release `stream_sweep::FINALIZER` (condition `StreamsDeleted` says how the sweep went).
    ReleaseStreams,
}

/// What `act` learned carrying out an effect: [`settle`] folds it into the status to write,
/// so act reports and never decides.
#[derive(Clone, Debug, PartialEq)]
pub enum EffectOutcome {
    /// The answers to an [`Effect::Release`]: per runner IP, the start it keeps or why it did
    /// not answer.
    Released {
        trial: u32,
        at_unix_ms: u64,
        echoes: Vec<(String, Result<u64, String>)>,
    },
    /// The fault was not carried out: why (no pod to choose, the agent or the API server
    /// refused). It stays not done.
    FaultNotDone { index: usize, why: String },
    /// The pod's fault agent reports what it did.
    FaultSignalled {
        index: usize,
        injection: FaultInjection,
        report: FaultReport,
    },
    /// An earlier ask may have reached the agent, and the answer now is no report: the fault
    /// may have been carried out. It is unknown until evidence confirms it, never "not done".
    FaultUnknown {
        index: usize,
        injection: FaultInjection,
        answer: String,
    },
    /// The chosen pod was deleted, at `at`.
    FaultDeleted {
        index: usize,
        injection: FaultInjection,
        at: Time,
    },
}

impl Decision {
    /// A fault's pod was chosen this pass (`InjectFault` not as a repeat): its record must be in
    /// status before act touches the pod, so that no later pass can take an ask that may have
    /// reached the agent for a first one (the agent dedupes by key only until it restarts).
    pub fn must_write_before_acting(&self) -> bool {
        (self.effects.iter()).any(|e| matches!(e, Effect::InjectFault { repeat: false, .. }))
    }
}

impl EffectOutcome {
    /// The `status.faults` index a fault outcome is about (`None` for a release).
    pub fn fault(&self) -> Option<usize> {
        use EffectOutcome::*;
        match self {
            Released { .. } => None,
            FaultNotDone { index, .. }
            | FaultSignalled { index, .. }
            | FaultUnknown { index, .. }
            | FaultDeleted { index, .. } => Some(*index),
        }
    }
}

impl Decision {
    pub(super) fn keep(status: &BenchmarkRunStatus) -> Self {
        Decision {
            status: status.clone(),
            effects: Vec::new(),
            requeue: Some(POLL),
        }
    }
}
