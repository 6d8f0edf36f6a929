//! `e2e/contract.env`: the paths, names, labels and images the cluster scripts and this harness
//! must agree on, written once. bash is its one evaluator: the scripts source it, the Makefile
//! exports what bash makes of it, and the harness has bash evaluate the same text (built in) once
//! per process, in this process's environment. So an exported `MSGBENCH_CACHE` or `CLUSTER`
//! overrides the file here exactly as in the scripts (an empty one counts as unset), and under
//! `make` the values are the ones it exported.
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::Command;
use std::sync::LazyLock;

const FILE: &str = "e2e/contract.env";
const TEXT: &str = include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/contract.env"));

/// Every key the harness reads (each has an accessor below; a unit test calls them all).
const KEYS: &[&str] = &[
    "MSGBENCH_CACHE",
    "CLUSTER",
    "CLUSTER_KUBECONFIG",
    "TOOLS_BIN",
    "STATIC_POD_DIR",
    "E2E_ARTIFACTS",
    "NODE_NAME",
    "ZONE_LABEL",
    "E2E_NAMESPACE_LABEL",
    "CHART_RELEASE",
    "CHART_NAMESPACE",
    "CHART_E2E_VALUES",
    "OPERATOR_DEPLOYMENT",
    "OPERATOR_IMAGE",
    "TOOLBOX_IMAGE",
    "PAUSE_IMAGE",
    "KIND_NETNS",
    "KIND_DOCKER_HOST",
];

type Values = BTreeMap<String, String>;

/// What bash made of the file in this process's environment, or why it could not.
static VALUES: LazyLock<Result<Values, String>> =
    LazyLock::new(|| evaluate(TEXT, &mut Command::new("bash")));

/// `${MSGBENCH_CACHE:-~/.cache/msgbench}`: the project's cache.
pub fn cache_dir() -> PathBuf {
    path("MSGBENCH_CACHE")
}

/// `local` (the default) or `kind`.
pub fn cluster() -> String {
    get("CLUSTER").to_string()
}

/// The kubeconfig `make cluster-up` writes: `<cache>/kubeconfig-<cluster>`.
pub fn cluster_kubeconfig() -> PathBuf {
    path("CLUSTER_KUBECONFIG")
}

/// Where `e2e/tools/ensure` installs tools.
pub fn tools_bin() -> PathBuf {
    path("TOOLS_BIN")
}

/// The local cluster's kubelet's static pod directory.
pub fn static_pod_dir() -> PathBuf {
    path("STATIC_POD_DIR")
}

/// Where failed tests' diagnostics go, one directory per namespace.
pub fn artifacts_dir() -> PathBuf {
    path("E2E_ARTIFACTS")
}

/// Node 1 of the local cluster; node N > 1 is `<node_name>-N`.
pub fn node_name() -> &'static str {
    get("NODE_NAME")
}

/// Every node's zone label.
pub fn zone_label() -> &'static str {
    get("ZONE_LABEL")
}

/// Set to `true` on every namespace the suite creates.
pub fn e2e_namespace_label() -> &'static str {
    get("E2E_NAMESPACE_LABEL")
}

pub fn chart_release() -> &'static str {
    get("CHART_RELEASE")
}

pub fn chart_namespace() -> &'static str {
    get("CHART_NAMESPACE")
}

/// The suite's chart values, relative to the repository root.
pub fn chart_e2e_values() -> &'static str {
    get("CHART_E2E_VALUES")
}

/// The operator Deployment the chart creates.
pub fn operator_deployment() -> &'static str {
    get("OPERATOR_DEPLOYMENT")
}

pub fn operator_image() -> &'static str {
    get("OPERATOR_IMAGE")
}

pub fn toolbox_image() -> &'static str {
    get("TOOLBOX_IMAGE")
}

pub fn pause_image() -> &'static str {
    get("PAUSE_IMAGE")
}

/// The kind engine's network namespace (a name for `ip netns exec`).
pub fn kind_netns() -> &'static str {
    get("KIND_NETNS")
}

/// The kind engine's socket, as `DOCKER_HOST`.
pub fn kind_docker_host() -> &'static str {
    get("KIND_DOCKER_HOST")
}

fn path(key: &str) -> PathBuf {
    PathBuf::from(get(key))
}

/// `key` as the scripts see it. Nothing the harness can recover from when it is missing.
fn get(key: &str) -> &'static str {
    let all = VALUES.as_ref().unwrap_or_else(|e| panic!("{e}"));
    lookup(all, key).unwrap_or_else(|e| panic!("{e}"))
}

fn lookup<'a>(all: &'a Values, key: &str) -> Result<&'a str, String> {
    (all.get(key).map(String::as_str)).ok_or_else(|| {
        format!("{FILE} has no {key} (the harness's copy is built in from {FILE} of its checkout)")
    })
}

/// Evaluates `text` in `bash` (whose environment the caller sets) and reads back every key of
/// KEYS that is set then, as `KEY=value` NUL-separated: bash's rules, not a copy of them.
fn evaluate(text: &str, bash: &mut Command) -> Result<Values, String> {
    const PRINT: &str = r#"set -eu
eval "$1"
shift
for k; do if [[ -v $k ]]; then printf '%s=%s\0' "$k" "${!k}"; fi; done"#;
    let out = (bash.args(["-c", PRINT, FILE, text]).args(KEYS).output())
        .map_err(|e| format!("running bash to evaluate {FILE}: {e}"))?;
    if !out.status.success() {
        let stderr = String::from_utf8_lossy(&out.stderr);
        return Err(format!(
            "bash could not evaluate {FILE} ({}): {stderr}",
            out.status
        ));
    }
    let stdout = String::from_utf8(out.stdout).map_err(|e| format!("{FILE}: not UTF-8: {e}"))?;
    Ok((stdout.split_terminator('\0'))
        .filter_map(|kv| kv.split_once('='))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// bash with only HOME and `set` in its environment: what the file gives on a clean machine.
    fn evaluate_with(text: &str, set: &[(&str, &str)]) -> Result<Values, String> {
        let mut bash = Command::new("bash");
        bash.env_clear()
            .env("HOME", "/home/e2e")
            .envs(set.iter().copied());
        evaluate(text, &mut bash)
    }

    #[test]
    fn every_accessor_resolves() {
        for p in [
            cache_dir(),
            cluster_kubeconfig(),
            tools_bin(),
            static_pod_dir(),
            artifacts_dir(),
        ] {
            assert!(p.is_absolute(), "{}", p.display());
        }
        assert!(
            ["local", "kind"].contains(&cluster().as_str()),
            "{}",
            cluster()
        );
        for word in [
            node_name(),
            zone_label(),
            e2e_namespace_label(),
            chart_release(),
            chart_namespace(),
            chart_e2e_values(),
            operator_deployment(),
            operator_image(),
            toolbox_image(),
            pause_image(),
        ] {
            assert!(
                !word.is_empty() && !word.contains(char::is_whitespace),
                "{word:?}"
            );
        }
        // What e2e/kind's engine uses: `ip netns exec` takes a name, docker a unix socket.
        assert!(!kind_netns().contains('/'), "{}", kind_netns());
        assert!(
            kind_docker_host().starts_with("unix:///"),
            "{}",
            kind_docker_host()
        );
    }

    /// Every key of KEYS is in the file itself, not only in this process's environment.
    #[test]
    fn the_file_defines_every_key() {
        let all = evaluate_with(TEXT, &[]).unwrap();
        for key in KEYS {
            assert!(lookup(&all, key).is_ok_and(|v| !v.is_empty()), "{key}");
        }
        assert_eq!(all["MSGBENCH_CACHE"], "/home/e2e/.cache/msgbench");
        assert_eq!(
            all["CLUSTER_KUBECONFIG"],
            "/home/e2e/.cache/msgbench/kubeconfig-local"
        );
        assert_eq!(all["CHART_NAMESPACE"], "msgbench-system");
    }

    #[test]
    fn the_environment_overrides_the_file_as_in_bash() {
        let all = evaluate_with(TEXT, &[("MSGBENCH_CACHE", "/x"), ("CLUSTER", "kind")]).unwrap();
        assert_eq!(all["MSGBENCH_CACHE"], "/x");
        assert_eq!(all["CLUSTER_KUBECONFIG"], "/x/kubeconfig-kind");
        assert_eq!(all["TOOLS_BIN"], "/x/bin");
        assert_eq!(all["STATIC_POD_DIR"], "/x/cluster/static-pods");
        assert_eq!(all["E2E_ARTIFACTS"], "/x/e2e-artifacts");
        // Only where the file lets it: a fixed key keeps its value, as in the scripts.
        let all = evaluate_with(TEXT, &[("NODE_NAME", "elsewhere")]).unwrap();
        assert_eq!(all["NODE_NAME"], "msgbench-local");
    }

    #[test]
    fn an_empty_variable_counts_as_unset() {
        let all = evaluate_with(TEXT, &[("MSGBENCH_CACHE", ""), ("CLUSTER", "")]).unwrap();
        assert_eq!(all["MSGBENCH_CACHE"], "/home/e2e/.cache/msgbench");
        assert_eq!(all["CLUSTER"], "local");
    }

    #[test]
    fn a_missing_key_or_a_broken_file_names_the_key_and_the_file() {
        let all = evaluate_with("CLUSTER=local\n", &[]).unwrap();
        let e = lookup(&all, "NODE_NAME").unwrap_err();
        assert!(
            e.contains("NODE_NAME") && e.contains("e2e/contract.env"),
            "{e}"
        );
        let e = evaluate_with("A=${UNSET_ANYWHERE}\n", &[]).unwrap_err();
        assert!(
            e.contains("e2e/contract.env") && e.contains("UNSET_ANYWHERE"),
            "{e}"
        );
    }
}
