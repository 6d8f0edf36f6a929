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
    let reason = if let Some(r) = crate::refusal::refusal_of(e) {
        r.reason()
    } else if e
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

/// The values of the credential variables in `vars` (`MSGBENCH…_TOKEN`, `_PASSWORD`,
/// `_NKEY_SEED`, `_PUSHER_SECRET`, and each line of `_CREDS` that is not decoration), to cut
/// from anything the runner prints when it gives up.
pub fn env_secrets(vars: impl IntoIterator<Item = (String, String)>) -> Vec<String> {
    const SECRET: &[&str] = &["_TOKEN", "_PASSWORD", "_NKEY_SEED", "_PUSHER_SECRET"];
    let mut out = Vec::new();
    for (k, v) in vars {
        if !k.starts_with("MSGBENCH") {
            continue;
        }
        if SECRET.iter().any(|s| k.ends_with(s)) {
            out.push(v);
        } else if k.ends_with("_CREDS") {
            let body = |l: &&str| l.len() >= 16 && !l.starts_with("---") && !l.starts_with('*');
            out.extend(v.lines().map(str::trim).filter(body).map(String::from));
        }
    }
    out
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
        use crate::refusal::TargetRefused;
        for (r, want) in [
            (
                TargetRefused::auth("nats://a:4222", "-ERR 'Authorization Violation'"),
                RunnerGaveUp::TargetAuthFailed,
            ),
            (
                TargetRefused::tls("tls://a:4222", "invalid peer certificate: UnknownIssuer"),
                RunnerGaveUp::TargetTLSFailed,
            ),
            (
                TargetRefused::protocol("mqtt://b:1883", "CONNACK return code 1"),
                RunnerGaveUp::TargetProtocolRefused,
            ),
        ] {
            let t = of(&anyhow::Error::new(r).context("trial 1"));
            assert_eq!(t.reason, want);
            assert!(t.message.starts_with("trial 1: "), "{}", t.message);
        }
    }

    #[test]
    fn secrets_come_from_the_credential_variables_only() {
        let vars = [
            ("MSGBENCH_TOKEN", "tok-123"),
            ("MSGBENCH_AUTH_0_PASSWORD", "pw-456"),
            ("MSGBENCH_USERNAME", "bench"),
            ("OTHER_TOKEN", "not-ours"),
            (
                "MSGBENCH_AUTH_1_CREDS",
                "-----BEGIN NATS USER JWT-----\neyJ0eXAiOiJKV1QifQ.e30.c2lnbmF0dXJl\n------END NATS USER JWT------\n\nSUAAAAAAAAAAAAAAAAAAAAAA\n",
            ),
        ]
        .map(|(k, v)| (k.to_string(), v.to_string()));
        let s = env_secrets(vars);
        assert_eq!(
            s,
            [
                "tok-123",
                "pw-456",
                "eyJ0eXAiOiJKV1QifQ.e30.c2lnbmF0dXJl",
                "SUAAAAAAAAAAAAAAAAAAAAAA"
            ]
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
