//! Leader election on the real cluster. First the operator's Lease access is checked with
//! SubjectAccessReviews (its own Lease only; no update, list or delete). With two operator
//! replicas one holds the Lease and the other waits as a ready standby. The leader pod is deleted
//! (grace period 0) while a BenchmarkRun is Running: the Lease moves to a live replica within a
//! bound, and the run still ends Succeeded with exact results, finished by the new leader (a run
//! keeps all its state in status). Even with grace period 0 the kubelet sends SIGTERM (its
//! minimum grace is 2 s), so the leader frees the Lease and whichever replica looks first takes
//! it: the standby, or the pod the ReplicaSet starts in its place. Then the deterministic case:
//! scaling back to one replica removes the leader (pod-deletion-cost) and the long-running
//! standby must take over. The operator goes back to one leading replica at the end, pass or
//! fail: the CPU pinning tests need the node to themselves.
use anyhow::{bail, ensure, Context, Result};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::authorization::v1::{
    ResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec,
};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::events::v1::Event;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::Client;
use msgbench_e2e::chart;
use msgbench_e2e::harness::scale_operator;
use msgbench_e2e::kinds::{self, Kind};
use msgbench_e2e::operator_lease::{
    holder, lease_held_by_one_of, lease_name, one_leading_replica, operator_pods, two_replicas,
    LEASE_SECONDS,
};
use msgbench_e2e::runs::{field as s, finished};
use msgbench_e2e::{probe, run, servers, wait, TestContext};
use serde_json::{json, Value};
use std::time::{Duration, Instant};

/// Stop -> new holder: a standby looks again when the last renewal it saw expires (at most one
/// lease after the stop), then takes the Lease; 2 x the lease is a generous bound.
const TAKEOVER_BOUND: Duration = Duration::from_secs(2 * LEASE_SECONDS as u64);

/// 25 s of load: the leader dies early in it and the standby takes over before it ends.
const RUN: &str = r#"
apiVersion: msgbench.dev/v1alpha1
kind: BenchmarkRun
metadata:
  name: failover
spec:
  target:
    serverRef: {kind: JetStreamCluster, name: js1}
  workload:
    protocol: jetstream
    publishers: 1
    subscribers: 1
    payloadBytes: 128
    ratePerPublisher: 100
    durationSeconds: 25
    drainSeconds: 1
    jetstream: {stream: e2e-failover, replicas: 1, storage: memory, publish: async, maxInFlight: 200, consumer: push}
  runners:
    count: 1
    resources:
      requests: {cpu: 20m, memory: 32Mi}
      limits: {memory: 128Mi}
  barrierTimeoutSeconds: 60
  thresholds:
    - {metric: deliveredRatio, op: ge, value: 0.99}
"#;
const PUBLISHED: u64 = 100 * 25;

#[tokio::test]
async fn a_standby_takes_the_lease_and_finishes_the_run_when_the_leader_dies() {
    run("leader-election", body).await;
}

async fn body(ctx: TestContext) -> Result<()> {
    let outcome = failover(&ctx).await;
    let handover = match &outcome {
        Ok(()) => standby_takes_over_on_scale_down(&ctx.client).await,
        Err(_) => Ok(()),
    };
    // Back to one replica whatever happened, and that one leading, for the tests that follow.
    let restored = one_leading_replica(&ctx.client, Duration::from_secs(60)).await;
    outcome?;
    handover.context("scale-down handover to the standby")?;
    restored.context("restoring one leading operator replica")?;
    Ok(())
}

async fn failover(ctx: &TestContext) -> Result<()> {
    lease_access_is_least_privilege(ctx).await?;
    let (leader, standby) = two_replicas(&ctx.client).await?;
    let lease = Api::<Lease>::namespaced(ctx.client.clone(), chart::namespace())
        .get(lease_name())
        .await?;
    let spec = lease.spec.unwrap_or_default();
    ensure!(
        spec.lease_duration_seconds == Some(LEASE_SECONDS),
        "{spec:?}"
    );
    let transitions = spec.lease_transitions.unwrap_or(0);
    check_roles_served(&ctx.client, &leader, &standby).await?;

    kinds::create(&ctx.client, &ctx.ns, &servers::js_memory("js1", 1, "none")).await?;
    servers::wait_ready(ctx, Kind::JetStreamCluster, "js1", Duration::from_secs(240)).await?;
    kinds::create(&ctx.client, &ctx.ns, RUN).await?;
    let runs = Kind::BenchmarkRun.api(&ctx.client, &ctx.ns);
    wait::until(
        &runs,
        "failover",
        Duration::from_secs(180),
        "BenchmarkRun failover Running",
        |o| o.data.pointer("/status/phase").and_then(Value::as_str) == Some("Running"),
    )
    .await?;
    // The leader announces the phase right after writing it: wait for that, then kill it.
    reported_by(ctx, "Running", &leader).await?;

    let killed = Instant::now();
    Api::<Pod>::namespaced(ctx.client.clone(), chart::namespace())
        .delete(&leader, &DeleteParams::default().grace_period(0))
        .await
        .with_context(|| format!("deleting leader pod {leader}"))?;
    eprintln!("killed leader {leader} (grace 0) with the run Running; standby {standby}");
    let moved = wait::until(
        &Api::<Lease>::namespaced(ctx.client.clone(), chart::namespace()),
        lease_name(),
        TAKEOVER_BOUND,
        &format!(
            "Lease {} taken (leaseTransitions > {transitions}) by a replica other than {leader}",
            lease_name()
        ),
        {
            let leader = leader.clone();
            // The new holder writes holderIdentity, then counts the transition: wait for both.
            move |l: &Lease| {
                holder(l).is_some_and(|h| h != leader)
                    && l.spec.as_ref().and_then(|s| s.lease_transitions) > Some(transitions)
            }
        },
    )
    .await?;
    let new_leader = holder(&moved).context("holder")?;
    let live = operator_pods(&ctx.client).await?;
    ensure!(
        live.contains(&new_leader),
        "new holder {new_leader} is not a live operator pod: {live:?}"
    );
    let takeover = killed.elapsed();
    let phase_then = s(&runs.get("failover").await?, "/status/phase").clone();
    let which = if new_leader == standby {
        "the standby"
    } else {
        "the replacement pod"
    };
    eprintln!(
        "{which} {new_leader} took the Lease {takeover:.1?} after the kill; run phase then: {phase_then}"
    );
    ensure!(
        phase_then == "Running" || phase_then == "Merging",
        "the new leader took over mid-run, but the run was already {phase_then}"
    );

    let done = finished(ctx, "failover", Duration::from_secs(240)).await?;
    ensure!(
        s(&done, "/status/phase") == "Succeeded",
        "failover run should succeed: verdict {} conditions {}",
        s(&done, "/status/verdict"),
        kinds::conditions_summary(&done)
    );
    let result = s(&done, "/status/result");
    ensure!(
        result["published"].as_u64() == Some(PUBLISHED),
        "published, want {PUBLISHED}: {result}"
    );
    ensure!(result["deliveredRatio"].as_f64() >= Some(0.99), "{result}");
    ensure!(
        result["latency"]["count"].as_u64() >= Some(PUBLISHED * 99 / 100),
        "{result}"
    );
    // The old leader released the start (above); the new one wrote the outcome.
    reported_by(ctx, "Succeeded", &new_leader).await?;
    Ok(())
}

/// With two replicas, scale to one so that the leader goes (lowest pod-deletion-cost): the
/// remaining standby, waiting for a while already, takes the freed Lease within the bound.
async fn standby_takes_over_on_scale_down(client: &Client) -> Result<()> {
    let pods = operator_pods(client).await?;
    ensure!(pods.len() == 2, "two operator pods, found {pods:?}");
    let leader = lease_held_by_one_of(client, &pods, Duration::from_secs(60)).await?;
    let standby = pods
        .iter()
        .find(|p| **p != leader)
        .cloned()
        .context("standby")?;
    Api::<Pod>::namespaced(client.clone(), chart::namespace())
        .patch(
            &leader,
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"annotations": {
                "controller.kubernetes.io/pod-deletion-cost": "-1000"}}})),
        )
        .await?;
    let t0 = Instant::now();
    scale_operator(client, 1, Duration::from_secs(180)).await?;
    let left = operator_pods(client).await?;
    ensure!(
        left == [standby.clone()],
        "the leader should have gone, left: {left:?}"
    );
    let remaining = TAKEOVER_BOUND
        .saturating_sub(t0.elapsed())
        .max(Duration::from_secs(1));
    wait::until(
        &Api::<Lease>::namespaced(client.clone(), chart::namespace()),
        lease_name(),
        remaining,
        &format!(
            "Lease {} held by the standby {standby} after the leader was scaled away",
            lease_name()
        ),
        {
            let standby = standby.clone();
            move |l: &Lease| holder(l).as_deref() == Some(standby.as_str())
        },
    )
    .await?;
    eprintln!(
        "scale-down: standby {standby} took the Lease {:.1?} after the leader {leader} was asked to go",
        t0.elapsed()
    );
    Ok(())
}

/// The operator's ServiceAccount may get, patch and create its own Lease, and nothing else on
/// leases (SubjectAccessReviews against the installed RBAC).
async fn lease_access_is_least_privilege(ctx: &TestContext) -> Result<()> {
    let deployment = Api::<Deployment>::namespaced(ctx.client.clone(), chart::namespace())
        .get(chart::operator_deployment())
        .await?;
    let sa = deployment
        .spec
        .and_then(|s| s.template.spec)
        .and_then(|s| s.service_account_name)
        .context("operator ServiceAccount")?;
    let other_ns = ctx.ns.as_str();
    let checks = [
        ("get", chart::namespace(), Some(lease_name()), true),
        ("patch", chart::namespace(), Some(lease_name()), true),
        ("create", chart::namespace(), None, true),
        ("update", chart::namespace(), Some(lease_name()), false),
        ("delete", chart::namespace(), Some(lease_name()), false),
        ("list", chart::namespace(), None, false),
        ("get", chart::namespace(), Some("kube-scheduler"), false),
        ("patch", chart::namespace(), Some("someone-else"), false),
        ("patch", other_ns, Some(lease_name()), false),
        ("create", other_ns, None, false),
    ];
    let reviews = Api::<SubjectAccessReview>::all(ctx.client.clone());
    for (verb, ns, name, want) in checks {
        let review = SubjectAccessReview {
            spec: SubjectAccessReviewSpec {
                user: Some(format!("system:serviceaccount:{}:{sa}", chart::namespace())),
                groups: Some(vec![
                    "system:serviceaccounts".into(),
                    format!("system:serviceaccounts:{}", chart::namespace()),
                ]),
                resource_attributes: Some(ResourceAttributes {
                    group: Some("coordination.k8s.io".into()),
                    resource: Some("leases".into()),
                    verb: Some(verb.into()),
                    namespace: Some(ns.into()),
                    name: name.map(String::from),
                    ..Default::default()
                }),
                ..Default::default()
            },
            ..Default::default()
        };
        let allowed = reviews
            .create(&PostParams::default(), &review)
            .await?
            .status
            .map(|s| s.allowed);
        ensure!(
            allowed == Some(want),
            "operator may {verb} lease {name:?} in {ns}: got {allowed:?}, want {want}"
        );
    }
    Ok(())
}

/// Both replicas are ready and say which they are on /readyz and /metrics.
async fn check_roles_served(client: &Client, leader: &str, standby: &str) -> Result<()> {
    let ready = probe::pod_get(client, chart::namespace(), standby, 8080, "/readyz").await?;
    ensure!(ready.contains("standby"), "standby /readyz: {ready}");
    for (pod, gauge) in [
        (leader, "msgbench_leader 1"),
        (standby, "msgbench_leader 0"),
    ] {
        let metrics = probe::pod_get(client, chart::namespace(), pod, 8080, "/metrics").await?;
        ensure!(
            metrics.lines().any(|l| l == gauge),
            "{pod} /metrics should have `{gauge}`:\n{}",
            wait::truncate(&metrics, 2000)
        );
    }
    Ok(())
}

/// Waits until the event `reason` of run "failover" is reported by operator pod `pod`.
async fn reported_by(ctx: &TestContext, reason: &str, pod: &str) -> Result<()> {
    let api = Api::<Event>::namespaced(ctx.client.clone(), &ctx.ns);
    let what = format!("event {reason} of run failover reported by {pod}");
    wait::poll(
        Duration::from_secs(30),
        Duration::from_millis(500),
        &what,
        || {
            let api = api.clone();
            async move {
                let reporters: Vec<String> = api
                    .list(&ListParams::default())
                    .await?
                    .items
                    .into_iter()
                    .filter(|e| e.reason.as_deref() == Some(reason))
                    .filter(|e| {
                        e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some("failover")
                    })
                    .filter_map(|e| e.reporting_instance)
                    .collect();
                if reporters.iter().any(|r| r == pod) {
                    Ok(Some(()))
                } else {
                    bail!("reported by {reporters:?}")
                }
            }
        },
    )
    .await
}
