//! Faults injected into the target's own servers mid-run (`spec.faults`) and what each one did
//! (`status.faults`): what replication buys is measured by killing a server while the load runs.
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::KubeSchema;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Most faults per run.
pub const MAX_FAULTS: usize = 4;
/// Most fault executions one run may record: faults × trials × variants (see the CEL rule on
/// `spec.faults`), so `status.faults` stays small.
pub const MAX_FAULT_RECORDS: i64 = 60;

/// One fault: `action` on one of the target's own server pods, `afterSeconds` into the measured
/// phase of every trial (with variants: of every variant in every round, at the same offset).
/// Only pods the target server resource owns are ever touched, and only with a `serverRef`
/// target. `crash`, `pause` and `partition` need the target's fault agent
/// (`spec.faultInjection`), a container in each server pod that only the operator can drive.
#[derive(Clone, Debug, KubeSchema, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
#[x_kube(validation = kube::core::Rule::new("self.pod != 'ordinal' || has(self.ordinal)").message("faults[].ordinal: required when pod is ordinal").field_path(".ordinal"))]
#[x_kube(validation = kube::core::Rule::new("self.pod == 'ordinal' || !has(self.ordinal)").message("faults[].ordinal: only with pod: ordinal").field_path(".ordinal"))]
#[x_kube(validation = kube::core::Rule::new("!(self.action in ['pause', 'partition']) || has(self.durationSeconds)").message("faults[].durationSeconds: required with actions pause and partition").field_path(".durationSeconds"))]
#[x_kube(validation = kube::core::Rule::new("self.action in ['pause', 'partition'] || !has(self.durationSeconds)").message("faults[].durationSeconds: only with actions pause and partition").field_path(".durationSeconds"))]
#[x_kube(validation = kube::core::Rule::new("self.action == 'partition' || !has(self.partitionFrom)").message("faults[].partitionFrom: only with action partition").field_path(".partitionFrom"))]
pub struct Fault {
    /// Seconds into the measured phase (after any warm-up) at which the fault is injected.
    #[schemars(range(min = 1, max = 86400))]
    pub after_seconds: i32,
    /// What is done to the chosen pod.
    pub action: FaultAction,
    /// Which of the target's server pods.
    pub pod: FaultPod,
    /// The server's ordinal with `pod: ordinal`: `<name>-<ordinal>` of a StatefulSet; a
    /// single-broker MqttBroker's Deployment pod is ordinal 0 (pods in name order).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0, max = 15))]
    pub ordinal: Option<i32>,
    /// Seed of `pod: random` (each round draws from it; the pod drawn is recorded). Unset:
    /// derived from the run's uid and generation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0, max = 2147483647))]
    pub seed: Option<i64>,
    /// With `action: pause`: how long the server process stays stopped; with `partition`:
    /// how long its traffic is dropped.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 300))]
    pub duration_seconds: Option<i32>,
    /// With `action: partition`: whose traffic is cut (default `peers`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub partition_from: Option<PartitionFrom>,
}

/// Which of a server's traffic a `partition` drops.
#[derive(Clone, Copy, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub enum PartitionFrom {
    /// The other servers of its cluster (JetStream: the route port): it keeps its clients but
    /// loses its quorum.
    #[default]
    Peers,
    /// Its clients (the client ports): it stays in its cluster but nobody reaches it.
    Clients,
    /// Both: the server is cut off entirely.
    Both,
}

/// What a fault does to a server pod.
#[derive(Clone, Copy, Debug, Deserialize, Serialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub enum FaultAction {
    /// Delete the pod with its normal grace period: the server shuts down cleanly and its
    /// StatefulSet starts a new one.
    Delete,
    /// Delete the pod with a 1-second grace period: the kubelet runs the preStop hook and sends
    /// SIGTERM (nats-server starts lame duck mode), then SIGKILL when the grace ends (the
    /// kubelet stretches it to 2 s). Not a crash: a
    /// fast, cut-short graceful deletion; for a crash use `crash`. Never grace 0 (a forced
    /// deletion): its replacement would start on the same volume while the old server still ran.
    Kill,
    /// SIGKILL to the server process, sent by the pod's fault agent: no preStop hook, no
    /// SIGTERM, no shutdown. The container restarts in place (same pod, same volumes). Needs
    /// `spec.faultInjection.enabled` on the target.
    Crash,
    /// SIGSTOP to the server process for `durationSeconds`, then SIGCONT, both sent by the
    /// pod's fault agent: a process that stops answering but keeps its state and connections
    /// (a long GC pause, a stalled VM). Needs `spec.faultInjection.enabled` on the target.
    Pause,
    /// Drop the server's TCP traffic (`partitionFrom`: its peers, its clients or both) for
    /// `durationSeconds`, then heal: nftables rules in the pod's own network namespace, applied
    /// and removed by its fault agent. Packets of established connections are dropped too, so
    /// connections go silent as behind a broken network instead of being refused. Needs
    /// `spec.faultInjection.enabled` and `spec.faultInjection.network` on the target.
    Partition,
    /// Power loss of the server's machine, as far as its store sees it: the fault agent has the
    /// lazy file system under the store (`spec.faultInjection.powerLoss`) freeze, discard every
    /// write not yet fsynced and SIGKILL the server, at one instant; the container restarts on
    /// what was synced. One per ordinal at the same `afterSeconds` is a coordinated power
    /// failure of the whole cluster. Needs `spec.faultInjection.powerLoss` on the target.
    PowerLoss,
}

/// The fault agent of a server kind: a small container in each server pod, sharing its process
/// namespace, that signals the server process when the operator asks (BenchmarkRun
/// `spec.faults` with `action: crash` or `pause`), and with `network` also cuts its traffic
/// (`partition`). Its control port answers only credentials the operator signed for this very
/// server object. Off: nothing but pod deletion ever touches the servers.
#[derive(Clone, Debug, Default, Deserialize, Serialize, KubeSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
#[x_kube(validation = kube::core::Rule::new("!self.network || self.enabled").message("faultInjection.network: needs enabled: true").field_path(".network"))]
#[x_kube(validation = kube::core::Rule::new("!self.powerLoss || self.enabled").message("faultInjection.powerLoss: needs enabled: true").field_path(".powerLoss"))]
pub struct FaultAgentSpec {
    /// Add the fault agent to every server pod (changes the pod template: the servers roll).
    /// It runs as the server's non-root user with no capability.
    #[serde(default)]
    pub enabled: bool,
    /// Also let the agent cut the server's network (`partition` faults). The agent then runs as
    /// uid 0 with exactly two capabilities, NET_ADMIN (nftables in the pod's own network
    /// namespace) and KILL (to signal the server's user): the Pod Security `privileged` level,
    /// so a namespace enforcing `baseline` or `restricted` refuses these pods.
    #[serde(default)]
    pub network: bool,
    /// Also put the store under msgbench's lazy file system, for `powerLoss` faults: a FUSE
    /// file system between nats-server and its volume that keeps written data in its own memory
    /// until it is fsynced (as LazyFS, which Jepsen used), so a power loss can discard exactly
    /// what a real one would. JetStreamCluster with file storage only. The server container
    /// then runs privileged, as uid 0 (the wrapper mounts FUSE, then starts nats-server as the
    /// server's user): mount(2) needs CAP_SYS_ADMIN, and containerd gives a container
    /// `/dev/fuse` only when privileged. Needs the chart's `faults.powerLoss`. Changes the pod
    /// template: the servers roll.
    #[serde(default)]
    pub power_loss: bool,
}

/// What the fault agent did to the pod's network for a `partition`, by its own clock.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct FaultPartition {
    /// The TCP ports whose traffic was dropped, both directions.
    pub ports: Vec<i32>,
    /// The nftables table applied (`nft list table` form).
    pub rules: String,
    /// When the rules were in place.
    pub applied_time: Time,
    /// When the agent removes them (on its own timer).
    pub heal_time: Time,
}

/// What a power loss took from the server's store, as its lazy file system reports it.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct FaultPowerLoss {
    /// Bytes written to the store but not yet fsynced at the instant of the power loss, thrown
    /// away: 0 when every write had been synced (`syncInterval: always`).
    pub discarded_bytes: i64,
}

/// What the fault agent did, in its own words and by its own clock.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct FaultSignal {
    /// The signal sent, e.g. `SIGKILL`.
    pub signal: String,
    /// The process it was sent to (its name and pid in the pod).
    pub process: String,
    pub pid: i32,
    /// When the agent sent it.
    pub sent_time: Time,
    /// With `pause`: when the agent sends SIGCONT.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resume_time: Option<Time>,
}

/// With `crash` and `powerLoss`: the server container's restart as the kubelet reports it in the pod's status,
/// a view independent of the agent's. The kubelet's times have whole-second resolution.
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct FaultRestart {
    /// The crashed container's exit code (137: killed by SIGKILL; 99: msgbench-lazyfs after a
    /// `powerLoss`, its server killed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i32>,
    /// When the crashed container ended.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exited_time: Option<Time>,
    /// Why `exitCode` and `exitedTime` are unavailable although the container was seen
    /// running again after the signal: the kubelet's status showed a new start and a higher
    /// restart count, but no last state (it had already removed the exited container, which
    /// happens when several containers of a node are killed at once).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit_unavailable: Option<String>,
    /// When the container ran again. Unset: not yet, or not before the run ended.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub running_time: Option<Time>,
    /// Seconds from `exitedTime` to `runningTime`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub down_seconds: Option<i64>,
    /// The kubelet held the restart back (`CrashLoopBackOff`: 10 s after a container's second
    /// crash within 10 minutes, doubling up to 5 minutes), so the server stayed down longer than
    /// the crash itself: figures after this fault include that wait, and rounds whose crashes
    /// were held back differently are not like for like. Seen as the kubelet's waiting reason,
    /// or as a restart that took 5 s or more (an unheld one takes a second or two).
    #[serde(default)]
    pub back_off: bool,
    /// Not running again before its trial's drain could end (or not seen running again by the
    /// time results were merged): acknowledged messages the subscribers missed in that trial
    /// may be in the stream, undelivered, so its `lostAcked` cannot tell them from lost ones.
    #[serde(default)]
    pub down_past_drain: bool,
}

impl FaultAction {
    /// Carried out by the target pod's fault agent (needs `spec.faultInjection.enabled`).
    pub fn needs_agent(self) -> bool {
        matches!(
            self,
            FaultAction::Crash
                | FaultAction::Pause
                | FaultAction::Partition
                | FaultAction::PowerLoss
        )
    }
}

/// How the pod is chosen, at the moment the fault is due.
#[derive(Clone, Copy, Debug, Deserialize, Serialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub enum FaultPod {
    /// The server with `ordinal`.
    Ordinal,
    /// One of the servers, drawn from `seed` (the same draw for every variant of a round).
    Random,
    /// JetStream only: the current leader of the benchmark stream, read from the servers'
    /// monitoring endpoint (`/jsz`).
    StreamLeader,
}

/// One fault execution: planned when its trial started, carried out when due.
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct FaultRecord {
    /// Index into `spec.faults`, 0-based.
    pub fault: i32,
    /// The runner trial it belongs to, 1-based, in execution order.
    pub trial: i32,
    /// With variants: the round and the variant that ran in this trial.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub round: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub variant: Option<String>,
    /// `<Kind>/<name>` of the server it acts on.
    pub server: String,
    pub action: Option<FaultAction>,
    /// When it was due: the trial's start + warm-up + `afterSeconds`.
    pub planned_time: Option<Time>,
    /// When the pod was deleted (unset: not yet, or not done: see `message`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub executed_time: Option<Time>,
    /// Seconds into the measured phase at which it was carried out.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub offset_seconds: Option<f64>,
    /// The pod acted on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pod: Option<String>,
    /// How the pod was chosen, or why nothing was done.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// With `crash`, `pause` and `powerLoss`: the signal as the fault agent reports sending it
    /// (with `powerLoss`, the lazy file system's wrapper sends it on the agent's command).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signal: Option<FaultSignal>,
    /// With `partition`: the rules as the fault agent reports applying them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub partition: Option<FaultPartition>,
    /// With `powerLoss`: what the lazy file system discarded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub power_loss: Option<FaultPowerLoss>,
    /// With `crash` and `powerLoss`: how and when the container came back, as the kubelet
    /// reports it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub restart: Option<FaultRestart>,
    /// JetStream: which server led the benchmark stream before the fault and once it was over,
    /// as the servers report it (`/jsz`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stream_leader: Option<FaultStreamLeader>,
    /// What the fault did to delivery, read from the trial's timeline once the run is merged.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub effect: Option<FaultEffect>,
    /// Set when the fault may have been carried out but its fault agent's report was lost: the
    /// agent answered a repeated ask without it (it restarted, or its pod was replaced, after
    /// an earlier ask that may have reached it). Such a fault is unknown, never "not done" and
    /// never asked for again; evidence read afterwards may confirm it (`confirmed`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub report_lost: Option<FaultReportLost>,
    /// Set while the fault is being carried out: written to status before the pod is deleted,
    /// so a pass after a lost status write or a leader change confirms this very deletion
    /// (or finishes it) instead of judging it late or choosing another pod. Cleared once the
    /// outcome is recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub injecting: Option<FaultInjection>,
}

/// The benchmark stream's leader around one fault (a server name, i.e. its pod).
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct FaultStreamLeader {
    /// When the pod was chosen: the leader the servers named (most of those that answered).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub before: Option<String>,
    /// The leader most servers named once the fault was over and they had had time to elect
    /// one: 10 s after the fault (nats-server's election timeout is 4 to 9 s), or for a pause
    /// or partition 1 s after it ended if that is later. Unset: not read yet, no majority yet,
    /// or the trial ended first.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub after: Option<String>,
    /// When `after` was read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub after_time: Option<Time>,
}

/// A fault whose agent report was lost, and what evidence says about it.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct FaultReportLost {
    /// When the first ask was about to go out (the pod's choice, written to status just before
    /// it; the pod is `pod`): evidence is looked for from then on, on that very pod.
    pub asked_time: Time,
    /// What came instead of the report (the agent's answer to the repeated ask, or why it
    /// could not be asked).
    pub answer: String,
    /// The evidence that the fault was carried out, in words (e.g. the server container's
    /// exit after the ask, as the kubelet reports it). Unset: unknown.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub confirmed: Option<String>,
    /// Evidence was looked for until its bound and none was found: what was checked. The
    /// fault stays unknown (not "not done": no evidence is no proof either way).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unconfirmed: Option<String>,
}

/// The pod a fault is about to act on, recorded before it is touched.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct FaultInjection {
    /// The chosen pod.
    pub pod: String,
    /// Its uid: a pod of the same name with another uid is its replacement (the deletion
    /// happened), never a second target.
    pub pod_uid: String,
    /// When the deletion, or the fault agent's first ask, was about to be sent (it follows the
    /// status write of this choice at once: a choice in status may have been acted on).
    pub started_time: Time,
    /// How the pod was chosen.
    pub how: String,
    /// JetStream: the benchmark stream's leader when the pod was chosen.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stream_leader: Option<String>,
}

impl FaultRecord {
    /// Carried out (a pod was deleted, the agent reported it, or evidence confirmed it).
    pub fn executed(&self) -> bool {
        self.executed_time.is_some()
    }

    /// Unknown: its agent report was lost and no evidence confirmed it (yet).
    pub fn unknown(&self) -> bool {
        self.executed_time.is_none() && self.report_lost.is_some()
    }
}

/// The faults of one result (the run, or one variant over its rounds), for thresholds.
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct FaultSummary {
    /// Faults carried out in this result's trials.
    pub executed: u32,
    /// Of those, how many were back to ≥ 95 % of the delivery rate before them within the
    /// measured phase.
    pub recovered: u32,
    /// Longest time to recover (seconds). Unset when none recovered; threshold metric
    /// `recoverySeconds` reads it only when every fault recovered (otherwise it fails).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub longest_recovery_seconds: Option<f64>,
    /// Mean time to recover over those that recovered (seconds).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mean_recovery_seconds: Option<f64>,
    /// Crashes whose restart the kubelet held back (`faults[].restart.backOff`): their
    /// recovery includes the kubelet's wait, not only the server's.
    #[serde(default, skip_serializing_if = "is_zero_count")]
    pub restart_back_offs: u32,
    /// Crashes whose server was still down when the drain ended (`faults[].restart.downPastDrain`):
    /// `lostAcked` then counts messages that may only be undelivered, and a `lostAcked`
    /// threshold reads as unavailable.
    #[serde(default, skip_serializing_if = "is_zero_count")]
    pub down_past_drain: u32,
    /// Highest per-second p99 in the 10 s after a fault (ms, coarse: within 6 %).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub p99_peak_ms: Option<f64>,
}

/// Delivery around one fault, from the trial's per-second timeline merged over runners
/// (one-second resolution).
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct FaultEffect {
    /// Mean deliveries/s over the (up to) 10 whole seconds before the fault.
    pub before_receive_rate: f64,
    /// Lowest deliveries/s in a whole second after the fault.
    pub lowest_receive_rate: f64,
    /// Seconds from the fault to the start of the first whole second delivering ≥ 95 % of
    /// `beforeReceiveRate`. Unset: not back within the measured phase (`recovery` says so).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recovery_seconds: Option<f64>,
    /// How recovery went, in words (also why `recoverySeconds` is unset).
    pub recovery: String,
    /// Highest per-second p99 latency in the 10 s from the fault's second (ms; coarse, within
    /// 6 %), and the same over the seconds before it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub p99_peak_ms: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub p99_before_ms: Option<f64>,
    /// Deliveries that repeated one already delivered to the same subscriber, from the
    /// fault's second until the next fault of its trial or the end of the measured phase
    /// (exact counts, summed over subscribers and runners).
    #[serde(default)]
    pub duplicates: u64,
    /// Deliveries below the highest sequence already delivered to the same subscriber (not
    /// duplicates), over the same window.
    #[serde(default)]
    pub out_of_order: u64,
    /// Acknowledged publishes of this fault's trial that no subscriber received (all runners;
    /// shared by the faults of a trial that has more than one). Unset where publishes are not
    /// acknowledged.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trial_lost_acked: Option<u64>,
    /// The trial's longest publish stall (publishing, nothing acknowledged; ms), and
    /// when it began relative to the fault (seconds; the runner's clock against the
    /// operator's, so within their skew). Unset where publishes are not acknowledged.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trial_publish_stall_ms: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub publish_stall_from_fault_seconds: Option<f64>,
}

fn is_zero_count(n: &u32) -> bool {
    *n == 0
}
