//! The pipeline every server kind runs: observe the pods, decide the children
//! (`msgbench_operator_core::server::decide::plan`), apply them, settle the status (`settle`),
//! write it.
//! Level-triggered and idempotent: an unchanged object costs reads only, never writes.

use super::apply::apply_children;
use crate::runtime::context::Context;
use crate::runtime::error::{Error, Result};
use crate::runtime::CONTROLLER_NAME;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::{ListParams, Patch, PatchParams};
use kube::runtime::controller::Action;
use kube::runtime::events::{Event, EventType};
use kube::{Api, ResourceExt};
use msgbench_crds::common::ServerStatus;
use msgbench_operator_core::meta::Owner;
use msgbench_operator_core::server::decide;
use msgbench_operator_core::server::kind::ManagedServerKind;
use msgbench_operator_core::server::status::{self, ServerReport};
use std::sync::Arc;

const NATS_MONITOR_PORT: u16 = 8222;

pub async fn reconcile<K: ManagedServerKind>(obj: Arc<K>, ctx: Arc<Context>) -> Result<Action> {
    let _timer = ctx.metrics.reconcile_started(K::KIND_LABEL);
    let owner = Owner::of(obj.as_ref(), K::KIND_LABEL)
        .ok_or_else(|| Error::MissingNamespace(obj.name_any()))?;
    if obj.meta().deletion_timestamp.is_some() {
        // Children go with the owner through garbage collection: nothing to do.
        return Ok(Action::await_change());
    }
    let previous = obj.server_status();
    // observe: the pods as they are now
    let violations = decide::violations(obj.as_ref(), &owner);
    let pod_list = match decide::pods_readable(&violations) {
        true => {
            Api::<Pod>::namespaced(ctx.client.clone(), &owner.namespace)
                .list(&ListParams::default().labels(&owner.children_selector()))
                .await?
                .items
        }
        false => Vec::new(),
    };
    let now = Time(k8s_openapi::jiff::Timestamp::now());
    // decide what to apply
    let mut plan = decide::plan(
        obj.as_ref(),
        &owner,
        violations,
        &pod_list,
        &ctx.operands,
        &now,
    );
    // act: apply (an invalid spec leaves the running children alone), read the server's report
    let (mut writes, mut rollout_pending) = (0, false);
    // Applied as planned; settling reads the plan's violations, hold and pods, not its children.
    if let Some(children) = plan.children.take() {
        let applied = match apply_children(
            &ctx.client,
            &owner,
            children,
            &ctx.metrics,
            &plan.pods,
            &ctx.created_secrets,
        )
        .await
        {
            Err(e) if e.is_namespace_terminating() => {
                tracing::debug!(name = %owner.name, "namespace terminating; nothing to apply");
                return Ok(Action::await_change());
            }
            other => other?,
        };
        writes = applied.applied + applied.deleted;
        rollout_pending = status::rollout_pending(&applied);
    }
    let report = server_report::<K>(&ctx, &plan).await;
    // settle: the status and when to look again
    let look = decide::LookAgain {
        converging: ctx.requeue.converging,
        stable: ctx.requeue.stable,
    };
    let (new_status, after) = decide::settle(
        obj.as_ref(),
        &owner,
        &plan,
        rollout_pending,
        report,
        look,
        &now,
    );
    if previous != Some(&new_status) {
        patch_status(obj.as_ref(), &ctx, &owner, &new_status).await?;
        publish_transitions(obj.as_ref(), &ctx, previous, &new_status, writes).await;
    } else if writes > 0 {
        publish_transitions(obj.as_ref(), &ctx, previous, &new_status, writes).await;
    }
    ctx.backoff.succeeded(&backoff_key(obj.as_ref()));
    Ok(Action::requeue(after))
}

/// nats-server's own view of its CPUs (`/varz`), from a ready pod, when the kind reports it.
async fn server_report<K: ManagedServerKind>(
    ctx: &Context,
    plan: &decide::ServerPlan,
) -> ServerReport {
    if !(K::REPORTS_VARZ && ctx.observe_varz) {
        return ServerReport::default();
    }
    match plan.pods.ready_pod_ip.as_deref() {
        Some(ip) => super::varz::fetch(ip, NATS_MONITOR_PORT)
            .await
            .unwrap_or_default(),
        None => ServerReport::default(),
    }
}

fn backoff_key<K: ManagedServerKind>(obj: &K) -> String {
    format!(
        "{}/{}/{}",
        K::KIND_LABEL,
        obj.namespace().unwrap_or_default(),
        obj.name_any()
    )
}

async fn patch_status<K: ManagedServerKind>(
    obj: &K,
    ctx: &Context,
    owner: &Owner,
    status: &ServerStatus,
) -> Result<()> {
    let api: Api<K> = Api::namespaced(ctx.client.clone(), &owner.namespace);
    let patch = serde_json::json!({
        "apiVersion": K::api_version(&()),
        "kind": K::kind(&()),
        "status": status,
    });
    let params = PatchParams::apply(CONTROLLER_NAME).force();
    api.patch_status(&obj.name_any(), &params, &Patch::Apply(&patch))
        .await?;
    ctx.metrics.status_written(K::KIND_LABEL);
    Ok(())
}

/// Events on what changed: children written, and each condition that flipped.
async fn publish_transitions<K: ManagedServerKind>(
    obj: &K,
    ctx: &Context,
    previous: Option<&ServerStatus>,
    new: &ServerStatus,
    writes: usize,
) {
    let mut events = Vec::new();
    if writes > 0 {
        events.push(Event {
            type_: EventType::Normal,
            reason: "ChildrenApplied".into(),
            note: Some(format!(
                "{writes} child object(s) created, updated or deleted"
            )),
            action: "Apply".into(),
            secondary: None,
        });
    }
    for c in &new.conditions {
        let before = previous.and_then(|p| p.conditions.iter().find(|o| o.type_ == c.type_));
        if before.is_some_and(|b| b.status == c.status && b.reason == c.reason) {
            continue;
        }
        let bad = (c.type_ == "Degraded" && c.status == "True")
            || (c.type_ == "Ready" && c.status == "False" && before.is_some());
        if c.type_ == "Progressing"
            || (c.type_ == "Degraded" && c.status == "False" && before.is_none())
        {
            continue;
        }
        events.push(Event {
            type_: if bad {
                EventType::Warning
            } else {
                EventType::Normal
            },
            reason: c.reason.clone(),
            note: Some(format!("{}={}: {}", c.type_, c.status, c.message)),
            action: "Reconcile".into(),
            secondary: None,
        });
    }
    let reference = obj.object_ref(&());
    for ev in events {
        if let Err(e) = ctx.recorder.publish(&ev, &reference).await {
            tracing::warn!(error = %e, "could not publish event");
        }
    }
}

/// Errors back off exponentially per object instead of hot-looping.
pub fn error_policy<K: ManagedServerKind>(obj: Arc<K>, err: &Error, ctx: Arc<Context>) -> Action {
    ctx.metrics
        .reconcile_failed(K::KIND_LABEL, err.metric_label());
    tracing::warn!(kind = K::KIND_LABEL, name = %obj.name_any(), error = %err, "reconcile failed");
    let failures = ctx.backoff.failed(&backoff_key(obj.as_ref()));
    Action::requeue(ctx.requeue.error_delay(failures))
}
