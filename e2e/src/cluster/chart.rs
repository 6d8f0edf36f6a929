//! Installs the msgbench chart once per test process with `helm upgrade --install --wait`.
use crate::cluster::{contract, kubeconfig_path, repo_root};
use anyhow::{bail, Context, Result};
use std::process::Command;
use std::sync::OnceLock;

pub const RELEASE: &str = contract::CHART_RELEASE;
pub const NAMESPACE: &str = contract::CHART_NAMESPACE;
/// Label selector of the operator pod(s) the chart creates.
/// The operator Deployment the chart creates for release "msgbench".
pub const OPERATOR_DEPLOYMENT: &str = contract::OPERATOR_DEPLOYMENT;
pub const OPERATOR_SELECTOR: &str =
    "app.kubernetes.io/instance=msgbench,app.kubernetes.io/component=operator";

static INSTALLED: OnceLock<Result<(), String>> = OnceLock::new();

/// Install or upgrade the release (idempotent); later calls in the same process reuse the outcome.
/// Set `MSGBENCH_E2E_SKIP_INSTALL=1` to test an operator that is already installed, and
/// `MSGBENCH_E2E_OPERATOR_TAG=<tag>` to install another tag of the operator image.
pub fn ensure_installed() -> Result<()> {
    let outcome = INSTALLED.get_or_init(|| install().map_err(|e| format!("{e:#}")));
    match outcome {
        Ok(()) => Ok(()),
        Err(e) => bail!("installing the chart (once per test process) failed: {e}"),
    }
}

fn install() -> Result<()> {
    if std::env::var("MSGBENCH_E2E_SKIP_INSTALL").is_ok_and(|v| v == "1") {
        return Ok(());
    }
    let root = repo_root();
    let chart = root.join("charts/msgbench");
    crate::cluster::ensure_tool("helm")?;
    let helm = helm_binary();
    recover_interrupted_release(&helm)?;
    let mut cmd = Command::new(&helm);
    // A locally built operator image under another tag (e.g. a debug build) can be tested as is.
    if let Ok(tag) = std::env::var("MSGBENCH_E2E_OPERATOR_TAG") {
        cmd.arg("--set").arg(format!("images.operator.tag={tag}"));
    }
    // A rebuilt operator keeps its tag: the image's digest in the pod template makes helm roll
    // the operator whenever the image content changed (local cluster: containerd's record).
    if let Some(digest) = local_operator_digest() {
        cmd.arg("--set-string").arg(format!(
            "podAnnotations.msgbench\\.dev/image-digest={digest}"
        ));
    }
    let output = cmd
        .arg("upgrade")
        .arg("--install")
        .arg(RELEASE)
        .arg(&chart)
        .args(["--namespace", NAMESPACE, "--create-namespace"])
        .arg("--values")
        .arg(root.join(contract::CHART_E2E_VALUES))
        .args(["--wait", "--timeout", "180s"])
        .arg("--kubeconfig")
        .arg(kubeconfig_path())
        .output()
        .with_context(|| format!("running {helm} (install it with `e2e/tools/ensure helm`)"))?;
    if !output.status.success() {
        bail!(
            "helm upgrade --install failed ({}):\n{}{}",
            output.status,
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
    }
    Ok(())
}

/// A helm run killed mid-upgrade (a test run stopped by hand, a CI job timed out) leaves the
/// release `pending-*`, and every later upgrade fails with "another operation is in progress":
/// roll back to the last deployed revision first.
fn recover_interrupted_release(helm: &str) -> Result<()> {
    let status = Command::new(helm)
        .args(["status", RELEASE, "--namespace", NAMESPACE, "-o", "json"])
        .arg("--kubeconfig")
        .arg(kubeconfig_path())
        .output()
        .context("helm status")?;
    let Ok(v) = serde_json::from_slice::<serde_json::Value>(&status.stdout) else {
        return Ok(()); // no release yet
    };
    let state = v["info"]["status"].as_str().unwrap_or_default();
    if !state.starts_with("pending-") {
        return Ok(());
    }
    eprintln!("helm release {RELEASE} is {state} (an interrupted run): rolling back");
    let out = Command::new(helm)
        .args(["rollback", RELEASE, "--namespace", NAMESPACE, "--wait"])
        .arg("--kubeconfig")
        .arg(kubeconfig_path())
        .output()
        .context("helm rollback")?;
    if !out.status.success() {
        bail!(
            "helm rollback of the {state} release failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    Ok(())
}

/// helm from the project's tool cache, else from PATH.
fn helm_binary() -> String {
    let cached = contract::tools_bin().join("helm");
    if cached.exists() {
        cached.display().to_string()
    } else {
        "helm".into()
    }
}

/// Digest of the operator image in the local cluster's containerd, if `ctr` can tell.
fn local_operator_digest() -> Option<String> {
    let out = Command::new("ctr")
        .args(["-n", "k8s.io", "images", "ls"])
        .output()
        .ok()?;
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| l.split_whitespace().collect::<Vec<_>>())
        .find(|f| f.first() == Some(&contract::OPERATOR_IMAGE))
        .and_then(|f| {
            f.get(2)
                .map(|d| d.trim_start_matches("sha256:").to_string())
        })
}
