//! Which cluster the suite runs against (`CLUSTER`: `local`, e2e/cluster, or `kind`, e2e/kind)
//! and the few ways a test on this host reaches into it that differ between the two: where pod
//! IPs are routed, whose container runtime lists the images, and how a node is stopped and
//! started. What is the same on both is not here: the API server, and pods' processes, which
//! this host's /proc shows either way (kind's node PID namespaces are nested in the host's).
use super::{exported, kind_engine, nodes::local_index, repo_root};
use anyhow::{bail, ensure, Context, Result};
use std::ffi::OsStr;
use std::process::Command;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Flavour {
    Local,
    Kind,
}

impl Flavour {
    /// The flavour `CLUSTER` names (read as e2e/contract.env reads it).
    pub fn current() -> Flavour {
        Flavour::parse(exported::cluster()).unwrap_or_else(|e| panic!("{e:#}"))
    }

    pub fn parse(name: &str) -> Result<Flavour> {
        match name {
            "local" => Ok(Flavour::Local),
            "kind" => Ok(Flavour::Kind),
            other => bail!("CLUSTER={other}: the e2e suite knows local and kind"),
        }
    }

    /// `program` run where pod IPs are routed. Local: right here (the pod bridges are the
    /// host's). kind: in the engine's network namespace, the only one with routes to the pod
    /// CIDRs (`ip netns exec` keeps this process's user, files and environment).
    pub fn reaching_pods(self, program: impl AsRef<OsStr>) -> Command {
        match self {
            Flavour::Local => Command::new(program),
            Flavour::Kind => {
                let mut cmd = Command::new("ip");
                cmd.args(["netns", "exec", exported::kind_netns()])
                    .arg(program);
                cmd
            }
        }
    }

    /// `ctr -n k8s.io images ls [-q]` on the runtime of the cluster's first node, which has
    /// every image the suite loads. Local: the host's containerd at its default socket (node
    /// 1's). kind: the control-plane container's own containerd (`kind load` fills every node).
    pub fn list_images(self, quiet: bool) -> Command {
        let mut args = vec!["-n", "k8s.io", "images", "ls"];
        if quiet {
            args.push("-q");
        }
        match self {
            Flavour::Local => {
                let mut cmd = Command::new("ctr");
                cmd.args(args);
                cmd
            }
            Flavour::Kind => kind_engine::exec_on_node(&kind_engine::control_plane(), "ctr", &args),
        }
    }

    /// Whether a test may stop `node`: one of this cluster's nodes, and not the one running the
    /// API server (local: node 1; kind: the control plane), which would take the cluster along.
    pub fn can_stop(self, node: &str) -> bool {
        match self {
            Flavour::Local => local_index(node).is_some_and(|i| i > 1),
            Flavour::Kind => kind_engine::is_worker(node),
        }
    }

    /// The command that makes `node` go dark like a machine that lost power. Local:
    /// `e2e/cluster/node stop N` (its pods' traffic dropped, then kubelet, pods and runtime
    /// killed). kind: `docker pause` freezes every process of the node at once (kubelet,
    /// runtime, pods), so not even a FIN gets out and the kubelet's heartbeats stop; a `docker
    /// stop` or `kill` would close the pods' sockets first and, on start, boot the node afresh
    /// with possibly another address, which the routes to its pod CIDR would not follow.
    pub fn stop_node(self, node: &str) -> Result<Command> {
        self.node_command(node, "stop")
    }

    /// The command that brings a node stopped by [`Flavour::stop_node`] back, and returns once
    /// the node is Ready again (the next test counts Ready nodes).
    pub fn start_node(self, node: &str) -> Result<Command> {
        self.node_command(node, "start")
    }

    /// `e2e/cluster/node VERB N` or `e2e/kind/node-power VERB NAME` (`docker pause`/`unpause`).
    fn node_command(self, node: &str, verb: &str) -> Result<Command> {
        ensure!(
            self.can_stop(node),
            "{node} is not a node of the {self:?} cluster a test may stop (never the one \
             running the API server)"
        );
        Ok(match self {
            Flavour::Local => {
                let index = local_index(node).context("a local node")?;
                let mut cmd = Command::new(repo_root().join("e2e/cluster/node"));
                cmd.args([verb, &index.to_string()]);
                cmd
            }
            Flavour::Kind => {
                let mut cmd = Command::new(repo_root().join("e2e/kind/node-power"));
                cmd.args([verb, node]);
                cmd
            }
        })
    }

    /// Why a pod on this cluster's first node cannot mount a FUSE file system (msgbench-lazyfs,
    /// `faultInjection.powerLoss`), if it cannot: the node has no `/dev/fuse`. Local: the node
    /// is this host. kind: the node container is privileged and so has the host's devices, but
    /// only those the host has.
    pub fn fuse_unavailable(self) -> Option<String> {
        let mut probe = match self {
            Flavour::Local => Command::new("test"),
            Flavour::Kind => kind_engine::exec_on_node(&kind_engine::control_plane(), "test", &[]),
        };
        let ok = probe.args(["-c", "/dev/fuse"]).status();
        match ok {
            Ok(s) if s.success() => None,
            Ok(_) => Some(format!(
                "the {self:?} cluster's node has no /dev/fuse (load the fuse module on the host)"
            )),
            Err(e) => Some(format!(
                "could not look for /dev/fuse on the {self:?} node: {e}"
            )),
        }
    }

    /// Why NetworkPolicy is not enforced on this cluster, if it is not: only kind's CNI
    /// (kube-router) has a policy engine; the local cluster's bridge plugin has none.
    pub fn network_policy_unenforced(self) -> Option<&'static str> {
        match self {
            Flavour::Local => Some(
                "CLUSTER=local does not enforce NetworkPolicy (its bridge plugin has no policy \
                 engine); run with CLUSTER=kind",
            ),
            Flavour::Kind => None,
        }
    }

    /// Why the local OCI registry (e2e/registry) cannot serve this cluster's nodes, if it cannot.
    pub fn registry_unreachable(self) -> Option<&'static str> {
        match self {
            Flavour::Local => None,
            Flavour::Kind => Some(
                "the test registry listens on this host's 127.0.0.1:5443, which kind's nodes \
                 cannot reach (they live in the engine's network namespace, where 127.0.0.1 is \
                 each node's own loopback), and kind's containerd has no certs.d entry \
                 trusting the registry's throwaway CA",
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::command::argv;

    #[test]
    fn the_flavour_is_local_or_kind() {
        assert_eq!(Flavour::parse("local").unwrap(), Flavour::Local);
        assert_eq!(Flavour::parse("kind").unwrap(), Flavour::Kind);
        assert!(Flavour::parse("minikube").is_err());
        assert!(Flavour::parse("").is_err());
    }

    #[test]
    fn kind_reaches_pods_from_the_engines_network_namespace() {
        let local = argv(&Flavour::Local.reaching_pods("/c/bin/natsprobe"));
        assert_eq!(local, ["/c/bin/natsprobe"]);
        let kind = argv(&Flavour::Kind.reaching_pods("/c/bin/natsprobe"));
        assert_eq!(
            kind,
            ["ip", "netns", "exec", "msgbench-kind", "/c/bin/natsprobe"]
        );
    }

    #[test]
    fn images_are_listed_by_the_first_nodes_containerd() {
        assert_eq!(
            argv(&Flavour::Local.list_images(true)),
            ["ctr", "-n", "k8s.io", "images", "ls", "-q"]
        );
        let kind = argv(&Flavour::Kind.list_images(false));
        assert_eq!(
            kind[1..],
            [
                "exec",
                "msgbench-control-plane",
                "ctr",
                "-n",
                "k8s.io",
                "images",
                "ls"
            ]
        );
    }

    #[test]
    fn only_nodes_other_than_the_api_servers_can_be_stopped() {
        assert!(Flavour::Local.can_stop("msgbench-local-2"));
        assert!(!Flavour::Local.can_stop("msgbench-local"));
        assert!(!Flavour::Local.can_stop("msgbench-worker"));
        assert!(Flavour::Kind.can_stop("msgbench-worker2"));
        assert!(!Flavour::Kind.can_stop("msgbench-control-plane"));
        assert!(!Flavour::Kind.can_stop("msgbench-local-2"));
        assert!(Flavour::Kind.stop_node("msgbench-control-plane").is_err());
    }

    #[test]
    fn each_flavour_stops_and_starts_a_node_through_its_script() {
        let stop = argv(&Flavour::Kind.stop_node("msgbench-worker").unwrap());
        assert!(stop[0].ends_with("e2e/kind/node-power"), "{stop:?}");
        assert_eq!(stop[1..], ["stop", "msgbench-worker"]);
        let start = argv(&Flavour::Kind.start_node("msgbench-worker").unwrap());
        assert_eq!(start[1..], ["start", "msgbench-worker"]);
        let stop = argv(&Flavour::Local.stop_node("msgbench-local-3").unwrap());
        assert!(stop[0].ends_with("e2e/cluster/node"), "{stop:?}");
        assert_eq!(stop[1..], ["stop", "3"]);
    }

    #[test]
    fn only_kind_lacks_the_registry() {
        assert!(Flavour::Local.registry_unreachable().is_none());
        assert!(Flavour::Kind
            .registry_unreachable()
            .is_some_and(|why| why.contains("127.0.0.1:5443")));
    }
}
