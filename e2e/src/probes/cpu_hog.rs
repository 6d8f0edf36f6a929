//! A CPU hog the scheduler cannot see, so the kubelet refuses the next pod with `OutOfcpu`.
//!
//! The kubelet reads static pods from its directory ([`StaticPodDir`]: local, the contract's
//! `STATIC_POD_DIR`; kind, kubeadm's in the node). A static pod in a namespace that does not
//! exist runs, and its CPU request counts in the kubelet's admission, but its mirror pod is
//! refused by the API server: the scheduler never sees it, still binds pods to the node, and
//! the kubelet rejects them. That is the real `OutOfcpu` of a node whose allocations the
//! scheduler's view missed (a static pod, a race).
use crate::cluster::exported;
use crate::cluster::flavour::Flavour;
use crate::node::{millicores, pod_cpu_request};
pub use crate::probes::static_pods::StaticPodDir;
use crate::wait;
use anyhow::{bail, Context, Result};
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{Api, ListParams};
use kube::Client;
use std::time::Duration;

const HOG_NAME: &str = "msgbench-e2e-cpu-hog";
/// Never created: the mirror pod must be refused so the scheduler cannot count the hog.
const HOG_NAMESPACE: &str = "msgbench-e2e-absent";

/// The kubelet's static pod directory of this cluster's node.
pub fn static_pod_dir() -> StaticPodDir {
    StaticPodDir::of(Flavour::current())
}

/// The hog's manifest file in the static pod directory.
const MANIFEST_FILE: &str = "msgbench-e2e-cpu-hog.yaml";

/// A running hog; dropping it removes its manifest (the kubelet then stops it).
pub struct CpuHog {
    dir: StaticPodDir,
    client: Client,
    node: String,
    pub millis: i64,
}

impl CpuHog {
    /// Take every unrequested millicore of the (single) node, as the kubelet counts them, and
    /// wait until the kubelet runs the hog.
    pub async fn take_all(client: &Client, dir: StaticPodDir) -> Result<CpuHog> {
        dir.check()?;
        let node = only_node(client).await?;
        // A pod still terminating would free its CPU after the hog took the rest.
        wait::poll(
            Duration::from_secs(180),
            Duration::from_secs(2),
            "no pod terminating on the node",
            || {
                let (client, node) = (client.clone(), node.clone());
                async move {
                    let pods = kubelet_pods(&client, &node).await?;
                    Ok(
                        (!pods.iter().any(|p| p.metadata.deletion_timestamp.is_some()))
                            .then_some(()),
                    )
                }
            },
        )
        .await?;
        let (allocatable, used) = kubelet_cpu(client, &node).await?;
        let millis = allocatable - used;
        anyhow::ensure!(millis > 0, "no free CPU on {node} to take ({used}m used)");
        let hog = CpuHog {
            dir,
            client: client.clone(),
            node,
            millis,
        };
        (hog.dir).write(&hog.node, MANIFEST_FILE, &manifest(millis))?;
        hog.wait_listed(true).await?;
        Ok(hog)
    }

    /// Remove the manifest and wait until the kubelet no longer runs the hog.
    pub async fn release(self) -> Result<()> {
        self.dir.remove(&self.node, MANIFEST_FILE)?;
        self.wait_listed(false).await
    }

    async fn wait_listed(&self, running: bool) -> Result<()> {
        let what = if running {
            "the kubelet runs the CPU hog"
        } else {
            "the kubelet stopped the CPU hog"
        };
        wait::poll(
            Duration::from_secs(90),
            Duration::from_secs(1),
            what,
            || {
                let (client, node) = (self.client.clone(), self.node.clone());
                async move {
                    let hog_running = kubelet_pods(&client, &node)
                        .await?
                        .iter()
                        .any(|p| is_hog(p) && phase(p) == Some("Running"));
                    Ok((hog_running == running).then_some(()))
                }
            },
        )
        .await
    }
}

impl Drop for CpuHog {
    fn drop(&mut self) {
        let _ = self.dir.remove(&self.node, MANIFEST_FILE);
    }
}

fn manifest(millis: i64) -> String {
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata: {{name: {HOG_NAME}, namespace: {HOG_NAMESPACE}}}\n\
         spec:\n  containers:\n  - name: hog\n    image: {}\n    \
         imagePullPolicy: Never\n    resources: {{requests: {{cpu: {millis}m}}}}\n",
        exported::pause_image()
    )
}

fn is_hog(p: &Pod) -> bool {
    p.metadata.namespace.as_deref() == Some(HOG_NAMESPACE)
}

fn phase(p: &Pod) -> Option<&str> {
    p.status.as_ref()?.phase.as_deref()
}

async fn only_node(client: &Client) -> Result<String> {
    let nodes = Api::<Node>::all(client.clone())
        .list(&ListParams::default())
        .await?
        .items;
    match nodes.as_slice() {
        [n] => Ok(n.metadata.name.clone().unwrap_or_default()),
        _ => bail!(
            "the CPU hog needs a single-node cluster, found {}",
            nodes.len()
        ),
    }
}

/// The pods the kubelet itself knows (static ones included), through the API server's proxy.
async fn kubelet_pods(client: &Client, node: &str) -> Result<Vec<Pod>> {
    let req = http::Request::get(format!("/api/v1/nodes/{node}/proxy/pods"))
        .body(Vec::new())
        .context("building the kubelet /pods request")?;
    let list: k8s_openapi::List<Pod> = client.request(req).await?;
    Ok(list.items)
}

/// (allocatable, requested by pods the kubelet has admitted and not finished), in millicores.
async fn kubelet_cpu(client: &Client, node: &str) -> Result<(i64, i64)> {
    let n = Api::<Node>::all(client.clone()).get(node).await?;
    let allocatable = n
        .status
        .and_then(|s| s.allocatable)
        .and_then(|a| a.get("cpu").map(|q| q.0.clone()))
        .context("node without allocatable cpu")?;
    let mut used = 0;
    for pod in kubelet_pods(client, node).await? {
        if matches!(phase(&pod), Some("Succeeded" | "Failed")) {
            continue;
        }
        used += pod_cpu_request(&pod)?;
    }
    Ok((millicores(&allocatable)?, used))
}
