//! `bench-runner delete-streams`: deletes the JetStream streams of one BenchmarkRun. Every trial
//! creates a stream of its own (`RunIsolation::stream`) and deletes it when it ends, but a
//! runner killed mid-trial (its run deleted, its pod evicted) leaves the stream behind, holding
//! the server's storage. The operator runs this as a short Job to sweep them, found by the run's
//! uid prefix ([`runner_api::agent::is_stream_of_run`]). A delete that fails is reported and
//! exits 1: the Job's retry lists again and deletes what is left.
use crate::connect::ConnectWindow;
use crate::drivers::nats::connect;
use crate::termination;
use crate::tls::{TlsClient, TlsFiles};
use async_nats::jetstream::{self, context::DeleteStreamErrorKind, ErrorCode};
use futures::TryStreamExt;
use runner_api::agent::{is_run_prefix, is_stream_of_run};
use runner_api::target::{Credentials, TargetUrl};
use runner_api::termination::{RunnerGaveUp, Termination};
use std::path::Path;

/// What one sweep did, in stream name order.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Sweep {
    /// The run prefix swept (8 hex digits, lowercase).
    pub run: String,
    pub deleted: Vec<String>,
    /// `(stream, error)` of every delete that failed.
    pub failed: Vec<(String, String)>,
}

impl Sweep {
    /// The one stdout line: `{"run":…,"deleted":[…],"failed":[{"stream":…,"error":…}]}`.
    pub fn json_line(&self) -> String {
        // By hand, so the keys stay in this order whatever serde_json features are on.
        let quoted = |s: &str| serde_json::Value::from(s).to_string();
        let deleted: Vec<String> = self.deleted.iter().map(|d| quoted(d)).collect();
        let failed: Vec<String> = self
            .failed
            .iter()
            .map(|(stream, error)| {
                format!(
                    r#"{{"stream":{},"error":{}}}"#,
                    quoted(stream),
                    quoted(error)
                )
            })
            .collect();
        format!(
            r#"{{"run":{},"deleted":[{}],"failed":[{}]}}"#,
            quoted(&self.run),
            deleted.join(","),
            failed.join(",")
        )
    }

    /// 0 when nothing failed (also when there was nothing to delete), else 1.
    pub fn exit_code(&self) -> u8 {
        u8::from(!self.failed.is_empty())
    }

    /// A line for people: `deleted 3 streams of run abcdef12`, and the first failure if any.
    pub fn summary(&self) -> String {
        let n = self.deleted.len();
        let mut s = format!(
            "deleted {n} stream{} of run {}",
            if n == 1 { "" } else { "s" },
            self.run
        );
        if let Some((stream, error)) = self.failed.first() {
            s += &format!("; {} failed, first {stream}: {error}", self.failed.len());
        }
        s
    }

    /// The termination message: the summary as plain text when nothing failed (no failure
    /// reason applies), a `RunnerFailed` message when something did.
    pub fn write_termination(&self, path: &Path) {
        if self.failed.is_empty() {
            termination::write_note(&self.summary(), path);
        } else {
            let t = Termination::new(RunnerGaveUp::RunnerFailed, &self.summary());
            termination::write(&t, path);
        }
    }
}

/// `--run`: 8 hex digits (a run uid's prefix), lowercased.
pub fn parse_run(s: &str) -> Result<String, String> {
    if is_run_prefix(s) {
        Ok(s.to_ascii_lowercase())
    } else {
        Err(format!(
            "{s:?}: not a run prefix (the first 8 hex digits of the BenchmarkRun's uid)"
        ))
    }
}

/// The NATS server to sweep: `nats://` or `tls://` only, with the run's credentials and TLS
/// files (as a run's own connections use them).
pub fn target(url: &str, auth: Option<Credentials>, tls: &TlsFiles) -> anyhow::Result<TargetUrl> {
    let mut t = TargetUrl::parse(url).map_err(|e| anyhow::anyhow!("--url {e}"))?;
    if t.scheme != "nats" && t.scheme != "tls" {
        anyhow::bail!("--url {url}: JetStream streams are on a nats:// or tls:// server");
    }
    t.auth = auth;
    tls.apply(&mut t);
    Ok(t)
}

/// Lists every stream on `target` (retrying a server that is not reachable yet, within
/// `window`) and deletes those of `run`.
pub async fn sweep(target: &TargetUrl, run: &str, window: &ConnectWindow) -> anyhow::Result<Sweep> {
    let (js, names) = window.retry(|| list(target)).await?;
    let mut s = Sweep {
        run: run.to_string(),
        ..Sweep::default()
    };
    for name in names.into_iter().filter(|n| is_stream_of_run(n, run)) {
        match delete_stream(&js, &name).await {
            Ok(()) => {
                tracing::info!(stream = %name, "deleted");
                s.deleted.push(name);
            }
            Err(e) => {
                tracing::warn!(stream = %name, error = %e, "not deleted");
                s.failed.push((name, e));
            }
        }
    }
    Ok(s)
}

/// A JetStream context on `target` and every stream name there (the listing pages), sorted.
async fn list(target: &TargetUrl) -> anyhow::Result<(jetstream::Context, Vec<String>)> {
    let tls = TlsClient::for_target(target)?;
    let js = jetstream::new(connect(target, &tls, "msgbench-stream-sweep".into(), None).await?);
    let mut names: Vec<String> = js
        .stream_names()
        .try_collect()
        .await
        .map_err(|e| anyhow::anyhow!("listing streams on {}: {e}", target.raw))?;
    names.sort();
    Ok((js, names))
}

/// Deletes one stream; one already gone (deleted meanwhile) counts as deleted.
pub async fn delete_stream(js: &jetstream::Context, name: &str) -> Result<(), String> {
    match js.delete_stream(name).await {
        Ok(status) if status.success => Ok(()),
        Ok(_) => Err("the server answered success: false".into()),
        Err(e) => match e.kind() {
            DeleteStreamErrorKind::JetStream(j)
                if j.error_code() == ErrorCode::STREAM_NOT_FOUND =>
            {
                Ok(())
            }
            _ => Err(e.to_string()),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_json_line_and_summary_say_what_was_done() {
        let mut s = Sweep {
            run: "abcdef12".into(),
            deleted: vec!["A_ABCDEF12G1_T1".into()],
            failed: vec![],
        };
        assert_eq!(
            s.json_line(),
            r#"{"run":"abcdef12","deleted":["A_ABCDEF12G1_T1"],"failed":[]}"#
        );
        assert_eq!(s.summary(), "deleted 1 stream of run abcdef12");
        assert_eq!(s.exit_code(), 0);
        s.failed
            .push(("B_ABCDEF12G1_T2".into(), "boom \"x\"".into()));
        assert_eq!(
            s.json_line(),
            r#"{"run":"abcdef12","deleted":["A_ABCDEF12G1_T1"],"failed":[{"stream":"B_ABCDEF12G1_T2","error":"boom \"x\""}]}"#
        );
        let v: serde_json::Value = serde_json::from_str(&s.json_line()).unwrap();
        assert_eq!(v["failed"][0]["error"], "boom \"x\"");
        assert_eq!(s.exit_code(), 1);
        assert_eq!(
            s.summary(),
            "deleted 1 stream of run abcdef12; 1 failed, first B_ABCDEF12G1_T2: boom \"x\""
        );
    }

    #[test]
    fn run_and_url_are_checked() {
        assert_eq!(parse_run("ABCDEF12").unwrap(), "abcdef12");
        for bad in ["abcdef1", "abcdef123", "abcdefgh", ""] {
            assert!(parse_run(bad).is_err(), "{bad:?}");
        }
        let none = TlsFiles::default();
        assert!(target("nats://h:4222", None, &none).is_ok());
        let tls = TlsFiles {
            ca_file: Some("/ca.crt".into()),
            server_name: Some("js.example".into()),
            ..TlsFiles::default()
        };
        let t = target("tls://h:4222", None, &tls).unwrap();
        assert_eq!(t.ca_file.as_deref(), Some(std::path::Path::new("/ca.crt")));
        assert_eq!(t.tls_name(), "js.example");
        let e = target("mqtt://h:1883", None, &none)
            .unwrap_err()
            .to_string();
        assert!(e.contains("mqtt://h:1883"), "{e}");
    }
}
