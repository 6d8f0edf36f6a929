//! What the operator and an agent exchange: the agent config (from the run's ConfigMap) and the
//! bodies of the control endpoint (`/start`, `/stop`, `/progress`, `/results`, `/results/ack`).
use msgbench_crds::workload::{Protocol, Workload};
use serde::{Deserialize, Serialize};

/// Version of the result record envelope.
pub const LINE_FORMAT: &str = "msgbench.dev/runner-line/v1";
/// Port of `/ready`, `/start`, `/progress` and `/results`.
pub const AGENT_PORT: u16 = 9090;
/// Port of the agent's live Prometheus `/metrics` (container port named [`METRICS_PORT_NAME`]).
/// Its own port: the control port needs the operator's credential, a scrape needs none.
pub const METRICS_PORT: u16 = 9102;
/// The runner container's port name the chart's PodMonitor scrapes.
pub const METRICS_PORT_NAME: &str = "metrics";
/// Seconds a finished agent keeps its results for the operator by default.
pub const DEFAULT_RESULTS_HOLD_SECONDS: u32 = 120;
/// Default connect window (`connectTimeoutSeconds`, `--connect-timeout-seconds`).
pub const DEFAULT_CONNECT_TIMEOUT_SECONDS: u32 = 30;

/// What the operator's ConfigMap gives every runner of a run (no secrets: control credentials
/// are checked with the operator's public keys, from the pod's environment).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AgentConfig {
    /// Target URL, e.g. `nats://js3.bench.svc:4222`.
    pub target: String,
    pub workload: Workload,
    #[serde(default = "one")]
    pub trials: u32,
    #[serde(default)]
    pub settle_seconds: u32,
    /// Seconds to wait for `/start` once connected before giving up (exit non-zero).
    pub barrier_timeout_seconds: u32,
    /// Seconds to keep retrying a target that refuses or does not resolve yet, before the
    /// start gate (then exit with reason TargetUnreachable).
    #[serde(default = "default_connect_timeout")]
    pub connect_timeout_seconds: u32,
    /// With variants: every trial in execution order (rounds × variants, each round's order
    /// chosen by the operator). Empty: `trials` runs of `workload` against `target`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub schedule: Vec<ScheduledTrial>,
    /// Every trial after the first also waits for its own `POST /start {trial}` (after the
    /// settle pause), so several runners start each trial together instead of drifting apart.
    #[serde(default)]
    pub trial_barrier: bool,
    /// After the last trial, how long the agent keeps serving its results until the operator
    /// confirms it has them (`POST /results/ack`); then it exits anyway (the log keeps a copy).
    #[serde(default = "default_hold")]
    pub results_hold_seconds: u32,
    /// Targets that need credentials, and where the runner finds them: environment variables
    /// `{envPrefix}_TOKEN` or `{envPrefix}_USERNAME`/`_PASSWORD`, which the pod fills from the
    /// server's Secret. Only names here: a secret never enters this config.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub target_auth: Vec<TargetAuth>,
    /// Targets spoken to over TLS with a CA of their own, and where the pod mounts it (from
    /// the server's Secret, key `ca.crt`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub target_tls: Vec<TargetTls>,
    /// Names and tags that keep this run's traffic apart from every other run's on the same
    /// server. `None` (standalone use): the workload's names as written, tag 0.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub isolation: Option<RunIsolation>,
    /// How many runners the run has (their ids are 1 to `runners`): a delivery naming any other
    /// runner is counted as an error before any memory is given to it. 0 (standalone use):
    /// any id a payload can carry.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub runners: u32,
}

/// One run's identity on the wire. Every trial gets its own subjects (topics, channels),
/// client ids, JetStream stream and payload tag, so neither another run nor a late message of
/// an earlier trial is ever counted as this trial's.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RunIsolation {
    /// Short id of the run and spec generation (lowercase letters and digits).
    pub id: String,
    /// Payload tag of trial 0; trial `n` uses `tag + n * TRIAL_STRIDE` (mod 2^16, distinct for
    /// every trial of a run).
    pub tag: u16,
}

/// Odd, so `n * TRIAL_STRIDE` differs for every trial number below 2^16.
const TRIAL_STRIDE: u16 = 0x9E37;

/// Length of a run prefix ([`run_prefix`]).
pub const RUN_PREFIX_LEN: usize = 8;

/// The hex digits of a uid, lowercase, zero-padded on the left to at least 12 (objects from the
/// API always have a uid; tests may not).
fn uid_hex(uid: &str) -> String {
    let hex: String = uid
        .chars()
        .filter(char::is_ascii_hexdigit)
        .map(|c| c.to_ascii_lowercase())
        .collect();
    format!("{hex:0>12}")
}

/// What every [`RunIsolation::id`] of a run starts with, in all its spec generations: the
/// first 8 hex digits of its uid, lowercase. [`is_stream_of_run`] finds the run's streams by it.
pub fn run_prefix(uid: &str) -> String {
    uid_hex(uid)[..RUN_PREFIX_LEN].to_string()
}

/// Whether `s` could be a [`run_prefix`]: exactly 8 hex digits (either case).
pub fn is_run_prefix(s: &str) -> bool {
    s.len() == RUN_PREFIX_LEN && s.bytes().all(|b| b.is_ascii_hexdigit())
}

/// Whether `stream` is one [`RunIsolation::stream`] made for the run with prefix `run`, in any
/// generation and trial: it ends with `_<RUN>G<digits>_T<digits>` (RUN uppercased). Exact, so a
/// sweep of one run never deletes another run's stream or a stream someone named by hand.
pub fn is_stream_of_run(stream: &str, run: &str) -> bool {
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    if !is_run_prefix(run) {
        return false;
    }
    let Some((rest, trial)) = stream.rsplit_once("_T") else {
        return false;
    };
    let Some((rest, generation)) = rest.rsplit_once('G') else {
        return false;
    };
    digits(trial)
        && digits(generation)
        && rest
            .strip_suffix(run.to_ascii_uppercase().as_str())
            .is_some_and(|base| base.ends_with('_'))
}

impl RunIsolation {
    /// A run's wire identity, from its uid (random) and spec generation: id
    /// `<run_prefix>g<generation>`, and a payload tag from the next 4 hex digits of the uid.
    pub fn for_run(uid: &str, generation: i64) -> RunIsolation {
        let hex = uid_hex(uid);
        let tag = u16::from_str_radix(&hex[8..12], 16).unwrap_or(0) ^ (generation as u16);
        RunIsolation {
            id: format!("{}g{generation}", &hex[..RUN_PREFIX_LEN]),
            tag,
        }
    }

    /// The payload tag of `trial` (1-based).
    pub fn tag_of(&self, trial: u32) -> u16 {
        self.tag
            .wrapping_add((trial as u16).wrapping_mul(TRIAL_STRIDE))
    }

    /// `prefix` made this trial's own: `<prefix>-<id>-t<trial>` (valid in NATS subjects,
    /// MQTT topics, Socket.IO rooms and Pusher channels alike).
    pub fn topic_prefix(&self, prefix: &str, trial: u32) -> String {
        format!("{prefix}-{}-t{trial}", self.id)
    }

    /// A JetStream stream name made this trial's own: `<stream>_<ID>_T<trial>` (what
    /// [`is_stream_of_run`] recognises).
    pub fn stream(&self, stream: &str, trial: u32) -> String {
        format!("{stream}_{}_T{trial}", self.id.to_uppercase())
    }

    /// `w` with this trial's names: a stream the run creates gets its own name and subjects;
    /// an existing stream (`createStream: false`) keeps the names it was given, which must
    /// match its subjects (the tag still tells other traffic apart).
    pub fn apply(&self, w: &mut Workload, trial: u32) {
        if w.protocol == Protocol::Jetstream {
            let js = w.jetstream.get_or_insert_with(Default::default);
            if !js.create_stream {
                return;
            }
            js.stream = self.stream(&js.stream, trial);
        }
        w.topic_prefix = self.topic_prefix(&w.topic_prefix, trial);
    }
}

/// How a TLS target is verified, and the client certificate it may ask for.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TargetTls {
    pub target: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ca_file: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cert_file: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key_file: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_name: Option<String>,
}

/// Where the credentials of one target are.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TargetAuth {
    pub target: String,
    pub env_prefix: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub header: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub query: Option<String>,
}

/// One trial of a variants run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ScheduledTrial {
    /// 1-based round.
    pub round: u32,
    pub variant: String,
    pub target: String,
    pub workload: Workload,
}

impl AgentConfig {
    /// The trials to run, in order: the schedule, or `trials` repeats of the one workload.
    pub fn plan(&self) -> Vec<ScheduledTrial> {
        if !self.schedule.is_empty() {
            return self.schedule.clone();
        }
        (1..=self.trials)
            .map(|round| ScheduledTrial {
                round,
                variant: String::new(),
                target: self.target.clone(),
                workload: self.workload.clone(),
            })
            .collect()
    }
}

fn one() -> u32 {
    1
}

fn default_connect_timeout() -> u32 {
    DEFAULT_CONNECT_TIMEOUT_SECONDS
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

fn default_hold() -> u32 {
    DEFAULT_RESULTS_HOLD_SECONDS
}

/// The body of `POST /start` (and its answer: the start time the agent keeps).
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StartRequest {
    /// Common start (wall clock, ms since the epoch); a time in the past starts at once.
    pub start_at_unix_ms: u64,
    /// The trial it releases (1-based; later trials only with `trialBarrier`).
    #[serde(default = "one")]
    pub trial: u32,
}

/// `POST /stop` (and its answer: the stop the agent keeps). The operator's `spec.stopWhen`
/// decided the run has its answer: the agent runs no trial after `after_trial`, ends its plan
/// there and holds the records of the trials it ran as if that had been the plan (`GET
/// /results` says `trials: after_trial`, and `POST /results/ack` with that count ends the
/// hold). Idempotent: a resend (lost answer, restarted operator) keeps the first stop. Refused
/// with 409 once a trial after `after_trial` was released: what ran cannot be undone.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StopRequest {
    /// The last trial to run (1-based, in the schedule's order).
    pub after_trial: u32,
}

/// `GET /progress`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AgentProgress {
    pub ready: bool,
    pub started: bool,
    /// Current trial, 1-based (0 before the first).
    pub trial: u32,
    pub published: u64,
    pub received: u64,
    /// The trial this agent waits at the barrier for; 0 while not waiting.
    #[serde(default)]
    pub waiting_for: u32,
    /// Every trial ran (or every trial up to a `/stop`): the results wait on `GET /results`.
    #[serde(default)]
    pub finished: bool,
    /// The `afterTrial` of a `POST /stop` this agent keeps; 0 without one.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub stopped_after: u32,
    /// The common start this agent keeps for its current trial (ms since the epoch; 0 while it
    /// has none), so the operator can send a late runner the same start as the others.
    #[serde(default)]
    pub trial_start_unix_ms: u64,
}

/// One trial's result of one runner. `R` is the decoded result; the operator holds records
/// as [`RawResultLine`] (their result kept as JSON text) until it merges them.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ResultLine<R = crate::result::RunnerResult> {
    pub format: String,
    pub runner_id: u16,
    /// 1-based position in the run (with variants: in the schedule).
    pub trial: u32,
    /// With variants: the variant and its round.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub variant: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub round: Option<u32>,
    /// Wall clock when the trial's load started, ms since the epoch.
    pub started_unix_ms: u64,
    pub result: R,
}

/// A result kept as its JSON text, compared by that text.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(transparent)]
pub struct RawJson(pub Box<serde_json::value::RawValue>);

impl PartialEq for RawJson {
    fn eq(&self, o: &Self) -> bool {
        self.0.get() == o.0.get()
    }
}

/// A record whose result is kept as JSON text: the operator holds every record of a run until
/// all are in, and a decoded record holds three 139 KB histograms per phase, so it decodes each
/// one only when merging it ([`ResultLine::decode`]).
pub type RawResultLine = ResultLine<RawJson>;

/// Most sessions, stages and REST paths in one record: what the workload rules allow
/// (sessions 1..=32, stages.count 1..=32, socketio.rest.paths 1..=8).
pub const MAX_RECORD_SESSIONS: usize = 32;
pub const MAX_RECORD_STAGES: usize = msgbench_crds::workload::MAX_STAGES as usize;
pub const MAX_RECORD_REST_PATHS: usize = 8;

/// Why a held record does not decode.
#[derive(Debug, thiserror::Error)]
pub enum RecordError {
    #[error("{0}")]
    Json(#[from] serde_json::Error),
    #[error("record shape: {0}")]
    Shape(String),
}

/// The lists of a record, counted without decoding what they hold.
#[derive(Deserialize)]
struct RecordShape {
    #[serde(default)]
    sessions: Vec<serde::de::IgnoredAny>,
    #[serde(default)]
    stages: Vec<serde::de::IgnoredAny>,
    #[serde(default)]
    rest: Vec<serde::de::IgnoredAny>,
}

impl RawResultLine {
    /// The result, decoded (histograms included) once its shape is checked: each decoded
    /// histogram takes 139 KB however short its text, so a record (from a user-chosen runner
    /// image) listing more phases or REST paths than any workload makes is refused first.
    pub fn decode(&self) -> Result<crate::result::RunnerResult, RecordError> {
        let text = self.result.0.get();
        let shape: RecordShape = serde_json::from_str(text)?;
        for (what, n, max) in [
            ("sessions", shape.sessions.len(), MAX_RECORD_SESSIONS),
            ("stages", shape.stages.len(), MAX_RECORD_STAGES),
            ("rest", shape.rest.len(), MAX_RECORD_REST_PATHS),
        ] {
            if n > max {
                return Err(RecordError::Shape(format!(
                    "{what}: {n} entries, a workload makes at most {max}"
                )));
            }
        }
        Ok(serde_json::from_str(text)?)
    }
    /// Bytes of JSON this record holds.
    pub fn json_bytes(&self) -> usize {
        self.result.0.get().len()
    }
    /// The same record, as its JSON text would be read back (for tests and tools).
    pub fn from_line(l: &ResultLine) -> serde_json::Result<Self> {
        serde_json::from_str(&serde_json::to_string(l)?)
    }
}

/// `GET /results`: every finished trial's record so far (the operator reads the records as
/// [`RawResultLine`]).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AgentResults<R = crate::result::RunnerResult> {
    pub runner_id: u16,
    /// Trials this agent runs in all: the plan's, or after a `POST /stop`, the trials it ran.
    pub trials: u32,
    /// All of them finished.
    pub finished: bool,
    pub records: Vec<ResultLine<R>>,
}

/// `POST /results/ack`: the operator has stored this many records; the agent may exit.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ResultsAck {
    pub records: u32,
}

#[cfg(test)]
mod tests {
    use super::{is_run_prefix, is_stream_of_run, run_prefix, AgentConfig, RunIsolation};

    const UID: &str = "ABCDEF12-3456-7890-abcd-ef1234567890";

    #[test]
    fn a_run_prefix_is_the_first_8_hex_digits_of_the_uid() {
        assert_eq!(run_prefix(UID), "abcdef12");
        // Dashes and other non-hex characters are skipped; a short uid is padded on the left.
        assert_eq!(run_prefix("u-1"), "00000000");
        assert_eq!(run_prefix("zz-12345678-9abc"), "12345678");
        let iso = RunIsolation::for_run(UID, 3);
        assert_eq!(iso.id, "abcdef12g3");
        assert_eq!(iso.tag, 0x3456 ^ 3);
        assert!(iso.id.starts_with(&run_prefix(UID)));
        assert!(is_run_prefix("abcdef12") && is_run_prefix("ABCDEF12"));
        for bad in [
            "",
            "abcdef1",
            "abcdef123",
            "abcdefg1",
            "abcdef1-",
            "ábcdef1",
        ] {
            assert!(!is_run_prefix(bad), "{bad:?}");
        }
    }

    #[test]
    fn streams_of_a_run_match_exactly() {
        assert!(is_stream_of_run("FOO_ABCDEF12G3_T1", "abcdef12"));
        assert!(is_stream_of_run("FOO_ABCDEF12G3_T1", "ABCDEF12"));
        assert!(is_stream_of_run("MY_STREAM_ABCDEF12G12_T345", "abcdef12"));
        // A base that itself looks like a run's stream: only the end counts.
        assert!(is_stream_of_run(
            "X_ABCDEF13G1_T1_ABCDEF12G2_T2",
            "abcdef12"
        ));
        for not in [
            "FOO_ABCDEF12G3_T1X",
            "FOO_ABCDEF13G3_T1",
            "FOO_ABCDEF12_T1",
            "ABCDEF12G3_T1",
            "FOO_abcdef12G3_T1",
            "FOO_ABCDEF12g3_T1",
            "FOO_ABCDEF12G3_t1",
            "FOO_ABCDEF12G_T1",
            "FOO_ABCDEF12G3_T",
            "FOO_ABCDEF12G-3_T1",
            "FOO_XABCDEF12G3_T1",
            "FOO-ABCDEF12G3_T1",
            "FOO_ABCDEF12G3",
            "",
        ] {
            assert!(!is_stream_of_run(not, "abcdef12"), "{not:?}");
        }
        for run in ["", "abcdef1", "abcdef123", "bcdef12g", "abcdef1 "] {
            assert!(!is_stream_of_run("FOO_ABCDEF12G3_T1", run), "{run:?}");
        }
    }

    /// What `stream()` names, the matcher finds, in every generation and trial; a name made
    /// for another run it does not.
    #[test]
    fn names_made_by_stream_match_their_run_only() {
        let other = "abcdef13-0000-0000-0000-000000000000";
        for generation in [1, 2, 17] {
            for trial in [1, 2, 10] {
                for base in ["MSGBENCH", "a_b", "x"] {
                    let s = RunIsolation::for_run(UID, generation).stream(base, trial);
                    assert!(is_stream_of_run(&s, &run_prefix(UID)), "{s}");
                    assert!(!is_stream_of_run(&s, &run_prefix(other)), "{s}");
                    let o = RunIsolation::for_run(other, generation).stream(base, trial);
                    assert!(!is_stream_of_run(&o, &run_prefix(UID)), "{o}");
                }
            }
        }
    }

    /// A config written before `connectTimeoutSeconds` and `resultsHoldSeconds` existed still
    /// parses, with the defaults.
    #[test]
    fn an_older_config_gets_the_default_windows() {
        let cfg: AgentConfig = serde_norway::from_str(
            "target: nats://x:4222\nworkload: {protocol: nats, durationSeconds: 1}\nbarrierTimeoutSeconds: 60\n",
        )
        .unwrap();
        assert_eq!(cfg.connect_timeout_seconds, 30);
        assert_eq!(cfg.results_hold_seconds, 120);
    }
}
