//! What kstatus itself (sigs.k8s.io/cli-utils, in `e2e/kstatusprobe`) computes for an object:
//! the status Flux's `wait`, kpt and cli-utils' tooling act on.
use crate::cluster::ensure_tool;
use anyhow::{bail, Context, Result};
use kube::api::DynamicObject;
use serde::Deserialize;
use std::io::Write;
use std::process::{Command, Stdio};

/// kstatus' verdict on one object (see `e2e/kstatusprobe/main.go`).
#[derive(Clone, Debug, Deserialize, PartialEq, Eq)]
pub struct Computed {
    /// `InProgress`, `Current`, `Failed`, `Terminating`, `NotFound` or `Unknown`.
    pub status: String,
    pub message: String,
}

/// Runs the probe on `obj` as the API server returned it (apiVersion and kind included).
pub fn compute(obj: &DynamicObject) -> Result<Computed> {
    let probe = ensure_tool("kstatusprobe")?;
    let json = serde_json::to_vec(obj).context("serialising the object")?;
    let mut child = Command::new(&probe)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .with_context(|| format!("starting {}", probe.display()))?;
    child
        .stdin
        .take()
        .context("the probe's stdin")?
        .write_all(&json)?;
    let out = child.wait_with_output()?;
    if !out.status.success() {
        bail!(
            "kstatusprobe failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
    }
    serde_json::from_slice(&out.stdout).with_context(|| {
        format!(
            "kstatusprobe's report: {}",
            String::from_utf8_lossy(&out.stdout)
        )
    })
}
