//! Why a runner gave up, machine-readable: one small JSON object written to the container's
//! termination-message file, which Kubernetes copies into the pod's
//! `status.containerStatuses[].state.terminated.message` for the operator to read.
use serde::{Deserialize, Serialize};
use std::path::Path;

/// Where Kubernetes expects the termination message (the container's terminationMessagePath).
pub const DEFAULT_PATH: &str = "/dev/termination-log";
/// Environment variable overriding [`DEFAULT_PATH`] (tests, other runtimes).
pub const PATH_ENV: &str = "MSGBENCH_TERMINATION_LOG";
/// The target never accepted a connection within `connectTimeoutSeconds`.
pub const TARGET_UNREACHABLE: &str = "TargetUnreachable";
/// Connected and ready, but the operator's `/start` never came within `barrierTimeoutSeconds`.
pub const BARRIER_TIMEOUT: &str = "BarrierTimeout";
/// Any other failure.
pub const RUNNER_FAILED: &str = "RunnerFailed";
/// Kubernetes keeps at most 4096 bytes of a termination message; stay well below.
const MAX_MESSAGE_CHARS: usize = 2048;

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Termination {
    pub reason: String,
    pub message: String,
}

/// The start barrier of a trial timed out (a structured error, so the reason survives context).
#[derive(Clone, Debug, PartialEq)]
pub struct BarrierTimedOut(pub String);

impl std::fmt::Display for BarrierTimedOut {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for BarrierTimedOut {}

impl Termination {
    /// The reason of a runner error: a structured error anywhere in its chain decides.
    pub fn of(e: &anyhow::Error) -> Termination {
        let reason = if e
            .chain()
            .any(|c| c.is::<crate::connect::TargetUnreachable>())
        {
            TARGET_UNREACHABLE
        } else if e.chain().any(|c| c.is::<BarrierTimedOut>()) {
            BARRIER_TIMEOUT
        } else {
            RUNNER_FAILED
        };
        Termination {
            reason: reason.into(),
            message: format!("{e:#}").chars().take(MAX_MESSAGE_CHARS).collect(),
        }
    }

    /// A termination message written by a runner; `None` for anything else (plain log text
    /// from an older runner, `FallbackToLogsOnError`).
    pub fn parse(text: &str) -> Option<Termination> {
        serde_json::from_str(text.trim()).ok()
    }

    /// Writes the message to `path`. Best effort: outside a container the file may not be
    /// writable, and the error is on stderr anyway.
    pub fn write(&self, path: &Path) {
        if let Ok(json) = serde_json::to_string(self) {
            if let Err(e) = std::fs::write(path, json) {
                tracing::debug!(path = %path.display(), error = %e, "no termination message written");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::connect::TargetUnreachable;
    use std::time::Duration;

    #[test]
    fn structured_errors_keep_their_reason_through_context() {
        let u = anyhow::Error::new(TargetUnreachable {
            url: "nats://js3.ns.svc:4222".into(),
            attempts: 9,
            waited: Duration::from_secs(30),
            window: Duration::from_secs(30),
            last_error: "Connection refused".into(),
        })
        .context("subscriber 0")
        .context("trial 1");
        let t = Termination::of(&u);
        assert_eq!(t.reason, TARGET_UNREACHABLE);
        assert!(
            t.message
                .starts_with("trial 1: subscriber 0: target nats://js3.ns.svc:4222 unreachable"),
            "{}",
            t.message
        );
        let b = anyhow::Error::new(BarrierTimedOut("start barrier timed out (trial 1)".into()))
            .context("trial 1");
        assert_eq!(Termination::of(&b).reason, BARRIER_TIMEOUT);
        assert_eq!(
            Termination::of(&anyhow::anyhow!("boom")).reason,
            RUNNER_FAILED
        );
    }

    #[test]
    fn written_messages_parse_back_and_plain_text_does_not() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("termination-log");
        let t = Termination {
            reason: TARGET_UNREACHABLE.into(),
            message: "x".repeat(5000),
        };
        t.write(&path);
        let back = Termination::parse(&std::fs::read_to_string(&path).unwrap()).unwrap();
        assert_eq!(back, t);
        assert_eq!(Termination::parse("bench-runner: trial 1: boom"), None);
        // An unwritable path is ignored.
        t.write(Path::new("/nonexistent-dir/termination-log"));
        let long = Termination::of(&anyhow::anyhow!("{}", "y".repeat(5000)));
        assert_eq!(long.message.chars().count(), MAX_MESSAGE_CHARS);
    }
}
