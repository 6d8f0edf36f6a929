//! The cluster does what the rest of the suite relies on, shown with real toolbox pods:
//! 1. a pod with requests == limits = 1 CPU is Guaranteed and runs on one exclusive CPU, not CPU 0;
//! 2. a safe sysctl (net.ipv4.tcp_fin_timeout) and an allow-listed unsafe one (net.core.somaxconn)
//!    are applied inside pods;
//! 3. Service DNS resolves from a pod, and a ClusterIP Service reaches a pod;
//! 4. a claim without a storageClassName binds (default StorageClass), a non-root pod writes to it
//!    and a second pod reads it back; on the local cluster the freed PV returns to Available with
//!    an empty directory (e2e/cluster/pv-recycler);
//! 5. kind only (the local cluster's bridge plugin enforces nothing): NetworkPolicy refuses the
//!    pods it does not admit and admits those it names.
//!
//! `make e2e` runs this module first, alone, and stops there when a check fails: every later
//! test would fail for the same reason, less clearly. Each check prints what it saw and what it
//! wanted. The module is in the whole-cluster group (.config/nextest.toml): the CPU check takes
//! the node's whole allocatable CPU.
use anyhow::{bail, ensure, Context, Result};
use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim, Pod, Service};
use k8s_openapi::api::networking::v1::NetworkPolicy;
use k8s_openapi::api::storage::v1::StorageClass;
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use msgbench_e2e::cluster::flavour::Flavour;
use msgbench_e2e::harness::remove_leftover_namespaces;
use msgbench_e2e::{run, servers, toolbox, wait, TestContext};
use serde_json::{json, Value};
use std::os::unix::fs::PermissionsExt;
use std::time::Duration;

/// How long a pod may take to be scheduled and finish (or become Ready).
const TIMEOUT: Duration = Duration::from_secs(90);
/// The page the busybox httpd serves; clients count the copies they fetched.
const PAGE: &str = "msgbench-smoke-ok";
/// The uid the storage check writes as (the images' non-root user).
const UID: u32 = 65532;

/// One check: what was seen and what was wanted, printed when it holds, the test's error when not.
fn check(name: &str, holds: bool, detail: String) -> Result<()> {
    ensure!(holds, "{name}: {detail}");
    eprintln!("PASS {name}: {detail}");
    Ok(())
}

/// Output on one line, for messages.
fn one_line(out: &str) -> String {
    out.split_whitespace().collect::<Vec<_>>().join(" ")
}

#[tokio::test]
async fn a_pod_with_one_whole_cpu_is_guaranteed_and_pinned_to_one_cpu_other_than_0() {
    run("smoke-cpu", |ctx| async move {
        // The pod needs the node's whole allocatable CPU: pods kept by failed tests go first.
        remove_leftover_namespaces(&ctx.client, &ctx.ns, Duration::from_secs(180)).await?;
        let script = "grep Cpus_allowed_list /proc/self/status";
        let mut pod = toolbox::script_pod("pinned", script, TIMEOUT);
        let whole = json!({"cpu": "1", "memory": "32Mi"});
        pod["spec"]["containers"][0]["resources"] = json!({"requests": whole, "limits": whole});
        // A pod that never runs (a disk-pressure taint, say) fails the wait, which shows the
        // pod's conditions, rather than a check on empty output.
        let out = toolbox::run_pod(&ctx.client, &ctx.ns, pod, TIMEOUT).await?;
        let qos = out.pod.status.and_then(|s| s.qos_class).unwrap_or_default();
        let detail = format!("qosClass={qos} (want Guaranteed)");
        check("guaranteed-qos", qos == "Guaranteed", detail)?;
        // "Cpus_allowed_list:\t1": a single number is one CPU; a range or list is shared ones.
        let cpus = out.logs.split_whitespace().nth(1).unwrap_or_default();
        let one =
            cpus.bytes().all(|b| b.is_ascii_digit()) && cpus.parse::<u32>().is_ok_and(|c| c != 0);
        let detail = format!("Cpus_allowed_list={cpus} (want one CPU, not 0)");
        check("exclusive-cpu", one, detail)
    })
    .await;
}

#[tokio::test]
async fn a_safe_and_an_allow_listed_unsafe_sysctl_are_applied_inside_pods() {
    run("smoke-sysctl", |ctx| async move {
        let (safe, somaxconn) = tokio::try_join!(
            sysctl_in_pod(&ctx, "safe-sysctl", "net.ipv4.tcp_fin_timeout", "17"),
            sysctl_in_pod(&ctx, "unsafe-sysctl", "net.core.somaxconn", "2048"),
        )?;
        let detail = format!("net.ipv4.tcp_fin_timeout={safe} (want 17)");
        check("safe-sysctl", safe == "17", detail)?;
        let detail = format!("net.core.somaxconn={somaxconn} (want 2048)");
        check("unsafe-sysctl", somaxconn == "2048", detail)
    })
    .await;
}

/// What `sysctl` reads inside a pod that sets it to `value`.
async fn sysctl_in_pod(ctx: &TestContext, name: &str, sysctl: &str, value: &str) -> Result<String> {
    let script = format!("cat /proc/sys/{}", sysctl.replace('.', "/"));
    let mut pod = toolbox::script_pod(name, &script, TIMEOUT);
    pod["spec"]["securityContext"] = json!({"sysctls": [{"name": sysctl, "value": value}]});
    let out = toolbox::run_pod(&ctx.client, &ctx.ns, pod, TIMEOUT).await?;
    let ending = toolbox::ending(&out.pod);
    ensure!(
        out.succeeded,
        "{name} ({sysctl}={value}) ended {ending}: {}",
        one_line(&out.logs)
    );
    Ok(out.logs.trim().to_string())
}

#[tokio::test]
async fn service_dns_resolves_to_the_cluster_ip_and_the_service_reaches_its_pod() {
    run("smoke-dns", |ctx| async move {
        httpd(&ctx, "web").await?;
        let ip = expose(&ctx, "web").await?;
        let host = format!("web.{}.svc.cluster.local", ctx.ns);
        let (by_name, by_ip) = (http_get_retrying(&host, 80), http_get_retrying(&ip, 80));
        let script = format!("nslookup {host}; echo '--- via'; {by_name}; echo '--- via'; {by_ip}");
        let out = toolbox::run_script(&ctx.client, &ctx.ns, "client", &script, TIMEOUT).await?;
        let mut parts = out.logs.split("--- via");
        let lookup = parts.next().unwrap_or_default();
        let detail = format!("nslookup {host}: {} (want {ip})", one_line(lookup));
        // A whole word: the DNS server's own address, also printed, may start with the ClusterIP.
        let resolved = lookup.split_whitespace().any(|w| w == ip);
        check("service-dns", resolved, detail)?;
        let mut pages = || parts.next().map_or(0, |p| p.matches(PAGE).count());
        let (via_name, via_ip) = (pages(), pages());
        let reached = via_name == 1 && via_ip == 1;
        let mut detail =
            format!("HTTP via {host}: {via_name} page(s), via {ip}: {via_ip} (want 1 each)");
        if !reached {
            let answers = out.logs.split_once("--- via").map_or("", |(_, a)| a);
            detail = format!("{detail}; the client saw: {}", one_line(answers));
        }
        check("clusterip-service", reached, detail)
    })
    .await;
}

/// A script that fetches `/` from `host:port` over HTTP, waiting up to `secs` for an answer.
/// (busybox wget from Debian's busybox-static segfaults; nc speaks the HTTP needed here.)
fn http_get(host: &str, port: u16, secs: u32) -> String {
    format!("printf 'GET / HTTP/1.0\\r\\n\\r\\n' | nc -w {secs} {host} {port}")
}

/// [`http_get`] again each second, for up to 20 s, until it brings [`PAGE`]; prints the last
/// answer. kube-proxy programs a new Service asynchronously: until it has, a connection to the
/// ClusterIP is refused ("No route to host"), though the pod behind it is Ready.
fn http_get_retrying(host: &str, port: u16) -> String {
    let get = http_get(host, port, 5);
    format!(
        "end=$(($(date +%s) + 20)); while :; do out=\"$({get} 2>&1)\"; \
         case \"$out\" in *{PAGE}*) break ;; esac; [ $(date +%s) -lt $end ] || break; sleep 1; \
         done; echo \"$out\""
    )
}

/// A busybox httpd serving [`PAGE`] on port 8080 in a pod labelled `app=<name>`, once Ready.
async fn httpd(ctx: &TestContext, name: &str) -> Result<Pod> {
    let script = format!(
        "mkdir -p /tmp/www && echo {PAGE} > /tmp/www/index.html && exec httpd -f -p 8080 -h /tmp/www"
    );
    // The deadline bounds what a failed test's kept namespace holds on to: the CPU check needs it.
    let mut pod = toolbox::script_pod(name, &script, Duration::from_secs(300));
    pod["metadata"]["labels"]["app"] = json!(name);
    let pods = Api::<Pod>::namespaced(ctx.client.clone(), &ctx.ns);
    pods.create(&PostParams::default(), &serde_json::from_value(pod)?)
        .await
        .with_context(|| format!("creating pod {name}"))?;
    let ready = |p: &Pod| {
        (p.status.as_ref().and_then(|s| s.conditions.as_ref()))
            .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
    };
    wait::until(
        &pods,
        name,
        TIMEOUT,
        &format!("httpd pod {name} Ready"),
        ready,
    )
    .await
}

/// A ClusterIP Service `name` (port 80) in front of the pods labelled `app=<name>` (port 8080);
/// returns its ClusterIP.
async fn expose(ctx: &TestContext, name: &str) -> Result<String> {
    let svc: Service = serde_json::from_value(json!({
        "metadata": {"name": name},
        "spec": {"selector": {"app": name}, "ports": [{"port": 80, "targetPort": 8080}]}
    }))?;
    let svc = Api::<Service>::namespaced(ctx.client.clone(), &ctx.ns)
        .create(&PostParams::default(), &svc)
        .await
        .with_context(|| format!("creating Service {name}"))?;
    svc.spec
        .and_then(|s| s.cluster_ip)
        .with_context(|| format!("Service {name} has no ClusterIP"))
}

#[tokio::test]
async fn a_claim_binds_by_default_keeps_a_non_root_write_and_its_volume_is_recycled() {
    run("smoke-storage", |ctx| async move {
        let pv = claim_binds_and_persists(&ctx).await?;
        release_claim(&ctx).await?;
        // Only the local cluster recycles (kind's local-path provisioner deletes the PV instead).
        if Flavour::current() == Flavour::Local {
            pv_recycled(&ctx, &pv).await?;
        }
        Ok(())
    })
    .await;
}

/// The claim "data" binds with the default StorageClass, uid 65532 writes to it and a second pod
/// reads it back; returns the PV.
async fn claim_binds_and_persists(ctx: &TestContext) -> Result<String> {
    let defaults = default_storage_classes(ctx).await?;
    let claims = Api::<PersistentVolumeClaim>::namespaced(ctx.client.clone(), &ctx.ns);
    let claim = serde_json::from_value(json!({
        "metadata": {"name": "data"},
        "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "64Mi"}}}
    }))?;
    claims
        .create(&PostParams::default(), &claim)
        .await
        .context("creating claim data")?;
    let write = "id -u; echo \"written-by-$(id -u)\" > /data/probe && mkdir /data/sub && \
                 echo ok > /data/sub/f && cat /data/probe";
    let wrote = toolbox::run_pod(&ctx.client, &ctx.ns, claim_pod("writer", write), TIMEOUT).await?;

    let claim = claims.get("data").await.context("reading claim data")?;
    let phase = claim.status.and_then(|s| s.phase).unwrap_or_default();
    let spec = claim.spec.unwrap_or_default();
    let class = spec.storage_class_name.unwrap_or_default();
    let pv = spec.volume_name.unwrap_or_default();
    let by_default = phase == "Bound" && defaults.len() == 1 && defaults[0] == class;
    let detail = format!(
        "claim without storageClassName: {phase} {class} (want Bound to the default \
         StorageClass: {defaults:?}), PV {pv:?}"
    );
    check("pvc-binds", by_default, detail)?;
    let last = wrote.logs.lines().last().unwrap_or_default();
    let detail = format!(
        "uid {UID} wrote /data: {} (want written-by-{UID} last)",
        one_line(&wrote.logs)
    );
    check(
        "pvc-nonroot-write",
        last == format!("written-by-{UID}"),
        detail,
    )?;

    let read = "cat /data/probe /data/sub/f";
    let read = toolbox::run_pod(&ctx.client, &ctx.ns, claim_pod("reader", read), TIMEOUT).await?;
    let seen = one_line(&read.logs);
    let want = format!("written-by-{UID} ok");
    check(
        "pvc-persists",
        seen == want,
        format!("a second pod read: {seen} (want {want})"),
    )?;
    Ok(pv)
}

/// The StorageClasses annotated as the default.
async fn default_storage_classes(ctx: &TestContext) -> Result<Vec<String>> {
    let classes = Api::<StorageClass>::all(ctx.client.clone())
        .list(&ListParams::default())
        .await?;
    let is_default = |sc: &StorageClass| {
        (sc.metadata.annotations.as_ref())
            .and_then(|a| a.get("storageclass.kubernetes.io/is-default-class"))
            .is_some_and(|v| v == "true")
    };
    Ok((classes.items.into_iter())
        .filter(is_default)
        .filter_map(|sc| sc.metadata.name)
        .collect())
}

/// A toolbox pod running `script` as uid 65532 with the claim "data" at /data.
fn claim_pod(name: &str, script: &str) -> Value {
    let mut pod = toolbox::script_pod(name, script, TIMEOUT);
    let container = &mut pod["spec"]["containers"][0];
    container["securityContext"]["runAsUser"] = json!(UID);
    container["securityContext"]["runAsGroup"] = json!(UID);
    let mounts = container["volumeMounts"]
        .as_array_mut()
        .expect("a script pod mounts /tmp");
    mounts.push(json!({"name": "data", "mountPath": "/data"}));
    let volumes = pod["spec"]["volumes"]
        .as_array_mut()
        .expect("a script pod has volumes");
    volumes.push(json!({"name": "data", "persistentVolumeClaim": {"claimName": "data"}}));
    pod
}

/// Delete the claim's pods, then the claim (its protection finalizer waits for the pods).
async fn release_claim(ctx: &TestContext) -> Result<()> {
    let pods = Api::<Pod>::namespaced(ctx.client.clone(), &ctx.ns);
    for name in ["writer", "reader"] {
        pods.delete(name, &DeleteParams::default()).await?;
        wait::until_deleted(&pods, name, Duration::from_secs(60)).await?;
    }
    let claims = Api::<PersistentVolumeClaim>::namespaced(ctx.client.clone(), &ctx.ns);
    claims.delete("data", &DeleteParams::default()).await?;
    wait::until_deleted(&claims, "data", Duration::from_secs(60)).await
}

/// The local cluster's freed PV is Available again, claimed by nobody, and its hostPath
/// directory (on this machine: the local cluster's node is this host) is empty with mode 777.
async fn pv_recycled(ctx: &TestContext, name: &str) -> Result<()> {
    let pvs = Api::<PersistentVolume>::all(ctx.client.clone());
    let available = |pv: &PersistentVolume| {
        pv.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Available")
    };
    let what = "pv-recycled: the PV Available again after its claim's deletion";
    let pv = wait::until(&pvs, name, TIMEOUT, what, available).await?;
    let spec = pv.spec.unwrap_or_default();
    let claim = spec.claim_ref.and_then(|c| c.name).unwrap_or_default();
    let path = spec.host_path.map(|h| h.path).unwrap_or_default();
    let entries = std::fs::read_dir(&path).map(|d| d.count());
    let mode = std::fs::metadata(&path).map(|m| m.permissions().mode() & 0o7777);
    let empty = entries.as_ref().is_ok_and(|n| *n == 0) && mode.as_ref().is_ok_and(|m| *m == 0o777);
    let entries = entries.map_or_else(|e| e.to_string(), |n| n.to_string());
    let mode = mode.map_or_else(|e| e.to_string(), |m| format!("{m:o}"));
    let detail = format!(
        "after the claim's deletion {name} is Available claimRef={claim:?}; {path} holds \
         {entries} entries, mode {mode} (want no claimRef, 0 entries, mode 777)"
    );
    check("pv-recycled", claim.is_empty() && empty, detail)
}

#[tokio::test]
async fn network_policy_refuses_a_stranger_and_admits_a_friend() {
    if let Some(why) = Flavour::current().network_policy_unenforced() {
        eprintln!("skipped: {why}");
        return;
    }
    run("smoke-netpol", netpol).await;
}

async fn netpol(ctx: TestContext) -> Result<()> {
    let ip = servers::pod_ip(&httpd(&ctx, "guarded").await?)?;
    guard(&ctx, "guarded").await?;
    // The policy is programmed asynchronously: a stranger must be refused within the deadline.
    let (ctx, ip) = (&ctx, ip.as_str());
    let mut n = 0;
    let refused = wait::poll(
        Duration::from_secs(60),
        Duration::from_secs(1),
        "netpol-deny",
        || {
            n += 1;
            let name = format!("stranger-{n}");
            async move {
                let got = pages_fetched(ctx, &name, "stranger", ip).await?;
                let detail = format!(
                    "a pod the policy does not admit fetched {got} page(s) from {ip} (want 0)"
                );
                if got != 0 {
                    bail!(detail);
                }
                Ok(Some(detail))
            }
        },
    )
    .await?;
    check("netpol-deny", true, refused)?;
    let got = pages_fetched(ctx, "friend", "friend", ip).await?;
    let detail = format!("a pod the policy admits fetched {got} page(s) from {ip} (want 1)");
    check("netpol-allow", got == 1, detail)
}

/// Ingress to the pods labelled `app=<app>` only from pods labelled role=friend.
async fn guard(ctx: &TestContext, app: &str) -> Result<()> {
    let policy: NetworkPolicy = serde_json::from_value(json!({
        "metadata": {"name": "guard"},
        "spec": {"podSelector": {"matchLabels": {"app": app}}, "policyTypes": ["Ingress"],
                 "ingress": [{"from": [{"podSelector": {"matchLabels": {"role": "friend"}}}]}]}
    }))?;
    Api::<NetworkPolicy>::namespaced(ctx.client.clone(), &ctx.ns)
        .create(&PostParams::default(), &policy)
        .await
        .context("creating NetworkPolicy guard")?;
    Ok(())
}

/// How many pages a pod labelled role=`role` fetched from `ip`:8080 (0 when refused).
async fn pages_fetched(ctx: &TestContext, name: &str, role: &str, ip: &str) -> Result<usize> {
    let script = format!(
        "{} 2>/dev/null | grep -c {PAGE} || true",
        http_get(ip, 8080, 3)
    );
    let mut pod = toolbox::script_pod(name, &script, TIMEOUT);
    // The label must be on the pod before it connects: in the manifest, not set afterwards.
    pod["metadata"]["labels"]["role"] = json!(role);
    let out = toolbox::run_pod(&ctx.client, &ctx.ns, pod, TIMEOUT).await?;
    (out.logs.trim().parse())
        .with_context(|| format!("{name} printed {:?}, not a count of pages", out.logs))
}
