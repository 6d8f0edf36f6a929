//! The kind flavour's Docker engine (e2e/kind): Debian's dockerd in the network namespace
//! `KIND_NETNS`, listening on `KIND_DOCKER_HOST`. kind names each node container as its
//! Kubernetes node (`msgbench-control-plane`, `msgbench-worker`, `msgbench-worker2`, …), so a
//! node name from the API server is also the container to `docker exec`, pause or unpause.
use super::exported;
use std::path::PathBuf;
use std::process::Command;

/// The kind cluster's name (`name:` in e2e/kind/config.yaml; a unit test checks they agree).
pub const CLUSTER_NAME: &str = "msgbench";

/// The node that runs the API server (and etcd): the cluster goes with it.
pub fn control_plane() -> String {
    format!("{CLUSTER_NAME}-control-plane")
}

/// Whether `node` is one of this kind cluster's workers (`msgbench-worker`, `msgbench-worker2`…).
pub fn is_worker(node: &str) -> bool {
    node.strip_prefix(CLUSTER_NAME)
        .and_then(|rest| rest.strip_prefix("-worker"))
        .is_some_and(|n| n.bytes().all(|b| b.is_ascii_digit()))
}

/// The docker client `e2e/tools/ensure` unpacks with the engine, else one on PATH.
fn client() -> PathBuf {
    let unpacked = exported::cache_dir().join("kind/engine/usr/bin/docker");
    if unpacked.is_file() {
        unpacked
    } else {
        PathBuf::from("docker")
    }
}

/// `docker <args>` against the kind engine's socket (never the caller's own `DOCKER_HOST`).
pub fn docker(args: &[&str]) -> Command {
    let mut cmd = Command::new(client());
    cmd.env("DOCKER_HOST", exported::kind_docker_host())
        .args(args);
    cmd
}

/// `program args…` run inside `node`'s container (its mount, PID and network namespaces: the
/// node's own `ctr`, `crictl`, files).
pub fn exec_on_node(node: &str, program: &str, args: &[&str]) -> Command {
    let mut cmd = docker(&["exec", node, program]);
    cmd.args(args);
    cmd
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::command::argv;

    #[test]
    fn the_cluster_name_is_the_one_kind_creates() {
        let config = include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/kind/config.yaml"));
        assert!(
            config.lines().any(|l| l == format!("name: {CLUSTER_NAME}")),
            "e2e/kind/config.yaml names another cluster"
        );
        assert_eq!(control_plane(), "msgbench-control-plane");
    }

    #[test]
    fn workers_are_told_from_the_control_plane_and_other_names() {
        for w in ["msgbench-worker", "msgbench-worker2", "msgbench-worker3"] {
            assert!(is_worker(w), "{w}");
        }
        for n in [
            "msgbench-control-plane",
            "msgbench-local-2",
            "other-worker",
            "msgbench-workerx",
        ] {
            assert!(!is_worker(n), "{n}");
        }
    }

    #[test]
    fn docker_talks_to_the_kind_engine_and_execs_in_the_node() {
        let cmd = exec_on_node("msgbench-worker", "ctr", &["-n", "k8s.io", "images", "ls"]);
        let argv = argv(&cmd);
        assert!(argv[0].ends_with("docker"), "{argv:?}");
        assert_eq!(
            argv[1..],
            [
                "exec",
                "msgbench-worker",
                "ctr",
                "-n",
                "k8s.io",
                "images",
                "ls"
            ]
        );
        let host = cmd.get_envs().find(|(k, _)| *k == "DOCKER_HOST");
        assert_eq!(
            host.and_then(|(_, v)| v)
                .map(|v| v.to_string_lossy().into_owned()),
            Some("unix:///run/msgbench-kind/docker.sock".to_string())
        );
    }
}
