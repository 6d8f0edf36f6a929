//! In-cluster helpers built on the toolbox image (static busybox): one-shot script pods for traffic
//! that must originate inside the cluster, and ephemeral containers that read what a server
//! container really runs with (/proc of its main process, sysctls of its network namespace).
use crate::wait;
use anyhow::{bail, Context, Result};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, LogParams, Patch, PatchParams, PostParams};
use kube::Client;
use serde_json::json;
use std::time::Duration;

fn restricted_security_context() -> serde_json::Value {
    json!({
        "runAsNonRoot": true,
        "runAsUser": 65534,
        "runAsGroup": 65534,
        "allowPrivilegeEscalation": false,
        "readOnlyRootFilesystem": true,
        "capabilities": {"drop": ["ALL"]},
        "seccompProfile": {"type": "RuntimeDefault"}
    })
}

/// Output of a finished script pod.
pub struct ScriptOutcome {
    pub succeeded: bool,
    pub logs: String,
    /// The pod as it finished (its status: QoS class, node, phase).
    pub pod: Pod,
}

/// Run `script` with busybox sh in a fresh pod and wait (up to `timeout`) until it has finished.
/// The script bounds its own runtime; `/tmp` is a small writable emptyDir.
pub async fn run_script(
    client: &Client,
    ns: &str,
    name: &str,
    script: &str,
    timeout: Duration,
) -> Result<ScriptOutcome> {
    run_pod(client, ns, script_pod(name, script, timeout), timeout).await
}

/// The pod [`run_script`] runs: `script` under busybox sh, non-root, read-only root, a small
/// writable `/tmp`, killed after `deadline` (at least 30 s). A test that needs more of the pod
/// (resources, sysctls, labels, volumes) edits this value and runs it with [`run_pod`].
pub fn script_pod(name: &str, script: &str, deadline: Duration) -> serde_json::Value {
    json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": {"app.kubernetes.io/name": "e2e-toolbox", "app.kubernetes.io/part-of": "msgbench"}},
        "spec": {
            "restartPolicy": "Never",
            "automountServiceAccountToken": false,
            "enableServiceLinks": false,
            "terminationGracePeriodSeconds": 1,
            "activeDeadlineSeconds": deadline.as_secs().max(30),
            "containers": [{
                "name": "script",
                "image": crate::cluster::exported::toolbox_image(),
                "imagePullPolicy": "IfNotPresent",
                "command": ["/bin/sh", "-c", script],
                "securityContext": restricted_security_context(),
                "resources": {"requests": {"cpu": "10m", "memory": "16Mi"}, "limits": {"memory": "64Mi"}},
                "volumeMounts": [{"name": "tmp", "mountPath": "/tmp"}]
            }],
            "volumes": [{"name": "tmp", "emptyDir": {"medium": "Memory", "sizeLimit": "16Mi"}}]
        }
    })
}

/// Create `pod` (a [`script_pod`], perhaps edited) and wait (up to `timeout`) until it has finished.
pub async fn run_pod(
    client: &Client,
    ns: &str,
    pod: serde_json::Value,
    timeout: Duration,
) -> Result<ScriptOutcome> {
    let pods = Api::<Pod>::namespaced(client.clone(), ns);
    let pod: Pod = serde_json::from_value(pod)?;
    let name = pod
        .metadata
        .name
        .clone()
        .context("a script pod has a name")?;
    pods.create(&PostParams::default(), &pod)
        .await
        .with_context(|| format!("creating pod {name}"))?;
    let done = wait::until(
        &pods,
        &name,
        timeout,
        &format!("script pod {name} finished"),
        |p: &Pod| {
            matches!(
                p.status.as_ref().and_then(|s| s.phase.as_deref()),
                Some("Succeeded" | "Failed")
            )
        },
    )
    .await?;
    let succeeded = done.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Succeeded");
    let logs = pods
        .logs(&name, &LogParams::default())
        .await
        .with_context(|| format!("logs of {name}, which ended {}", ending(&done)))?;
    Ok(ScriptOutcome {
        succeeded,
        logs,
        pod: done,
    })
}

/// How a finished pod ended: its phase, and the reason and message the kubelet gave (a refused
/// sysctl, say, ends a pod Failed before its container ran).
pub fn ending(pod: &Pod) -> String {
    let status = pod.status.clone().unwrap_or_default();
    let mut ending = status.phase.unwrap_or_else(|| "in no phase".into());
    for part in [status.reason, status.message].into_iter().flatten() {
        ending = format!("{ending}: {part}");
    }
    ending
}

/// Attach an ephemeral toolbox container that shares `target`'s process namespace, run `script`
/// there (in it, PID 1 is the target container's main process), and return its output.
pub async fn inspect_container(
    client: &Client,
    ns: &str,
    pod: &str,
    target: &str,
    name: &str,
    script: &str,
    timeout: Duration,
) -> Result<String> {
    let pods = Api::<Pod>::namespaced(client.clone(), ns);
    let patch = json!({"spec": {"ephemeralContainers": [{
        "name": name,
        "image": crate::cluster::exported::toolbox_image(),
        "imagePullPolicy": "IfNotPresent",
        "targetContainerName": target,
        "command": ["/bin/sh", "-c", script],
        "securityContext": restricted_security_context(),
    }]}});
    pods.patch_ephemeral_containers(pod, &PatchParams::default(), &Patch::Strategic(patch))
        .await
        .with_context(|| format!("adding ephemeral container {name} to {pod}"))?;
    let probe_name = name.to_string();
    let done = wait::until(
        &pods,
        pod,
        timeout,
        &format!("ephemeral container {name} in {pod} finished"),
        move |p: &Pod| {
            p.status
                .as_ref()
                .and_then(|s| s.ephemeral_container_statuses.as_ref())
                .and_then(|cs| cs.iter().find(|c| c.name == probe_name))
                .and_then(|c| c.state.as_ref())
                .is_some_and(|s| s.terminated.is_some())
        },
    )
    .await?;
    let exit = done
        .status
        .and_then(|s| s.ephemeral_container_statuses)
        .and_then(|cs| cs.into_iter().find(|c| c.name == name))
        .and_then(|c| c.state)
        .and_then(|s| s.terminated)
        .map(|t| t.exit_code);
    let lp = LogParams {
        container: Some(name.into()),
        ..Default::default()
    };
    let logs = pods
        .logs(pod, &lp)
        .await
        .with_context(|| format!("logs of {pod}/{name}"))?;
    if exit != Some(0) {
        bail!("ephemeral container {name} in {pod} exited with {exit:?}; output:\n{logs}");
    }
    Ok(logs)
}
