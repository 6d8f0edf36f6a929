//! `e2e/contract.env`: the paths, names, labels and images the cluster scripts and this harness
//! must agree on, written once. bash sources the file; the harness reads the same text, built
//! in, with the same rules: `KEY=${KEY:-value}` lets the environment override KEY (empty counts
//! as unset), `${KEY}` expands a key above (or `${HOME}`).
use anyhow::{bail, ensure, Context, Result};
use std::collections::BTreeMap;
use std::path::PathBuf;

const TEXT: &str = include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/contract.env"));

pub const NODE_NAME: &str = fixed("NODE_NAME");
pub const ZONE_LABEL: &str = fixed("ZONE_LABEL");
pub const E2E_NAMESPACE_LABEL: &str = fixed("E2E_NAMESPACE_LABEL");
pub const CHART_RELEASE: &str = fixed("CHART_RELEASE");
pub const CHART_NAMESPACE: &str = fixed("CHART_NAMESPACE");
pub const CHART_E2E_VALUES: &str = fixed("CHART_E2E_VALUES");
pub const OPERATOR_DEPLOYMENT: &str = fixed("OPERATOR_DEPLOYMENT");
pub const OPERATOR_IMAGE: &str = fixed("OPERATOR_IMAGE");
pub const TOOLBOX_IMAGE: &str = fixed("TOOLBOX_IMAGE");
pub const PAUSE_IMAGE: &str = fixed("PAUSE_IMAGE");
pub const KIND_NETNS: &str = fixed("KIND_NETNS");
pub const KIND_DOCKER_HOST: &str = fixed("KIND_DOCKER_HOST");

/// `${MSGBENCH_CACHE:-~/.cache/msgbench}`: the project's cache.
pub fn cache_dir() -> PathBuf {
    path("MSGBENCH_CACHE")
}

/// `local` (the default) or `kind`.
pub fn cluster() -> String {
    get("CLUSTER")
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

fn path(key: &str) -> PathBuf {
    PathBuf::from(get(key))
}

/// `key` as bash sees it after sourcing the file in this process's environment. Every key the
/// harness reads has an accessor above, and a unit test calls each: a missing key is a bug.
fn get(key: &str) -> String {
    let env = |k: &str| std::env::var(k).ok();
    match parse(TEXT, env) {
        Ok(mut all) => all
            .remove(key)
            .unwrap_or_else(|| panic!("e2e/contract.env has no {key}")),
        Err(e) => panic!("e2e/contract.env: {e:#}"),
    }
}

/// Every key in order of the file, overrides applied and references expanded.
fn parse(text: &str, env: impl Fn(&str) -> Option<String>) -> Result<BTreeMap<String, String>> {
    let mut keys = BTreeMap::new();
    for (n, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let (key, raw) = (line.split_once('=')).with_context(|| format!("line {}: no =", n + 1))?;
        ensure!(
            !key.is_empty()
                && key
                    .bytes()
                    .all(|b| b.is_ascii_uppercase() || b.is_ascii_digit() || b == b'_'),
            "line {}: bad key {key:?}",
            n + 1
        );
        let set = env(key).filter(|v| !v.is_empty());
        let value = match raw.strip_prefix(&format!("${{{key}:-")) {
            Some(default) => match set {
                Some(v) => v,
                None => expand(
                    default.strip_suffix('}').context("unclosed ${")?,
                    &keys,
                    &env,
                )?,
            },
            None => expand(raw, &keys, &env)?,
        };
        keys.insert(key.to_string(), value);
    }
    Ok(keys)
}

/// `${NAME}` of a key above, or of HOME (`/root` when unset, as the harness always had it).
fn expand(
    raw: &str,
    keys: &BTreeMap<String, String>,
    env: &impl Fn(&str) -> Option<String>,
) -> Result<String> {
    ensure!(
        !raw.contains(|c: char| c.is_whitespace() || c == '"' || c == '\''),
        "{raw:?}: no spaces or quotes"
    );
    let mut out = String::new();
    let mut rest = raw;
    while let Some(at) = rest.find('$') {
        out.push_str(&rest[..at]);
        let Some(inner) = rest[at..].strip_prefix("${") else {
            bail!("{raw:?}: only ${{NAME}} expands");
        };
        let (name, after) = inner.split_once('}').context("unclosed ${")?;
        let value = match (keys.get(name), name) {
            (Some(v), _) => v.clone(),
            (None, "HOME") => env("HOME").unwrap_or_else(|| "/root".into()),
            _ => bail!("{raw:?}: {name} is neither a key above nor HOME"),
        };
        out.push_str(&value);
        rest = after;
    }
    out.push_str(rest);
    Ok(out)
}

/// A key whose value is a plain word, at compile time: a `const` naming a missing key, or one
/// whose value expands something, does not build.
const fn fixed(key: &str) -> &'static str {
    let (text, key) = (TEXT.as_bytes(), key.as_bytes());
    let mut start = 0;
    while start < text.len() {
        let mut end = start;
        while end < text.len() && text[end] != b'\n' {
            end += 1;
        }
        if starts_with_key(text, start, end, key) {
            let value = text.split_at(start + key.len() + 1).1;
            let value = value.split_at(end - start - key.len() - 1).0;
            let mut i = 0;
            while i < value.len() {
                assert!(value[i] != b'$', "e2e/contract.env: not a fixed value");
                i += 1;
            }
            match core::str::from_utf8(value) {
                Ok(v) => return v,
                Err(_) => panic!("e2e/contract.env: not UTF-8"),
            }
        }
        start = end + 1;
    }
    panic!("e2e/contract.env: no such key")
}

/// Whether `text[start..end]` is `key=…`.
const fn starts_with_key(text: &[u8], start: usize, end: usize, key: &[u8]) -> bool {
    if end - start <= key.len() || text[start + key.len()] != b'=' {
        return false;
    }
    let mut i = 0;
    while i < key.len() {
        if text[start + i] != key[i] {
            return false;
        }
        i += 1;
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::Command;

    #[test]
    fn every_key_the_harness_reads_is_there() {
        // The fixed ones are checked by the build; these at run time.
        for p in [
            cache_dir(),
            cluster_kubeconfig(),
            tools_bin(),
            static_pod_dir(),
            artifacts_dir(),
        ] {
            assert!(p.is_absolute(), "{}", p.display());
        }
        assert!(!cluster().is_empty());
        assert_eq!(CHART_NAMESPACE, "msgbench-system");
        // What e2e/kind's engine uses: `ip netns exec` takes a name, docker a unix socket.
        assert!(!KIND_NETNS.contains('/'), "{KIND_NETNS}");
        assert!(
            KIND_DOCKER_HOST.starts_with("unix:///"),
            "{KIND_DOCKER_HOST}"
        );
    }

    #[test]
    fn overrides_and_references_follow_bash() {
        let text = "# c\nA=${A:-x}\nB=${A}/b\nC=${HOME}/c\n";
        let env = |set: &'static [(&'static str, &'static str)]| {
            move |k: &str| {
                set.iter()
                    .find(|(n, _)| *n == k)
                    .map(|(_, v)| v.to_string())
            }
        };
        let all = parse(text, env(&[("HOME", "/h")])).unwrap();
        assert_eq!(
            (&all["A"][..], &all["B"][..], &all["C"][..]),
            ("x", "x/b", "/h/c")
        );
        let all = parse(text, env(&[("A", "y"), ("B", "ignored")])).unwrap();
        assert_eq!(
            (&all["A"][..], &all["B"][..], &all["C"][..]),
            ("y", "y/b", "/root/c")
        );
        assert_eq!(
            parse(text, env(&[("A", "")])).unwrap()["A"],
            "x",
            "empty is unset"
        );
        assert!(
            parse("A=${B}\n", env(&[("B", "b")])).is_err(),
            "only keys above"
        );
        assert!(parse("A=$B\n", env(&[])).is_err());
        assert!(parse("A=\"x y\"\n", env(&[])).is_err());
    }

    /// The same file sourced by bash gives every key the same value, with and without overrides.
    #[test]
    fn bash_reads_the_file_the_same_way() {
        let file = concat!(env!("CARGO_MANIFEST_DIR"), "/contract.env");
        for set in [
            &[][..],
            &[("MSGBENCH_CACHE", "/tmp/c"), ("CLUSTER", "kind")][..],
        ] {
            let all = parse(TEXT, |k| {
                let v = set
                    .iter()
                    .find(|(n, _)| *n == k)
                    .map(|(_, v)| v.to_string());
                v.or_else(|| (k == "HOME").then(|| "/home/e2e".to_string()))
            })
            .unwrap();
            let script = format!(
                "set -eu; . {file}; for k in {}; do printf '%s=%s\\n' \"$k\" \"${{!k}}\"; done",
                all.keys().cloned().collect::<Vec<_>>().join(" ")
            );
            let out = Command::new("bash")
                .args(["-c", &script])
                .env_clear()
                .env("HOME", "/home/e2e")
                .envs(set.iter().copied())
                .output()
                .expect("bash");
            assert!(
                out.status.success(),
                "{}",
                String::from_utf8_lossy(&out.stderr)
            );
            let bash: BTreeMap<String, String> = String::from_utf8_lossy(&out.stdout)
                .lines()
                .filter_map(|l| l.split_once('='))
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect();
            assert_eq!(bash, all, "overrides {set:?}");
        }
    }
}
