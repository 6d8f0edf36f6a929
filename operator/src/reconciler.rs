//! The pipeline every server kind runs: validate -> build -> apply -> status.
//! Level-triggered and idempotent: an unchanged object costs reads only, never writes.

use crate::apply::{apply_children, Children};
use crate::context::{Context, CONTROLLER_NAME};
use crate::error::{Error, Result};
use crate::meta::Owner;
use crate::pod_observer::observe_pods;
use crate::server_kind::ManagedServerKind;
use crate::status::{self, ServerReport, StatusInput};
use crate::validate::SpecViolation;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::{ListParams, Patch, PatchParams};
use kube::runtime::controller::Action;
use kube::runtime::events::{Event, EventType};
use kube::{Api, ResourceExt};
use msgbench_crds::common::ServerStatus;
use msgbench_crds::names::{name_violation, MAX_SERVER_NAME};
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
    let client = &ctx.client;
    let generation = obj.meta().generation;
    let previous = obj.server_status();

    // validate what admission cannot
    let mut violations = obj.validate();
    if let Some(rule) = name_violation(&owner.name, MAX_SERVER_NAME) {
        violations.push(SpecViolation::invalid("metadata.name", rule));
    }

    // observe the pods as they are now
    let pods: Api<Pod> = Api::namespaced(client.clone(), &owner.namespace);
    // A name past the label limit cannot even be listed by: it is only reported.
    let name_ok = !violations.iter().any(|v| v.field == "metadata.name");
    let pod_list = match name_ok {
        true => {
            pods.list(&ListParams::default().labels(&owner.children_selector()))
                .await?
                .items
        }
        false => Vec::new(),
    };
    // Built once up front (pure, cheap) to know the current pod template.
    let desired = violations
        .is_empty()
        .then(|| obj.build(&owner, obj.desired_replicas(), &ctx.operands));
    let template_hash = desired.as_ref().and_then(Children::template_hash);
    let observed = observe_pods(&pod_list, template_hash.as_deref());
    let now = Time(k8s_openapi::jiff::Timestamp::now());
    let hold = if violations.is_empty() {
        status::hold_for(previous, generation, &observed, &now)
    } else {
        None
    };

    // build + apply (an invalid spec leaves the running children alone)
    let mut writes = 0;
    let mut rollout_pending = false;
    if let Some(desired) = desired {
        let mut children = if hold.is_some() {
            obj.build(&owner, 0, &ctx.operands)
        } else {
            desired
        };
        let peer = ctx.runner_peer.as_ref();
        children.network_policies = (children.template())
            .and_then(|t| crate::fault_agent_pod::network_policy(&owner, t, peer))
            .into_iter()
            .collect();
        let applied = match apply_children(client, &owner, children, &ctx.metrics).await {
            Err(e) if e.is_namespace_terminating() => {
                tracing::debug!(name = %owner.name, "namespace terminating; nothing to apply");
                return Ok(Action::await_change());
            }
            other => other?,
        };
        writes = applied.applied + applied.deleted;
        rollout_pending = status::rollout_pending(&applied);
    }

    // status
    let mut report = ServerReport::default();
    if K::REPORTS_VARZ && ctx.observe_varz {
        if let Some(ip) = observed.ready_pod_ip.as_deref() {
            report = crate::varz::fetch(ip, NATS_MONITOR_PORT)
                .await
                .unwrap_or_default();
        }
    }
    let input = StatusInput {
        previous,
        generation,
        desired_replicas: obj.desired_replicas(),
        violations: &violations,
        hold: hold.as_ref(),
        pods: &observed,
        rollout_pending,
        url: obj.client_url(&owner),
        tuning: obj.tuning(),
        resources: obj.resources(),
        configured_threads: obj.configured_threads(),
        server_report: report,
        now: now.clone(),
    };
    let new_status = status::compute(&input);
    if previous != Some(&new_status) {
        patch_status(obj.as_ref(), &ctx, &owner, &new_status).await?;
        publish_transitions(obj.as_ref(), &ctx, previous, &new_status, writes).await;
    } else if writes > 0 {
        publish_transitions(obj.as_ref(), &ctx, previous, &new_status, writes).await;
    }

    ctx.backoff.succeeded(&backoff_key(obj.as_ref()));
    let progressing = new_status
        .conditions
        .iter()
        .any(|c| c.type_ == "Progressing" && c.status == "True");
    // Watches on the CR, children and pods wake us; requeues only catch what they cannot
    // (e.g. nats /varz), and a held or invalid object waits for a spec change.
    let mut after = if progressing {
        ctx.requeue.converging
    } else {
        ctx.requeue.stable
    };
    // A transient kubelet refusal is retried at its time (no watch event says when).
    if let Some(at) = hold.as_ref().and_then(|h| h.retry_at.as_ref()) {
        let wait = at.0.duration_since(now.0).unsigned_abs();
        after = after.min(wait + std::time::Duration::from_secs(1));
    }
    Ok(Action::requeue(after))
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
