//! The nodes of a multi-node cluster (`NODES=3 make e2e`; e2e/cluster/nodes.sh): which exist,
//! where pods run, a node cordoned for a while, and a node stopped and started again (local:
//! `e2e/cluster/node`; kind: the node container paused).
use crate::cluster::flavour::Flavour;
use crate::cluster::{command, exported, kubeconfig_path};
use anyhow::{ensure, Context, Result};
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{Api, ListParams, Patch, PatchParams};
use kube::Client;
use std::process::Command;

/// Names of the Ready nodes, sorted; fails unless there are at least `n`, saying how to get them.
pub async fn require(client: &Client, n: usize) -> Result<Vec<Node>> {
    let mut nodes: Vec<Node> = Api::<Node>::all(client.clone())
        .list(&ListParams::default())
        .await?
        .items
        .into_iter()
        .filter(is_ready)
        .collect();
    nodes.sort_by_key(name);
    ensure!(
        nodes.len() >= n,
        "this test needs {n} Ready nodes, the cluster has {}: run it with `NODES={n} make e2e`",
        nodes.len()
    );
    Ok(nodes)
}

pub fn name(n: &Node) -> String {
    n.metadata.name.clone().unwrap_or_default()
}

/// The zone label the cluster scripts (local and kind) put on every node.
pub fn zone(n: &Node) -> Option<String> {
    n.metadata
        .labels
        .as_ref()?
        .get(exported::zone_label())
        .cloned()
}

fn is_ready(n: &Node) -> bool {
    n.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

pub fn pod_node(p: &Pod) -> Option<String> {
    p.spec.as_ref()?.node_name.clone()
}

/// The nodes the operator runs on (a node stopped under it would stop the observer itself).
pub async fn operator_nodes(client: &Client) -> Result<Vec<String>> {
    let pods = Api::<Pod>::namespaced(client.clone(), crate::chart::namespace())
        .list(
            &ListParams::default()
                .labels("app.kubernetes.io/name=msgbench,app.kubernetes.io/component=operator"),
        )
        .await?
        .items;
    ensure!(!pods.is_empty(), "no operator pod found");
    Ok(pods.iter().filter_map(pod_node).collect())
}

/// A node marked unschedulable until dropped (or `uncordon`ed).
pub struct Cordoned {
    client: Client,
    node: String,
    done: bool,
}

impl Cordoned {
    pub async fn cordon(client: &Client, node: &str) -> Result<Self> {
        set_unschedulable(client, node, true).await?;
        Ok(Cordoned {
            client: client.clone(),
            node: node.into(),
            done: false,
        })
    }

    pub async fn uncordon(mut self) -> Result<()> {
        self.done = true;
        set_unschedulable(&self.client, &self.node, false).await
    }
}

impl Drop for Cordoned {
    fn drop(&mut self) {
        if !self.done {
            // A failed test must not leave the node out of service for the next one.
            let _ = Command::new("kubectl")
                .args(["uncordon", &self.node])
                .arg("--kubeconfig")
                .arg(kubeconfig_path())
                .status();
        }
    }
}

async fn set_unschedulable(client: &Client, node: &str, on: bool) -> Result<()> {
    let patch = serde_json::json!({"spec": {"unschedulable": on}});
    Api::<Node>::all(client.clone())
        .patch(node, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .with_context(|| format!("setting {node} unschedulable={on}"))?;
    Ok(())
}

/// Node index in the local cluster: `msgbench-local` (the contract's NODE_NAME) is 1,
/// `msgbench-local-N` is N.
pub fn local_index(node: &str) -> Option<u32> {
    match node.strip_prefix(exported::node_name()) {
        Some("") => Some(1),
        Some(rest) => rest.strip_prefix('-')?.parse().ok(),
        None => None,
    }
}

/// A node stopped like a machine that lost power ([`Flavour::stop_node`]: local `e2e/cluster/node
/// stop`, kind `docker pause`) until `start` (or drop: a failed test must not leave it down).
pub struct StoppedNode {
    flavour: Flavour,
    pub name: String,
    started: bool,
}

impl StoppedNode {
    pub fn stop(node: &str) -> Result<Self> {
        let flavour = Flavour::current();
        command::stdout_of(flavour.stop_node(node)?)?;
        Ok(StoppedNode {
            flavour,
            name: node.into(),
            started: false,
        })
    }

    pub fn start(mut self) -> Result<()> {
        self.started = true;
        command::stdout_of(self.flavour.start_node(&self.name)?).map(drop)
    }
}

impl Drop for StoppedNode {
    fn drop(&mut self) {
        if !self.started {
            if let Ok(cmd) = self.flavour.start_node(&self.name) {
                let _ = command::stdout_of(cmd);
            }
        }
    }
}

/// Whether a test may stop `node` on this cluster (never the one running the API server).
pub fn can_stop(node: &str) -> bool {
    Flavour::current().can_stop(node)
}
