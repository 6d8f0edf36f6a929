//! Installs the msgbench chart with `helm upgrade --install --wait` before a test runs.
//!
//! Under nextest (`make e2e`: one process per test, several at once) the tests of one run share
//! one install, made by whichever test comes first, under a lock file every process of the run
//! takes; a test of the `whole-cluster` group (.config/nextest.toml) always installs afresh and
//! leaves the next shared test to install again: those tests change the install (other values,
//! replicas, a release from a registry). Under plain `cargo test`, once per test module in the
//! process, as when each module was a binary of its own.
use crate::cluster::flavour::Flavour;
use crate::cluster::{exported, kubeconfig_path, repo_root};
use anyhow::{bail, Context, Result};
use std::collections::BTreeMap;
use std::fs::{self, File};
use std::process::Command;
use std::sync::Mutex;

/// The release, its namespace and the operator Deployment it creates.
pub use super::exported::{
    chart_namespace as namespace, chart_release as release, operator_deployment,
};
/// Label selector of the operator pod(s) the chart creates.
pub const OPERATOR_SELECTOR: &str =
    "app.kubernetes.io/instance=msgbench,app.kubernetes.io/component=operator";

/// The install's outcome per test module. Held while installing: two modules never run helm at once.
static INSTALLED: Mutex<BTreeMap<String, Result<(), String>>> = Mutex::new(BTreeMap::new());

/// nextest's test group of the tests that need the cluster to themselves.
pub const WHOLE_CLUSTER_GROUP: &str = "whole-cluster";

/// Install or upgrade the release (idempotent) for the tests of `module`; its later tests reuse
/// the outcome. Set `MSGBENCH_E2E_SKIP_INSTALL=1` to test an operator that is already installed,
/// and `MSGBENCH_E2E_OPERATOR_TAG=<tag>` to install another tag of the operator image.
pub fn ensure_installed(module: &str) -> Result<()> {
    if let Ok(run_id) = std::env::var("NEXTEST_RUN_ID") {
        let group = std::env::var("NEXTEST_TEST_GROUP").unwrap_or_default();
        return install_for_run(module, &run_id, group == WHOLE_CLUSTER_GROUP);
    }
    let mut installed = INSTALLED.lock().unwrap_or_else(|e| e.into_inner());
    let outcome = (installed.entry(module.to_string()))
        .or_insert_with(|| install(module).map_err(|e| format!("{e:#}")));
    match outcome {
        Ok(()) => Ok(()),
        Err(e) => bail!("installing the chart (once per test module, {module:?}) failed: {e}"),
    }
}

/// One install per nextest run (`run_id`), shared by its processes through a marker file written
/// under a lock; `fresh` (a whole-cluster test, the only ones with values of their own): install
/// whatever the marker says, and clear it.
fn install_for_run(module: &str, run_id: &str, fresh: bool) -> Result<()> {
    let dir = exported::cache_dir();
    fs::create_dir_all(&dir)?;
    let lock = File::create(dir.join("e2e-chart.lock"))?;
    lock.lock().context("locking e2e-chart.lock")?; // released when `lock` drops
    let marker = dir.join("e2e-chart.installed");
    if !fresh && fs::read_to_string(&marker).is_ok_and(|m| m == run_id) {
        return Ok(());
    }
    // Cleared first: a failed install must not be taken for a good one.
    let _ = fs::remove_file(&marker);
    install(module).with_context(|| format!("installing the chart for {module}"))?;
    if !fresh {
        fs::write(&marker, run_id)?;
    }
    Ok(())
}

/// The module of the running test: libtest runs each test on a thread named after it
/// (`faults::leader_kills_…`). Empty outside a test thread: one install for the process.
pub fn test_module() -> String {
    let thread = std::thread::current();
    module_of(thread.name().unwrap_or_default()).to_string()
}

fn module_of(test: &str) -> &str {
    test.rsplit_once("::").map_or("", |(module, _)| module)
}

/// Values a module installs on top of the e2e values (its tests must be in the whole-cluster
/// group: `lanes` checks); the next test's install puts the e2e values back.
pub(crate) const MODULE_VALUES: &[(&str, &[&str])] = &[
    // The install a cautious cluster admin makes: no fault agents at all.
    (
        "faults_disabled",
        &[
            "faults.enabled=false",
            "faults.network=false",
            "faults.powerLoss=false",
        ],
    ),
    // Half the suite's memory limit: half the history (and time) proves the same bound.
    ("finished_runs", &["resources.limits.memory=64Mi"]),
];

fn module_values(module: &str) -> &'static [&'static str] {
    MODULE_VALUES
        .iter()
        .find(|(m, _)| *m == module)
        .map_or(&[], |(_, values)| values)
}

fn install(module: &str) -> Result<()> {
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
    // the operator whenever the image content changed (the first node's containerd record).
    if let Some(digest) = local_operator_digest() {
        cmd.arg("--set-string").arg(format!(
            "podAnnotations.msgbench\\.dev/image-digest={digest}"
        ));
    }
    if let Some(values) = kind_fence_values() {
        cmd.arg("--set-json").arg(values);
    }
    for v in module_values(module) {
        cmd.arg("--set").arg(v);
    }
    let output = cmd
        .arg("upgrade")
        .arg("--install")
        .arg(release())
        .arg(&chart)
        .args(["--namespace", namespace(), "--create-namespace"])
        .arg("--values")
        .arg(root.join(exported::chart_e2e_values()))
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

/// kind: the servers' fences also admit kind's node network, where the suite's host-side
/// clients (natsprobe, through the engine's network namespace) and the API server's pod proxy
/// (`probe::pod_get` on a server on another node) come from; pods stay fenced (another pod
/// CIDR). The local cluster enforces no NetworkPolicy: nothing to add. None when the network
/// cannot be read (the fence then holds those clients out too, and says so).
fn kind_fence_values() -> Option<String> {
    if Flavour::current() != Flavour::Kind {
        return None;
    }
    let format = "{{range .IPAM.Config}}{{.Subnet}} {{end}}";
    let out =
        crate::cluster::kind_engine::docker(&["network", "inspect", "kind", "--format", format])
            .output()
            .ok()?;
    let text = String::from_utf8_lossy(&out.stdout);
    let Some(cidr) = text.split_whitespace().find(|c| c.contains('.')) else {
        eprintln!(
            "warning: kind's node network not found; host-side probes meet the servers' fences"
        );
        return None;
    };
    let peer = serde_json::json!([{"ipBlock": {"cidr": cidr}}]);
    Some(format!(
        "serverPods.networkPolicy={}",
        serde_json::json!({"clientsFrom": peer, "monitoringFrom": peer})
    ))
}

/// A helm run killed mid-upgrade (a test run stopped by hand, a CI job timed out) leaves the
/// release `pending-*`, and every later upgrade fails with "another operation is in progress":
/// roll back to the last deployed revision first.
fn recover_interrupted_release(helm: &str) -> Result<()> {
    let status = Command::new(helm)
        .args([
            "status",
            release(),
            "--namespace",
            namespace(),
            "-o",
            "json",
        ])
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
    eprintln!(
        "helm release {} is {state} (an interrupted run): rolling back",
        release()
    );
    let out = Command::new(helm)
        .args(["rollback", release(), "--namespace", namespace(), "--wait"])
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
    let cached = exported::tools_bin().join("helm");
    if cached.exists() {
        cached.display().to_string()
    } else {
        "helm".into()
    }
}

/// Digest of the operator image in the cluster's first node's containerd, if `ctr` can tell
/// (local: the host's; kind: the control-plane container's, through the kind engine).
fn local_operator_digest() -> Option<String> {
    let out = Flavour::current().list_images(false).output().ok()?;
    image_digest(
        &String::from_utf8_lossy(&out.stdout),
        exported::operator_image(),
    )
}

/// The DIGEST column (without `sha256:`) of `image`'s row in `ctr images ls` output.
fn image_digest(listing: &str, image: &str) -> Option<String> {
    listing
        .lines()
        .map(|l| l.split_whitespace().collect::<Vec<_>>())
        .find(|f| f.first() == Some(&image))
        .and_then(|f| {
            f.get(2)
                .map(|d| d.trim_start_matches("sha256:").to_string())
        })
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_test_thread_names_its_module() {
        assert_eq!(
            super::module_of("faults::leader_kills_are_recorded"),
            "faults"
        );
        assert_eq!(super::module_of("a::b::t"), "a::b");
        assert_eq!(super::module_of("main"), "");
        assert_eq!(super::test_module(), "cluster::chart::tests");
    }

    #[test]
    fn the_operator_digest_is_read_from_its_ctr_row() {
        let listing = "\
REF                                  TYPE                                                 DIGEST                                                                  SIZE     PLATFORMS   LABELS
ghcr.io/msgbench/operator:0.1.0-dbg  application/vnd.docker.distribution.manifest.v2+json sha256:1111 9.0 MiB linux/amd64 io.cri-containerd.image=managed
ghcr.io/msgbench/operator:0.1.0      application/vnd.docker.distribution.manifest.v2+json sha256:2222 9.1 MiB linux/amd64 io.cri-containerd.image=managed
";
        let digest = |image| super::image_digest(listing, image);
        assert_eq!(
            digest("ghcr.io/msgbench/operator:0.1.0").as_deref(),
            Some("2222")
        );
        assert_eq!(digest("ghcr.io/msgbench/toolbox:0.1.0"), None);
        assert_eq!(super::image_digest("", "x"), None);
    }
}
