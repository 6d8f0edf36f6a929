//! The runner's side of the termination message ([`runner_api::termination`]): which reason an
//! error stands for, and writing it where Kubernetes picks it up.
use runner_api::termination::{RunnerGaveUp, Termination, MAX_MESSAGE_CHARS};
use std::path::Path;

/// Where Kubernetes expects the termination message (the container's terminationMessagePath).
pub const DEFAULT_PATH: &str = "/dev/termination-log";
/// Environment variable overriding [`DEFAULT_PATH`] (tests, other runtimes).
pub const PATH_ENV: &str = "MSGBENCH_TERMINATION_LOG";

/// The start barrier of a trial timed out (a structured error, so the reason survives context).
#[derive(Clone, Debug, PartialEq)]
pub struct BarrierTimedOut(pub String);

impl std::fmt::Display for BarrierTimedOut {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for BarrierTimedOut {}

/// The termination message of a runner error: a structured error anywhere in its chain
/// decides the reason.
pub fn of(e: &anyhow::Error) -> Termination {
    let reason = if e
        .chain()
        .any(|c| c.is::<crate::connect::TargetUnreachable>())
    {
        RunnerGaveUp::TargetUnreachable
    } else if e.chain().any(|c| c.is::<BarrierTimedOut>()) {
        RunnerGaveUp::BarrierTimeout
    } else {
        RunnerGaveUp::RunnerFailed
    };
    Termination::new(reason, &format!("{e:#}"))
}

/// Writes `t` to `path`. Best effort: outside a container the file may not be writable, and
/// the error is on stderr anyway.
pub fn write(t: &Termination, path: &Path) {
    write_text(&t.to_json(), path);
}

/// Writes the summary of a command that succeeded (e.g. `delete-streams`) to `path`, as plain
/// text: not a [`Termination`], so no failure reason is read into it. Best effort, like [`write`].
pub fn write_note(note: &str, path: &Path) {
    let note: String = note.chars().take(MAX_MESSAGE_CHARS).collect();
    write_text(&note, path);
}

fn write_text(text: &str, path: &Path) {
    if let Err(e) = std::fs::write(path, text) {
        tracing::debug!(path = %path.display(), error = %e, "no termination message written");
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
        let t = of(&u);
        assert_eq!(t.reason, RunnerGaveUp::TargetUnreachable);
        assert!(
            t.message
                .starts_with("trial 1: subscriber 0: target nats://js3.ns.svc:4222 unreachable"),
            "{}",
            t.message
        );
        let b = anyhow::Error::new(BarrierTimedOut("start barrier timed out (trial 1)".into()))
            .context("trial 1");
        assert_eq!(of(&b).reason, RunnerGaveUp::BarrierTimeout);
        assert_eq!(
            of(&anyhow::anyhow!("boom")).reason,
            RunnerGaveUp::RunnerFailed
        );
    }

    #[test]
    fn written_messages_parse_back() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("termination-log");
        let t = Termination::new(RunnerGaveUp::TargetUnreachable, &"x".repeat(5000));
        write(&t, &path);
        let back = Termination::parse(&std::fs::read_to_string(&path).unwrap()).unwrap();
        assert_eq!(back, t);
        // An unwritable path is ignored.
        write(&t, Path::new("/nonexistent-dir/termination-log"));
        let long = of(&anyhow::anyhow!("{}", "y".repeat(5000)));
        assert_eq!(long.message.chars().count(), MAX_MESSAGE_CHARS);
        // A success note is plain text, cut the same way, and never read as a failure.
        write_note(&"z".repeat(5000), &path);
        let note = std::fs::read_to_string(&path).unwrap();
        assert_eq!(note.chars().count(), MAX_MESSAGE_CHARS);
        assert_eq!(Termination::parse(&note), None);
    }
}
