//! Why a runner gave up, machine-readable: one small JSON object written to the container's
//! termination-message file, which Kubernetes copies into the pod's
//! `status.containerStatuses[].state.terminated.message` for the operator to read.
use msgbench_crds::RunFailureReason;
use serde::{Deserialize, Serialize};

/// Kubernetes keeps at most 4096 bytes of a termination message; stay well below.
pub const MAX_MESSAGE_CHARS: usize = 2048;

/// Why a runner gave up: the subset of the run's failure reasons a runner can know. The wire
/// strings are [`RunFailureReason`]'s (checked by a test), so what a runner writes is the reason
/// the run fails with.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum RunnerGaveUp {
    /// The target never accepted a connection within `connectTimeoutSeconds`.
    TargetUnreachable,
    /// The target refused the runner's credentials (or they are unusable as given).
    TargetAuthFailed,
    /// TLS with the target failed: its certificate was not trusted, had expired or named
    /// another host, it did not speak TLS, or the TLS files given for it are unusable.
    TargetTLSFailed,
    /// The target refused the protocol version the runner speaks.
    TargetProtocolRefused,
    /// Connected and ready, but the operator's `/start` never came within `barrierTimeoutSeconds`.
    BarrierTimeout,
    /// Any other failure, and any reason this operator does not know (a newer runner's).
    #[serde(other)]
    RunnerFailed,
}

impl From<RunnerGaveUp> for RunFailureReason {
    fn from(r: RunnerGaveUp) -> Self {
        match r {
            RunnerGaveUp::TargetUnreachable => RunFailureReason::TargetUnreachable,
            RunnerGaveUp::TargetAuthFailed => RunFailureReason::TargetAuthFailed,
            RunnerGaveUp::TargetTLSFailed => RunFailureReason::TargetTLSFailed,
            RunnerGaveUp::TargetProtocolRefused => RunFailureReason::TargetProtocolRefused,
            RunnerGaveUp::BarrierTimeout => RunFailureReason::BarrierTimeout,
            RunnerGaveUp::RunnerFailed => RunFailureReason::RunnerFailed,
        }
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Termination {
    pub reason: RunnerGaveUp,
    pub message: String,
}

impl Termination {
    /// A message of `reason`, cut to [`MAX_MESSAGE_CHARS`] characters.
    pub fn new(reason: RunnerGaveUp, message: &str) -> Termination {
        Termination {
            reason,
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
        let t = Termination::new(RunnerGaveUp::TargetUnreachable, &"x".repeat(5000));
        assert_eq!(t.message.chars().count(), MAX_MESSAGE_CHARS);
        assert_eq!(Termination::parse(&format!("{}\n", t.to_json())), Some(t));
        assert_eq!(Termination::parse("bench-runner: trial 1: boom"), None);
    }

    #[test]
    fn runner_reasons_are_spelt_as_the_run_reasons_they_become() {
        for r in [
            RunnerGaveUp::TargetUnreachable,
            RunnerGaveUp::TargetAuthFailed,
            RunnerGaveUp::TargetTLSFailed,
            RunnerGaveUp::TargetProtocolRefused,
            RunnerGaveUp::BarrierTimeout,
            RunnerGaveUp::RunnerFailed,
        ] {
            let wire = serde_json::to_value(r).unwrap();
            assert_eq!(wire, RunFailureReason::from(r).to_string(), "{r:?}");
            let back: RunnerGaveUp = serde_json::from_value(wire).unwrap();
            assert_eq!(back, r);
        }
        // The wire strings the operator side matches on, spelt out once.
        let spelt: Vec<String> = [
            RunnerGaveUp::TargetAuthFailed,
            RunnerGaveUp::TargetTLSFailed,
            RunnerGaveUp::TargetProtocolRefused,
        ]
        .iter()
        .map(|r| {
            serde_json::to_value(r)
                .unwrap()
                .as_str()
                .unwrap()
                .to_string()
        })
        .collect();
        assert_eq!(
            spelt,
            [
                "TargetAuthFailed",
                "TargetTLSFailed",
                "TargetProtocolRefused"
            ]
        );
        // A reason from a newer runner is a generic failure, its message kept.
        let t = Termination::parse(r#"{"reason":"Novel","message":"m"}"#).unwrap();
        assert_eq!(
            (t.reason, t.message.as_str()),
            (RunnerGaveUp::RunnerFailed, "m")
        );
    }
}
