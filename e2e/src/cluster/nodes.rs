//! The nodes of a multi-node cluster (`NODES=3 make e2e`; e2e/cluster/nodes.sh): which exist,
//! where pods run, a node cordoned for a while, and a node stopped and started again through
//! `e2e/cluster/node` (local cluster only).
use crate::cluster::{self, contract};
use anyhow::{bail, ensure, Context, Result};
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{Api, ListParams, Patch, PatchParams};
use kube::Client;
use std::process::Command;

/// The zone label the cluster scripts (local and kind) put on every node.
pub const ZONE_LABEL: &str = contract::ZONE_LABEL;

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

pub fn zone(n: &Node) -> Option<String> {
    n.metadata.labels.as_ref()?.get(ZONE_LABEL).cloned()
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
    let pods = Api::<Pod>::namespaced(client.clone(), crate::chart::NAMESPACE)
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
    match node.strip_prefix(contract::NODE_NAME) {
        Some("") => Some(1),
        Some(rest) => rest.strip_prefix('-')?.parse().ok(),
        None => None,
    }
}

/// A local-cluster node stopped (`e2e/cluster/node stop`: traffic dropped, kubelet, pods and
/// runtime killed) until `start` (or drop: a failed test must not leave it down).
pub struct StoppedNode {
    index: u32,
    pub name: String,
    started: bool,
}

impl StoppedNode {
    pub fn stop(node: &str) -> Result<Self> {
        let index = local_index(node).with_context(|| format!("{node} is not a local node"))?;
        if contract::cluster() != "local" {
            bail!("stopping a node needs the local cluster (CLUSTER=local)");
        }
        script("stop", index)?;
        Ok(StoppedNode {
            index,
            name: node.into(),
            started: false,
        })
    }

    pub fn start(mut self) -> Result<()> {
        self.started = true;
        script("start", self.index)
    }
}

impl Drop for StoppedNode {
    fn drop(&mut self) {
        if !self.started {
            let _ = script("start", self.index);
        }
    }
}

fn script(verb: &str, index: u32) -> Result<()> {
    let path = cluster::repo_root().join("e2e/cluster/node");
    let out = Command::new(&path)
        .args([verb, &index.to_string()])
        .output()
        .with_context(|| format!("running {}", path.display()))?;
    ensure!(
        out.status.success(),
        "e2e/cluster/node {verb} {index}: {}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    Ok(())
}
