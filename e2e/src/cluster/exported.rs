//! What the Makefile exports from `e2e/contract.env`: the paths, names, labels and images the
//! cluster scripts and this harness must agree on. The file has one reader, bash: the scripts
//! source it and the Makefile exports every key as bash sets it; the harness only reads the
//! variables. Outside `make`, `set -a; . e2e/contract.env; set +a` exports the same.
use std::path::PathBuf;
use std::sync::OnceLock;

/// `key`'s value; nothing the harness can recover from when it is missing.
fn var(key: &str) -> String {
    lookup(key, |k| std::env::var(k).ok()).unwrap_or_else(|e| panic!("{e}"))
}

fn lookup(key: &str, get: impl Fn(&str) -> Option<String>) -> Result<String, String> {
    get(key).filter(|v| !v.is_empty()).ok_or_else(|| {
        format!(
            "{key} is not set: run the suite through make (it exports e2e/contract.env), \
             or first `set -a; . e2e/contract.env; set +a`"
        )
    })
}

/// Declares an accessor per key (read once per process), and `KEYS` (a unit test checks each against the file).
macro_rules! exported {
    ($($(#[$doc:meta])* $name:ident -> $ty:ty = $key:literal;)*) => {
        $($(#[$doc])* pub fn $name() -> $ty {
            static VALUE: OnceLock<String> = OnceLock::new();
            VALUE.get_or_init(|| var($key)).as_str().into()
        })*
        #[cfg(test)]
        const KEYS: &[&str] = &[$($key),*];
    };
}

exported! {
    /// The project's cache (`~/.cache/msgbench` unless overridden).
    cache_dir -> PathBuf = "MSGBENCH_CACHE";
    /// `local` (the default) or `kind`.
    cluster -> &'static str = "CLUSTER";
    /// The kubeconfig `make cluster-up` writes: `<cache>/kubeconfig-<cluster>`.
    cluster_kubeconfig -> PathBuf = "CLUSTER_KUBECONFIG";
    /// Where `e2e/tools/ensure` installs tools.
    tools_bin -> PathBuf = "TOOLS_BIN";
    /// The local cluster's kubelet's static pod directory.
    static_pod_dir -> PathBuf = "STATIC_POD_DIR";
    /// Where failed tests' diagnostics go, one directory per namespace.
    artifacts_dir -> PathBuf = "E2E_ARTIFACTS";
    /// Node 1 of the local cluster; node N > 1 is `<node_name>-N`.
    node_name -> &'static str = "NODE_NAME";
    /// Every node's zone label.
    zone_label -> &'static str = "ZONE_LABEL";
    /// Set to `true` on every namespace the suite creates.
    e2e_namespace_label -> &'static str = "E2E_NAMESPACE_LABEL";
    chart_release -> &'static str = "CHART_RELEASE";
    chart_namespace -> &'static str = "CHART_NAMESPACE";
    /// The suite's chart values, relative to the repository root.
    chart_e2e_values -> &'static str = "CHART_E2E_VALUES";
    /// The operator Deployment the chart creates.
    operator_deployment -> &'static str = "OPERATOR_DEPLOYMENT";
    operator_image -> &'static str = "OPERATOR_IMAGE";
    toolbox_image -> &'static str = "TOOLBOX_IMAGE";
    pause_image -> &'static str = "PAUSE_IMAGE";
    /// The kind engine's network namespace (a name for `ip netns exec`).
    kind_netns -> &'static str = "KIND_NETNS";
    /// The kind engine's socket, as `DOCKER_HOST`.
    kind_docker_host -> &'static str = "KIND_DOCKER_HOST";
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_key_the_harness_reads_is_defined_in_the_file() {
        let text = std::fs::read_to_string(crate::cluster::repo_root().join("e2e/contract.env"))
            .expect("e2e/contract.env");
        for key in KEYS {
            let defined = text.lines().any(|l| l.starts_with(&format!("{key}=")));
            assert!(defined, "e2e/contract.env does not define {key}");
        }
    }

    #[test]
    fn a_missing_or_empty_variable_names_the_key_and_how_to_set_it() {
        for value in [None, Some(String::new())] {
            let err = lookup("NODE_NAME", |_| value.clone()).unwrap_err();
            assert!(err.starts_with("NODE_NAME is not set"), "{err}");
            assert!(err.contains("e2e/contract.env"), "{err}");
        }
        assert_eq!(lookup("K", |_| Some("v".into())), Ok("v".into()));
    }
}
