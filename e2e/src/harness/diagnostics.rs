//! What a failed test leaves behind: events, pod descriptions, container logs (also the operator's)
//! and the msgbench objects' status — printed and written under `$MSGBENCH_CACHE/e2e-artifacts/<ns>/`.
use crate::chart;
use crate::kinds::Kind;
use k8s_openapi::api::core::v1::{Event, Pod};
use kube::api::{Api, DynamicObject, ListParams, LogParams};
use kube::Client;
use std::fmt::Write as _;
use std::path::PathBuf;

pub fn artifacts_dir(ns: &str) -> PathBuf {
    crate::cluster::exported::artifacts_dir().join(ns)
}

/// Collect everything about `ns` and the operator; never fails (a dump must not hide the error).
pub async fn dump(client: &Client, ns: &str) -> PathBuf {
    let dir = artifacts_dir(ns);
    let _ = std::fs::create_dir_all(&dir);
    let mut report = String::new();
    let _ = writeln!(report, "===== diagnostics for namespace {ns} =====");
    report += &events(client, ns).await;
    report += &msgbench_objects(client, ns).await;
    report += &pods(client, ns, None, &dir).await;
    let _ = writeln!(report, "===== operator ({}) =====", chart::namespace());
    report += &events(client, chart::namespace()).await;
    report += &pods(
        client,
        chart::namespace(),
        Some(chart::OPERATOR_SELECTOR),
        &dir,
    )
    .await;
    let _ = std::fs::write(dir.join("summary.txt"), &report);
    eprintln!("{report}");
    eprintln!("(diagnostics and full logs written to {})", dir.display());
    dir
}

async fn events(client: &Client, ns: &str) -> String {
    let mut out = format!("--- events in {ns} ---\n");
    match Api::<Event>::namespaced(client.clone(), ns)
        .list(&ListParams::default())
        .await
    {
        Ok(list) => {
            let mut items = list.items;
            items.sort_by_key(|e| e.last_timestamp.clone().map(|t| t.0));
            for e in items {
                let _ = writeln!(
                    out,
                    "{} {} {}/{} x{}: {}",
                    e.type_.as_deref().unwrap_or("?"),
                    e.reason.as_deref().unwrap_or("?"),
                    e.involved_object.kind.as_deref().unwrap_or("?"),
                    e.involved_object.name.as_deref().unwrap_or("?"),
                    e.count.unwrap_or(1),
                    e.message.as_deref().unwrap_or("").trim()
                );
            }
        }
        Err(e) => out += &format!("(cannot list events: {e})\n"),
    }
    out
}

async fn msgbench_objects(client: &Client, ns: &str) -> String {
    let mut out = String::new();
    for kind in [
        Kind::JetStreamCluster,
        Kind::MqttBroker,
        Kind::PubSubServer,
        Kind::BenchmarkRun,
    ] {
        let api: Api<DynamicObject> = kind.api(client, ns);
        if let Ok(list) = api.list(&ListParams::default()).await {
            for o in list.items {
                let _ = writeln!(
                    out,
                    "--- {} {} (generation {:?}) status ---\n{}",
                    kind.name(),
                    o.metadata.name.as_deref().unwrap_or("?"),
                    o.metadata.generation,
                    serde_json::to_string_pretty(
                        o.data.get("status").unwrap_or(&serde_json::Value::Null)
                    )
                    .unwrap_or_default()
                );
            }
        }
    }
    out
}

async fn pods(client: &Client, ns: &str, selector: Option<&str>, dir: &std::path::Path) -> String {
    let api = Api::<Pod>::namespaced(client.clone(), ns);
    let lp = selector
        .map(|s| ListParams::default().labels(s))
        .unwrap_or_default();
    let list = match api.list(&lp).await {
        Ok(l) => l,
        Err(e) => return format!("(cannot list pods in {ns}: {e})\n"),
    };
    let mut out = String::new();
    for pod in list.items {
        let name = pod.metadata.name.clone().unwrap_or_default();
        out += &describe(&pod);
        let spec = pod.spec.clone().unwrap_or_default();
        let mut containers: Vec<String> = spec.containers.iter().map(|c| c.name.clone()).collect();
        containers.extend(
            spec.init_containers
                .unwrap_or_default()
                .into_iter()
                .map(|c| c.name),
        );
        containers.extend(
            spec.ephemeral_containers
                .unwrap_or_default()
                .into_iter()
                .map(|c| c.name),
        );
        let restarted: Vec<String> = pod
            .status
            .as_ref()
            .and_then(|s| s.container_statuses.clone())
            .unwrap_or_default()
            .into_iter()
            .filter(|s| s.restart_count > 0)
            .map(|s| s.name)
            .collect();
        for c in containers {
            for previous in [false, true] {
                if previous && !restarted.contains(&c) {
                    continue;
                }
                let lp = LogParams {
                    container: Some(c.clone()),
                    previous,
                    tail_lines: Some(400),
                    ..Default::default()
                };
                let logs = api
                    .logs(&name, &lp)
                    .await
                    .unwrap_or_else(|e| format!("(no logs: {e})"));
                let file = format!(
                    "{ns}.{name}.{c}{}.log",
                    if previous { ".previous" } else { "" }
                );
                let _ = std::fs::write(dir.join(&file), &logs);
                let tail: Vec<&str> = logs.lines().rev().take(40).collect();
                let _ = writeln!(
                    out,
                    "--- logs {name}/{c}{} (last {} lines; full: {file}) ---",
                    if previous { " (previous)" } else { "" },
                    tail.len()
                );
                for l in tail.into_iter().rev() {
                    let _ = writeln!(out, "{l}");
                }
            }
        }
    }
    out
}

/// The essentials of `kubectl describe pod`.
fn describe(pod: &Pod) -> String {
    let mut out = String::new();
    let name = pod.metadata.name.as_deref().unwrap_or("?");
    let status = pod.status.clone().unwrap_or_default();
    let _ = writeln!(
        out,
        "--- pod {name}: phase {} qos {} node {} ip {} reason {} {}",
        status.phase.as_deref().unwrap_or("?"),
        status.qos_class.as_deref().unwrap_or("?"),
        pod.spec
            .as_ref()
            .and_then(|s| s.node_name.as_deref())
            .unwrap_or("-"),
        status.pod_ip.as_deref().unwrap_or("-"),
        status.reason.as_deref().unwrap_or(""),
        status.message.as_deref().unwrap_or("")
    );
    for c in status.conditions.unwrap_or_default() {
        let _ = writeln!(
            out,
            "  condition {}={} {} {}",
            c.type_,
            c.status,
            c.reason.unwrap_or_default(),
            c.message.unwrap_or_default()
        );
    }
    let all = status
        .container_statuses
        .unwrap_or_default()
        .into_iter()
        .chain(status.init_container_statuses.unwrap_or_default())
        .chain(status.ephemeral_container_statuses.unwrap_or_default());
    for cs in all {
        let _ = writeln!(
            out,
            "  container {} image {} ready {} restarts {} state {} last {}",
            cs.name,
            cs.image,
            cs.ready,
            cs.restart_count,
            serde_json::to_string(&cs.state).unwrap_or_default(),
            serde_json::to_string(&cs.last_state).unwrap_or_default()
        );
    }
    if let Some(spec) = &pod.spec {
        for c in &spec.containers {
            let _ = writeln!(
                out,
                "  spec {} image {} resources {} securityContext {}",
                c.name,
                c.image.as_deref().unwrap_or("?"),
                serde_json::to_string(&c.resources).unwrap_or_default(),
                serde_json::to_string(&c.security_context).unwrap_or_default()
            );
        }
    }
    out
}
