//! Why a runner pod failed, from its container's terminated state: the runner writes a JSON
//! termination message `{"reason","message"}`; older runners (and crashes before it could
//! write) leave the log tail (`FallbackToLogsOnError`), which is searched for known phrases.
use msgbench_crds::RunFailureReason::{self, BarrierTimeout, RunnerFailed};
use runner_api::termination::Termination;

/// Kubernetes' reason for a Job or pod past its `activeDeadlineSeconds` (and a phrase runner
/// logs may carry). Kubernetes' word, read and never set: the run's own reason of the same
/// spelling is [`RunFailureReason::DeadlineExceeded`].
pub const KUBE_DEADLINE_EXCEEDED: &str = "DeadlineExceeded";

/// (run reason, message) of a terminated runner container.
pub fn classify(exit_code: i32, kubelet_reason: &str, message: &str) -> (RunFailureReason, String) {
    if let Some(t) = Termination::parse(message) {
        return (
            RunFailureReason::from(t.reason),
            format!("exit code {exit_code}: {}", t.message),
        );
    }
    if kubelet_reason == "OOMKilled" {
        // The log tail of a killed process is whatever it was printing (result frames): noise.
        return (
            RunnerFailed,
            format!(
                "exit code {exit_code} (OOMKilled): the runner went over its memory limit \
                 (spec.runners.resources.limits.memory)"
            ),
        );
    }
    let tail: Vec<String> = message.lines().rev().take(3).map(clip).collect();
    let tail = tail.into_iter().rev().collect::<Vec<_>>().join(" | ");
    // Trial 1's barrier, or a later trial's with several runners.
    let reason = if message.contains("start barrier timed out") {
        BarrierTimeout
    } else if message.contains(KUBE_DEADLINE_EXCEEDED) || kubelet_reason == KUBE_DEADLINE_EXCEEDED {
        RunFailureReason::DeadlineExceeded
    } else {
        RunnerFailed
    };
    (
        reason,
        format!("exit code {exit_code} ({kubelet_reason}): {tail}"),
    )
}

/// A log line cut to [`MAX_TAIL_LINE`] characters (a result frame is a line of kilobytes).
fn clip(line: &str) -> String {
    match line.char_indices().nth(MAX_TAIL_LINE) {
        Some((at, _)) => format!("{}…", &line[..at]),
        None => line.to_string(),
    }
}

const MAX_TAIL_LINE: usize = 240;

#[cfg(test)]
mod tests {
    use super::{classify, KUBE_DEADLINE_EXCEEDED};
    use msgbench_crds::RunFailureReason::{self, BarrierTimeout, RunnerFailed, TargetUnreachable};
    use runner_api::termination::{RunnerGaveUp, Termination};

    #[test]
    fn structured_messages_give_their_reason() {
        let msg = Termination::new(RunnerGaveUp::TargetUnreachable, "trial 1: subscriber 0: target ws://pss.ns.svc:8080/ws unreachable: 12 connect attempt(s) over 30.0s failed (connectTimeoutSeconds 30); last error: Connection refused").to_json();
        let (reason, text) = classify(2, "Error", &msg);
        assert_eq!(reason, TargetUnreachable);
        assert!(
            text.starts_with("exit code 2: trial 1: subscriber 0: target ws://pss"),
            "{text}"
        );
        let msg = Termination::new(
            RunnerGaveUp::BarrierTimeout,
            "start barrier timed out (trial 1)",
        )
        .to_json();
        let (reason, _) = classify(2, "Error", &msg);
        assert_eq!(reason, BarrierTimeout);
        // A reason the operator does not know is a generic failure, its message kept.
        let (reason, text) = classify(2, "Error", r#"{"reason":"Novel","message":"m"}"#);
        assert_eq!((reason, text.as_str()), (RunnerFailed, "exit code 2: m"));
    }

    #[test]
    fn plain_log_tails_fall_back_to_phrases() {
        let (reason, text) = classify(
            2,
            "Error",
            "line 1\nline 2\nbench-runner: trial 1: start barrier timed out (trial 1)",
        );
        assert_eq!(reason, BarrierTimeout);
        assert!(
            text.starts_with("exit code 2 (Error): line 1 | line 2 | bench-runner"),
            "{text}"
        );
        assert_eq!(
            classify(137, KUBE_DEADLINE_EXCEEDED, "").0,
            RunFailureReason::DeadlineExceeded
        );
        let (reason, text) = classify(2, "Error", "a\nb\nc\nd: connect to nats://x: refused");
        assert_eq!(reason, RunnerFailed);
        assert_eq!(
            text,
            "exit code 2 (Error): b | c | d: connect to nats://x: refused"
        );
        // A frame-sized log line is cut; an OOM kill says which limit, not what was printed.
        let long = format!("short\n{}", "é".repeat(5000));
        let (_, text) = classify(1, "Error", &long);
        assert!(text.chars().count() < 300 && text.ends_with('…'), "{text}");
        let (reason, text) = classify(137, "OOMKilled", &"{\"frame\":1}".repeat(400));
        assert_eq!(reason, RunnerFailed);
        assert!(
            text.contains("spec.runners.resources.limits.memory") && !text.contains("frame"),
            "{text}"
        );
        // Malformed JSON is log text, not a structured message.
        assert_eq!(classify(1, "Error", "{\"reason\":").0, RunnerFailed);
    }
}
