//! Why a runner gave up, machine-readable: one small JSON object written to the container's
//! termination-message file, which Kubernetes copies into the pod's
//! `status.containerStatuses[].state.terminated.message` for the operator to read.
use serde::{Deserialize, Serialize};

/// The target never accepted a connection within `connectTimeoutSeconds`.
pub const TARGET_UNREACHABLE: &str = "TargetUnreachable";
/// Connected and ready, but the operator's `/start` never came within `barrierTimeoutSeconds`.
pub const BARRIER_TIMEOUT: &str = "BarrierTimeout";
/// Any other failure.
pub const RUNNER_FAILED: &str = "RunnerFailed";
/// Kubernetes keeps at most 4096 bytes of a termination message; stay well below.
pub const MAX_MESSAGE_CHARS: usize = 2048;

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Termination {
    pub reason: String,
    pub message: String,
}

impl Termination {
    /// A message of `reason`, cut to [`MAX_MESSAGE_CHARS`] characters.
    pub fn new(reason: &str, message: &str) -> Termination {
        Termination {
            reason: reason.into(),
            message: message.chars().take(MAX_MESSAGE_CHARS).collect(),
        }
    }

    /// A termination message written by a runner; `None` for anything else (plain log text
    /// from an older runner, `FallbackToLogsOnError`).
    pub fn parse(text: &str) -> Option<Termination> {
        serde_json::from_str(text.trim()).ok()
    }

    /// The JSON the runner writes.
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).expect("two strings always serialize")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_parse_back_and_plain_text_does_not() {
        let t = Termination::new(TARGET_UNREACHABLE, &"x".repeat(5000));
        assert_eq!(t.message.chars().count(), MAX_MESSAGE_CHARS);
        assert_eq!(Termination::parse(&format!("{}\n", t.to_json())), Some(t));
        assert_eq!(Termination::parse("bench-runner: trial 1: boom"), None);
    }
}
