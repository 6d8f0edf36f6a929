//! Connection to the cluster named by the project contract.
use super::exported;
use anyhow::{Context, Result};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Client, Config};
use std::path::PathBuf;

/// `$KUBECONFIG` when set (the Makefile exports the contract path), else the contract's
/// `${MSGBENCH_CACHE:-~/.cache/msgbench}/kubeconfig-${CLUSTER:-local}`.
pub fn kubeconfig_path() -> PathBuf {
    if let Some(p) = std::env::var_os("KUBECONFIG").filter(|p| !p.is_empty()) {
        return PathBuf::from(p);
    }
    exported::cluster_kubeconfig()
}

/// Runs `e2e/tools/ensure <name>` (idempotent and cached: a no-op when the tool is at its
/// pinned version) and returns where it puts the tool, `<cache>/bin/<name>`.
pub fn ensure_tool(name: &str) -> anyhow::Result<PathBuf> {
    use anyhow::Context;
    let st = std::process::Command::new(repo_root().join("e2e/tools/ensure"))
        .arg(name)
        .status()
        .with_context(|| format!("running e2e/tools/ensure {name}"))?;
    anyhow::ensure!(st.success(), "e2e/tools/ensure {name} failed ({st})");
    Ok(exported::tools_bin().join(name))
}

/// `${MSGBENCH_CACHE:-~/.cache/msgbench}`: the project's cache (cluster state, images, tools).
pub fn cache_dir() -> PathBuf {
    exported::cache_dir()
}

/// A client for the e2e cluster; fails with a hint when the cluster is not up.
pub async fn client() -> Result<Client> {
    let path = kubeconfig_path();
    let kubeconfig = Kubeconfig::read_from(&path).with_context(|| {
        format!(
            "reading kubeconfig {} (is the cluster up? run `make cluster-up`)",
            path.display()
        )
    })?;
    let config = Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
        .await
        .with_context(|| format!("loading kubeconfig {}", path.display()))?;
    Client::try_from(config).context("building kube client")
}

/// The repository root (the e2e crate lives in `<root>/e2e`).
pub fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("e2e crate has a parent directory")
        .to_path_buf()
}
