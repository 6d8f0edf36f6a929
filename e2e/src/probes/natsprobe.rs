//! The fault tests' independent client (`e2e/natsprobe`: nats.go, not async-nats and not
//! msgbench's code), run on this host against the servers' pod IPs, where the cluster routes
//! them ([`Flavour::reaching_pods`]: kind's only in its engine's network namespace). It
//! publishes into a run's own stream on a subject of its own and reads its messages back, so
//! a fault on that stream's leader is the same fault for it as for the run.
use crate::cluster::ensure_tool;
use crate::cluster::flavour::Flavour;
use anyhow::{bail, Context, Result};
use serde::Deserialize;
use std::process::Stdio;

/// What the probe saw (see `e2e/natsprobe/main.go`).
#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ProbeReport {
    pub stream: String,
    pub published: u64,
    pub acked: u64,
    pub failed: u64,
    /// Delivered to its live consumer.
    pub received: u64,
    /// Found in the stream when read back after the run (what `lost_acked` is judged on).
    pub kept: u64,
    pub lost_acked: u64,
    pub longest_stall_ms: f64,
    pub per_second: Vec<u64>,
    pub longest_delivery_gap_ms: f64,
    /// The stream was gone when read back (nothing kept).
    #[serde(default)]
    pub stream_gone: bool,
}

/// A probe running against `servers` (nats:// URLs), waiting for the stream `prefix…`, then
/// publishing `seconds` at 200 msg/s and draining 3 s.
pub struct Probe(tokio::process::Child);

impl Probe {
    pub fn start(servers: &[String], prefix: &str, seconds: u32) -> Result<Probe> {
        let probe = ensure_tool("natsprobe")?;
        let child = tokio::process::Command::from(Flavour::current().reaching_pods(probe))
            .args(["--servers", &servers.join(",")])
            .args(["--stream-prefix", prefix])
            .args(["--seconds", &seconds.to_string()])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .context("starting natsprobe")?;
        Ok(Probe(child))
    }

    /// Its report, once it is done.
    pub async fn report(self) -> Result<ProbeReport> {
        let out = self.0.wait_with_output().await?;
        let stderr = String::from_utf8_lossy(&out.stderr);
        if !out.status.success() {
            bail!("natsprobe failed ({}): {stderr}", out.status);
        }
        serde_json::from_slice(&out.stdout).with_context(|| {
            format!(
                "natsprobe's report: {}",
                String::from_utf8_lossy(&out.stdout)
            )
        })
    }
}
