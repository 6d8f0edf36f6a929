//! The install path of a cluster msgbench did not build: a real OCI registry on this machine
//! (`e2e/registry/up`: the CNCF distribution registry, htpasswd, TLS from a throwaway CA that the
//! node's containerd trusts), and the README's install blocks run exactly as they stand. Local
//! cluster only: kind's nodes cannot reach it ([`unreachable_from_nodes`] says why).
use crate::cluster::flavour::Flavour;
use crate::cluster::{command, kubeconfig_path, repo_root};
use anyhow::{bail, ensure, Context, Result};
use std::collections::BTreeMap;
use std::process::Command;

/// Address and credentials of the test registry, as `e2e/registry/env` prints them.
#[derive(Clone, Debug)]
pub struct Registry {
    /// `127.0.0.1:PORT`.
    pub host: String,
    /// Pushes.
    pub user: String,
    pub password: String,
    /// What the cluster's pull Secrets hold (a credential of its own).
    pub pull_user: String,
    pub pull_password: String,
    /// System CAs plus the registry's throwaway CA (helm, skopeo and kubectl are Go programs:
    /// they honour SSL_CERT_FILE).
    pub ca_bundle: String,
}

/// Starts the registry (idempotent) and reads its address and credentials.
pub fn up() -> Result<Registry> {
    let root = repo_root();
    let status = Command::new(root.join("e2e/registry/up"))
        .status()
        .context("running e2e/registry/up")?;
    ensure!(status.success(), "e2e/registry/up failed ({status})");
    let out = Command::new(root.join("e2e/registry/env"))
        .output()
        .context("running e2e/registry/env")?;
    ensure!(out.status.success(), "e2e/registry/env failed");
    let vars = parse_exports(&String::from_utf8_lossy(&out.stdout));
    let get = |k: &str| {
        vars.get(k)
            .cloned()
            .with_context(|| format!("e2e/registry/env printed no {k}"))
    };
    Ok(Registry {
        host: get("REGISTRY_HOST")?,
        user: get("REGISTRY_USER")?,
        password: get("REGISTRY_PASSWORD")?,
        pull_user: get("PULL_USER")?,
        pull_password: get("PULL_PASSWORD")?,
        ca_bundle: get("SSL_CERT_FILE")?,
    })
}

/// `export NAME=value` lines (values as bash's `printf %q` writes plain words).
fn parse_exports(text: &str) -> BTreeMap<String, String> {
    text.lines()
        .filter_map(|l| l.strip_prefix("export "))
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.to_string(), v.trim_matches('\'').replace("\\", "")))
        .collect()
}

/// The ```sh block that follows the README line starting with `<!-- {marker}`.
pub fn readme_block(marker: &str) -> Result<String> {
    let readme = std::fs::read_to_string(repo_root().join("README.md"))?;
    let start = readme
        .find(&format!("<!-- {marker}"))
        .with_context(|| format!("README.md has no <!-- {marker} --> block"))?;
    let rest = &readme[start..];
    let open = rest.find("```sh\n").context("no ```sh after the marker")? + 6;
    let len = rest[open..].find("\n```").context("unclosed block")?;
    Ok(rest[open..open + len + 1].to_string())
}

/// Runs a README block with bash from the repository root, as a user would after setting the
/// README's variables; returns its standard output. Fails with everything it printed.
pub fn run_block(marker: &str, env: &BTreeMap<String, String>) -> Result<String> {
    let block = readme_block(marker)?;
    eprintln!("--- README block {marker}:\n{block}---");
    // The block runs `make push`, which runs cargo.
    let out = command::without_cargo_test_vars(&mut Command::new("bash"))
        .args(["-euo", "pipefail", "-c", &block])
        .current_dir(repo_root())
        .envs(env)
        .output()
        .with_context(|| format!("running README block {marker}"))?;
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    if !out.status.success() {
        bail!(
            "README block {marker} failed ({}):\n{stdout}{}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
    }
    eprint!("{}", String::from_utf8_lossy(&out.stderr));
    Ok(stdout)
}

/// The environment the README's blocks expect: its variables, the kubeconfig, and the
/// project's tools (helm, kubectl, the plugin) on PATH.
pub fn block_env(reg: &Registry, registry: &str, bench_ns: &str) -> BTreeMap<String, String> {
    let plugin_dir = plugin_dir();
    let path = format!(
        "{}:{}:{}",
        plugin_dir,
        crate::cluster::exported::tools_bin().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    BTreeMap::from([
        ("REGISTRY".into(), registry.into()),
        ("REGISTRY_USER".into(), reg.user.clone()),
        ("REGISTRY_PASSWORD".into(), reg.password.clone()),
        ("PULL_USER".into(), reg.pull_user.clone()),
        ("PULL_PASSWORD".into(), reg.pull_password.clone()),
        ("BENCH_NS".into(), bench_ns.into()),
        ("SSL_CERT_FILE".into(), reg.ca_bundle.clone()),
        ("KUBECONFIG".into(), kubeconfig_path().display().to_string()),
        ("PATH".into(), path),
    ])
}

/// Where `cargo build -p kubectl-msgbench` puts the plugin (the README installs it with
/// `cargo install --path cli`; the test builds it in place instead of installing).
fn plugin_dir() -> String {
    let target = std::env::var("CARGO_TARGET_DIR")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|_| repo_root().join("target"));
    target.join("debug").display().to_string()
}

/// The plugin binary [`build_plugin`] builds.
pub fn plugin_binary() -> std::path::PathBuf {
    std::path::Path::new(&plugin_dir()).join("kubectl-msgbench")
}

/// Builds the kubectl plugin (debug, into the workspace's target dir).
pub fn build_plugin() -> Result<()> {
    let status = command::without_cargo_test_vars(&mut Command::new("cargo"))
        .args(["build", "-q", "-p", "kubectl-msgbench"])
        .current_dir(repo_root())
        .status()
        .context("cargo build -p kubectl-msgbench")?;
    ensure!(status.success(), "cargo build -p kubectl-msgbench failed");
    Ok(())
}

/// `reference@sha256:…` lines (what `make push` prints per image), by reference.
pub fn pushed_digests(stdout: &str) -> BTreeMap<String, String> {
    stdout
        .lines()
        .filter_map(|l| l.trim().split_once("@sha256:"))
        .map(|(r, d)| (r.to_string(), format!("sha256:{d}")))
        .collect()
}

/// Every image reference the cluster's first node's containerd holds (`ctr images ls -q`).
pub fn node_images() -> Result<Vec<String>> {
    let listing = command::stdout_of(Flavour::current().list_images(true))?;
    Ok(listing.lines().map(str::to_string).collect())
}

/// Why this cluster's nodes cannot pull from the test registry, if they cannot.
pub fn unreachable_from_nodes() -> Option<&'static str> {
    Flavour::current().registry_unreachable()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exports_and_digests_parse() {
        let v = parse_exports("export REGISTRY_HOST=127.0.0.1:5443\nexport A=b\\ c\n");
        assert_eq!(v["REGISTRY_HOST"], "127.0.0.1:5443");
        assert_eq!(v["A"], "b c");
        let d = pushed_digests("noise\n127.0.0.1:5443/x/msgbench/operator:0.1.0@sha256:ab12\n");
        assert_eq!(d["127.0.0.1:5443/x/msgbench/operator:0.1.0"], "sha256:ab12");
    }

    #[test]
    fn every_readme_install_block_is_there() {
        for m in [
            "e2e:registry-push",
            "e2e:registry-install",
            "e2e:registry-first-run",
        ] {
            let b = readme_block(m).unwrap();
            assert!(
                b.contains("$REGISTRY") || b.contains("$BENCH_NS"),
                "{m}: {b}"
            );
        }
    }
}
