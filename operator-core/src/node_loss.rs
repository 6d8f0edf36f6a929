//! A pod whose node stopped reporting, read from the pod alone. When the node lifecycle
//! controller loses a node (no status for its grace period), it flips the Ready condition of
//! every pod there to False and touches nothing else; the kubelet, the only other writer,
//! always writes Ready together with the container statuses. So a running pod that is not
//! Ready while every container says it is ready sits on a node that went silent. (The
//! operator needs no `get` on Nodes for this, and its RBAC has none.)
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::ResourceExt;

#[derive(Clone, Debug, PartialEq)]
pub struct NodeLoss {
    pub pod: String,
    pub node: String,
    /// When the node controller marked the pod not ready.
    pub since: Option<Time>,
}

impl NodeLoss {
    pub fn describe(&self) -> String {
        let since = self
            .since
            .as_ref()
            .map_or(String::new(), |t| format!(" at {}", t.0));
        format!(
            "pod {} on node {}: the node stopped reporting{since} (the node controller marked \
             its pods not ready)",
            self.pod, self.node
        )
    }
}

/// `Some` when `p` runs on a node the control plane lost (see the module comment).
pub fn node_lost(p: &Pod) -> Option<NodeLoss> {
    let node = p.spec.as_ref()?.node_name.clone()?;
    let st = p.status.as_ref()?;
    if p.metadata.deletion_timestamp.is_some() || st.phase.as_deref() != Some("Running") {
        return None;
    }
    let ready = st
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == "Ready")?;
    let containers = st.container_statuses.as_deref().unwrap_or_default();
    let kubelet_says_ready = !containers.is_empty()
        && containers
            .iter()
            .all(|c| c.ready && c.state.as_ref().is_some_and(|s| s.running.is_some()));
    (ready.status == "False" && kubelet_says_ready).then(|| NodeLoss {
        pod: p.name_any(),
        node,
        since: ready.last_transition_time.clone(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod(ready: &str, container_ready: bool, running: bool) -> Pod {
        let state = if running {
            json!({"running": {"startedAt": "2026-11-25T01:00:00Z"}})
        } else {
            json!({"terminated": {"exitCode": 1}})
        };
        serde_json::from_value(json!({
            "metadata": {"name": "run-a-0-x"},
            "spec": {"nodeName": "msgbench-local-3", "containers": [{"name": "runner"}]},
            "status": {
                "phase": "Running",
                "conditions": [{"type": "Ready", "status": ready,
                                "lastTransitionTime": "2026-11-25T01:02:03Z"}],
                "containerStatuses": [{"name": "runner", "ready": container_ready,
                    "restartCount": 0, "image": "i", "imageID": "", "state": state}]
            }
        }))
        .unwrap()
    }

    #[test]
    fn ready_flipped_behind_the_kubelets_back_is_a_lost_node() {
        let loss = node_lost(&pod("False", true, true)).expect("lost");
        assert_eq!(loss.node, "msgbench-local-3");
        assert_eq!(
            loss.describe(),
            "pod run-a-0-x on node msgbench-local-3: the node stopped reporting at \
             2026-11-25T01:02:03Z (the node controller marked its pods not ready)"
        );
    }

    #[test]
    fn what_the_kubelet_itself_reports_is_not() {
        // Ready, or not ready because a container is not (a failing probe, a restart).
        assert_eq!(node_lost(&pod("True", true, true)), None);
        assert_eq!(node_lost(&pod("False", false, true)), None);
        assert_eq!(node_lost(&pod("False", true, false)), None);
    }
}
