//! The kubelet's static pod directory of the cluster's node, where a test drops a manifest the
//! kubelet runs without the API server's say. Local: the contract's `STATIC_POD_DIR` on this
//! host. kind: kubeadm's `/etc/kubernetes/manifests` inside the node container, written through
//! the kind engine (the host cannot see the node's files).
use crate::cluster::flavour::Flavour;
use crate::cluster::{command, exported, kind_engine};
use anyhow::{ensure, Context, Result};
use std::path::PathBuf;
use std::process::Command;

/// kubeadm's `staticPodPath`, which kind's kubelets run with.
const KIND_STATIC_POD_DIR: &str = "/etc/kubernetes/manifests";

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StaticPodDir {
    Host(PathBuf),
    KindNode,
}

impl StaticPodDir {
    pub fn of(flavour: Flavour) -> StaticPodDir {
        match flavour {
            Flavour::Local => StaticPodDir::Host(exported::static_pod_dir()),
            Flavour::Kind => StaticPodDir::KindNode,
        }
    }

    /// Fails, saying how to get one, unless the kubelet can read manifests here.
    pub fn check(&self) -> Result<()> {
        if let StaticPodDir::Host(dir) = self {
            ensure!(
                dir.is_dir(),
                "{} is missing: the local cluster's kubelet must run with staticPodPath there \
                 (run `make cluster-up`)",
                dir.display()
            );
        }
        Ok(())
    }

    /// Writes `file` (a name, no path) with `text` for `node`'s kubelet.
    pub fn write(&self, node: &str, file: &str, text: &str) -> Result<()> {
        match self {
            StaticPodDir::Host(dir) => std::fs::write(dir.join(file), text)
                .with_context(|| format!("writing {}", dir.join(file).display())),
            StaticPodDir::KindNode => command::stdout_of(write_in_node(node, file, text)).map(drop),
        }
    }

    /// Removes `file` (not an error when it is gone already).
    pub fn remove(&self, node: &str, file: &str) -> Result<()> {
        match self {
            StaticPodDir::Host(dir) => {
                std::fs::remove_file(dir.join(file)).ok();
                Ok(())
            }
            StaticPodDir::KindNode => command::stdout_of(remove_in_node(node, file)).map(drop),
        }
    }
}

/// The text goes as an argument, not through a shell's quoting: any manifest arrives as it is.
fn write_in_node(node: &str, file: &str, text: &str) -> Command {
    let path = format!("{KIND_STATIC_POD_DIR}/{file}");
    let script = r#"printf '%s' "$1" > "$0""#;
    kind_engine::exec_on_node(node, "sh", &["-c", script, &path, text])
}

fn remove_in_node(node: &str, file: &str) -> Command {
    let path = format!("{KIND_STATIC_POD_DIR}/{file}");
    kind_engine::exec_on_node(node, "rm", &["-f", &path])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::command::argv;

    #[test]
    fn each_flavour_has_its_kubelets_directory() {
        assert_eq!(
            StaticPodDir::of(Flavour::Local),
            StaticPodDir::Host(exported::static_pod_dir())
        );
        assert_eq!(StaticPodDir::of(Flavour::Kind), StaticPodDir::KindNode);
        assert!(StaticPodDir::Host("/nonexistent/static-pods".into())
            .check()
            .is_err());
        assert!(StaticPodDir::KindNode.check().is_ok());
    }

    #[test]
    fn a_kind_manifest_is_written_in_the_node_as_one_argument() {
        let text = "kind: Pod\nmetadata: {name: 'x'}\n";
        let write = argv(&write_in_node("msgbench-control-plane", "hog.yaml", text));
        assert_eq!(
            write[1..],
            [
                "exec",
                "msgbench-control-plane",
                "sh",
                "-c",
                r#"printf '%s' "$1" > "$0""#,
                "/etc/kubernetes/manifests/hog.yaml",
                text
            ]
        );
        let rm = argv(&remove_in_node("n", "h.yaml"));
        assert_eq!(
            rm[1..],
            ["exec", "n", "rm", "-f", "/etc/kubernetes/manifests/h.yaml"]
        );
    }

    /// The script, run by a real sh, writes the text byte for byte.
    #[test]
    fn the_write_script_keeps_the_text_as_it_is() {
        let dir = std::env::temp_dir().join(format!("static-pods-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("m.yaml");
        let text = "a: '$HOME' \"q\"\n%s\\n\n";
        let cmd = write_in_node("n", "m.yaml", text);
        let args: Vec<String> = argv(&cmd)[4..].to_vec();
        let mut sh = Command::new("sh");
        sh.args([&args[0], &args[1], path.to_str().unwrap(), &args[3]]);
        command::stdout_of(sh).unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), text);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
