//! The chart's operator on a real cluster: the pod runs with the hardened security context the
//! chart promises, serves /healthz, /readyz and Prometheus /metrics (read through the pod proxy),
//! and its ServiceAccount may do what it needs and nothing sensitive (SubjectAccessReviews).
use anyhow::{ensure, Context, Result};
use k8s_openapi::api::authorization::v1::{
    ResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec,
};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, ListParams, PostParams};
use msgbench_e2e::chart::{self, OPERATOR_SELECTOR};
use msgbench_e2e::{probe, run, TestContext};

#[tokio::test]
async fn operator_runs_hardened_and_serves_health_and_metrics() {
    run("operator-install", body).await;
}

async fn body(ctx: TestContext) -> Result<()> {
    let pods = Api::<Pod>::namespaced(ctx.client.clone(), chart::namespace())
        .list(&ListParams::default().labels(OPERATOR_SELECTOR))
        .await?
        .items;
    let pod = pods
        .iter()
        // A replica that stepped down (leader election) may linger as a finished pod.
        .find(|p| {
            p.metadata.deletion_timestamp.is_none()
                && p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running")
        })
        .context("no running operator pod")?;
    let name = pod.metadata.name.clone().unwrap_or_default();
    let spec = pod.spec.clone().unwrap_or_default();
    let psc = spec.security_context.clone().unwrap_or_default();
    ensure!(
        psc.run_as_non_root == Some(true),
        "operator pod runAsNonRoot"
    );
    ensure!(
        psc.seccomp_profile.map(|s| s.type_).as_deref() == Some("RuntimeDefault"),
        "seccomp RuntimeDefault"
    );
    let c = spec.containers.first().context("no container")?;
    let sc = c.security_context.clone().unwrap_or_default();
    ensure!(
        sc.read_only_root_filesystem == Some(true),
        "read-only root filesystem"
    );
    ensure!(
        sc.allow_privilege_escalation == Some(false),
        "no privilege escalation"
    );
    ensure!(
        sc.capabilities.and_then(|c| c.drop) == Some(vec!["ALL".to_string()]),
        "capabilities drop ALL"
    );

    for path in ["/healthz", "/readyz"] {
        probe::pod_get(&ctx.client, chart::namespace(), &name, 8080, path)
            .await
            .with_context(|| format!("operator {path}"))?;
    }
    let metrics = probe::pod_get(&ctx.client, chart::namespace(), &name, 8080, "/metrics").await?;
    ensure!(
        metrics.contains("reconcile_total"),
        "operator /metrics lacks reconcile_total:\n{metrics}"
    );

    // RBAC: what the operator needs is allowed, what it must not do is denied.
    let sa = format!(
        "system:serviceaccount:{}:{}",
        chart::namespace(),
        spec.service_account_name.clone().unwrap_or_default()
    );
    let (test_ns, key) = (ctx.ns.as_str(), "msgbench-operator-control-key");
    // (group, resource, verb, namespace, name, allowed)
    let checks = [
        ("", "services", "patch", test_ns, None, true),
        ("apps", "statefulsets", "delete", test_ns, None, true),
        (
            "msgbench.dev",
            "jetstreamclusters",
            "watch",
            test_ns,
            None,
            true,
        ),
        ("", "pods", "list", test_ns, None, true),
        // Secrets: reads its own control key by name, in its own namespace, and nothing else;
        // creates JetStream route passwords (never reads them back).
        ("", "secrets", "get", test_ns, None, false),
        ("", "secrets", "get", test_ns, Some(key), false),
        ("", "secrets", "create", test_ns, None, true),
        ("", "secrets", "update", test_ns, None, false),
        ("", "secrets", "delete", test_ns, None, false),
        ("", "secrets", "list", test_ns, None, false),
        ("", "secrets", "get", chart::namespace(), Some(key), true),
        (
            "",
            "secrets",
            "get",
            chart::namespace(),
            Some("another"),
            false,
        ),
        ("", "secrets", "list", chart::namespace(), None, false),
        // The e2e values turn faults.enabled and results.fromPodLogs on (e2e/tests/e2e/faults.rs,
        // runner_control.rs); charts/test.sh proves the default chart grants neither.
        ("", "pods", "delete", test_ns, None, true),
        ("", "pods/log", "get", test_ns, None, true),
        ("", "pods/exec", "create", test_ns, None, false),
        (
            "msgbench.dev",
            "jetstreamclusters",
            "delete",
            test_ns,
            None,
            false,
        ),
        (
            "rbac.authorization.k8s.io",
            "clusterroles",
            "create",
            test_ns,
            None,
            false,
        ),
        ("", "nodes", "get", test_ns, None, false),
    ];
    let reviews = Api::<SubjectAccessReview>::all(ctx.client.clone());
    for (group, resource, verb, namespace, name, want) in checks {
        let review = SubjectAccessReview {
            spec: SubjectAccessReviewSpec {
                user: Some(sa.clone()),
                groups: Some(vec![
                    "system:serviceaccounts".into(),
                    format!("system:serviceaccounts:{}", chart::namespace()),
                ]),
                resource_attributes: Some(ResourceAttributes {
                    group: Some(group.into()),
                    resource: Some(resource.into()),
                    verb: Some(verb.into()),
                    namespace: Some(namespace.into()),
                    name: name.map(str::to_string),
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
            "operator may {verb} {group}/{resource} {name:?} in {namespace}: got {allowed:?}, want {want}"
        );
    }
    Ok(())
}
