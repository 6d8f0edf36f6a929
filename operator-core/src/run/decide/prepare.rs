//! Pending and WaitingForTarget: every target exists, is Ready and has a ready endpoint; the
//! baseline (if any) is not running; then the runners are built. GitOps tools and
//! `kubectl apply -f dir/` create objects in any order, so a missing target is waited for like
//! a not-Ready one, up to `targetReadyTimeoutSeconds` since the run was accepted.
use super::decision::{Decision, Effect, POLL};
use super::ending::{accepted_at, fail, seconds_between};
use crate::run::conditions::{self as cond, Status, NAMES_SHARED, RUNNERS_READY, TARGET_READY};
use crate::run::model::Resolved;
use crate::run::model::{BaselineSeen, Observed, TargetSeen};
use crate::run::runners::build::{self, RunIdentity};
use crate::run::runners::runner_access;
use crate::run::target::stream_sweep;
use crate::run::target::target_lock::{target_use, RunOnTarget, TargetUse};
use crate::run::target::{endpoint_readiness as endpoints, shared_names, target_auth};
use crate::run::{timing, variants};
use msgbench_crds::benchmark_run::{
    BenchmarkRun, Fault, FaultAction, PartitionFrom, Phase, RunFailureReason, MAX_RUN_NAME,
};
use msgbench_crds::names::name_violation;
use std::collections::BTreeMap;
use std::time::Duration;

/// Admission rules, repeated for runs stored before they existed (a name past the label
/// limits, more results than one run may hold).
fn admission_rules_broken(br: &BenchmarkRun) -> Option<String> {
    let name = br.metadata.name.as_deref().unwrap_or_default();
    name_violation(name, MAX_RUN_NAME)
        .map(|rule| format!("metadata.name: {rule}"))
        .or_else(|| br.spec.result_size_violation())
}

/// How often a run waiting for its baseline looks again.
const BASELINE_POLL: Duration = Duration::from_secs(5);

pub fn decide(br: &BenchmarkRun, id: &RunIdentity, obs: &Observed, d: &mut Decision) {
    let g = id.generation;
    if let Some(msg) = admission_rules_broken(br) {
        fail(
            &mut d.status,
            RunFailureReason::InvalidSpec,
            &msg,
            g,
            &obs.now,
        );
        return;
    }
    if !br.spec.faults.is_empty() && !obs.faults_allowed {
        let msg = "spec.faults: this operator does not inject faults: it was installed without \
                   the permission to delete pods (Helm value faults.enabled=true grants it)";
        fail(
            &mut d.status,
            RunFailureReason::FaultsNotAllowed,
            msg,
            g,
            &obs.now,
        );
        return;
    }
    let planned = match variants::plan(&br.spec) {
        Ok(p) => p,
        Err(msg) => {
            // Rules admission cannot express (a variant's merged workload) end the run before
            // any pod exists, naming the field.
            fail(
                &mut d.status,
                RunFailureReason::InvalidSpec,
                &msg,
                g,
                &obs.now,
            );
            return;
        }
    };
    let Some(main) = obs.targets.iter().find(|t| t.variant.is_none()) else {
        let why = "target not resolved yet";
        wait(d, obs, br, RunFailureReason::TargetNotFound, why);
        return;
    };
    if let Ok(r) = &main.resolved {
        d.status.target_name = Some(r.display.clone());
    }
    let mut urls = BTreeMap::new();
    for t in &obs.targets {
        match ready_url(t, &br.spec.faults) {
            Ok(url) => {
                if let Some(v) = &t.variant {
                    urls.insert(v.clone(), url);
                }
            }
            Err(problem) => {
                problem.apply(d, obs, br);
                return;
            }
        }
    }
    let Ok(resolved) = &main.resolved else {
        return; // ready_url reported it
    };
    cond::set(
        &mut d.status.conditions,
        TARGET_READY,
        Status::True,
        "TargetReady",
        &resolved.url,
        Some(g),
        &obs.now,
    );
    if let Some(b) = &obs.baseline {
        if waiting_for_baseline(b, id, obs, d) {
            return;
        }
    }
    if !claim_target(br, obs, d, &resolved.url) {
        return;
    }
    create_runners(br, id, obs, d, resolved, &planned, &urls);
}

/// Whether this run may load its targets now (see `target_lock`); a shared start says so.
fn claim_target(br: &BenchmarkRun, obs: &Observed, d: &mut Decision, url: &str) -> bool {
    let alongside = match target_use(&RunOnTarget::of(br), &obs.on_target) {
        TargetUse::Busy { run, target, holds } => {
            wait_for_target_in_use(d, obs, &run, &target, holds);
            return false;
        }
        TargetUse::Shared(with) => format!("running alongside {}", with.join(", ")),
        TargetUse::Free if br.spec.share_target => "no other run on it at the start".into(),
        TargetUse::Free => return true,
    };
    let msg = format!("{url} (spec.shareTarget: true; {alongside}: figures include their load)");
    let g = d.status.observed_generation;
    let st = &mut d.status.conditions;
    cond::set(
        st,
        TARGET_READY,
        Status::True,
        "TargetShared",
        &msg,
        g,
        &obs.now,
    );
    if let Some(warning) = shared_names::warning(&br.spec, &alongside) {
        cond::set(
            st,
            NAMES_SHARED,
            Status::True,
            NAMES_SHARED,
            &warning,
            g,
            &obs.now,
        );
    }
    true
}

/// Another run loads (or, applied earlier, will load first) one of this run's targets: wait
/// without a deadline of our own — the run in the way is bounded by its own deadline.
fn wait_for_target_in_use(d: &mut Decision, obs: &Observed, run: &str, target: &str, holds: bool) {
    let g = d.status.observed_generation.unwrap_or(0);
    let how = if holds {
        "is running on it"
    } else {
        "was applied earlier and goes first"
    };
    let msg = format!(
        "target {target} is in use: run {run} {how}; this run starts when it is done \
         (set spec.shareTarget: true on both to run together)"
    );
    let st = &mut d.status;
    cond::set(
        &mut st.conditions,
        TARGET_READY,
        Status::False,
        "TargetInUse",
        &msg,
        Some(g),
        &obs.now,
    );
    st.phase = Some(Phase::WaitingForTarget);
    d.requeue = Some(BASELINE_POLL);
}

/// Why a target is not usable yet, as the wait it causes.
enum Problem {
    /// (reason, message) of a missing or not-Ready target.
    Target(RunFailureReason, String),
    /// Ready, but the Service lists no ready endpoint: (url, why).
    Endpoints(String, String),
    /// The server, as specified, cannot serve the run's protocol: no wait fixes that.
    Unfit(String),
}

impl Problem {
    fn apply(self, d: &mut Decision, obs: &Observed, br: &BenchmarkRun) {
        match self {
            Problem::Target(reason, why) => wait(d, obs, br, reason, &why),
            Problem::Endpoints(url, why) => wait_for_endpoints(d, obs, br, &url, &why),
            Problem::Unfit(why) => {
                let g = d.status.observed_generation.unwrap_or(0);
                fail(
                    &mut d.status,
                    RunFailureReason::TargetUnfit,
                    &why,
                    g,
                    &obs.now,
                );
            }
        }
    }
}

/// Why the target's fault agent cannot carry out the run's faults (`crash`, `pause`,
/// `partition`, `powerLoss`), if it cannot.
fn agent_unfit(faults: &[Fault], r: &Resolved) -> Option<String> {
    let by_agent = faults.iter().any(|f| f.action.needs_agent());
    if !by_agent || r.server_labels.is_none() {
        return None;
    }
    let Some(agent) = r.fault_agent else {
        if let Some(why) = &r.fault_agent_refused {
            return Some(format!(
                "spec.faults: actions crash, pause, partition and powerLoss need the target's \
                 fault agent, and {} runs without one: {why}",
                r.display
            ));
        }
        return Some(format!(
            "spec.faults: actions crash, pause, partition and powerLoss need the target's \
             fault agent: set spec.faultInjection.enabled: true on {}",
            r.display
        ));
    };
    let power_losses = faults.iter().enumerate();
    for (i, _) in power_losses.filter(|(_, f)| f.action == FaultAction::PowerLoss) {
        if !agent.power_loss {
            return Some(format!(
                "spec.faults[{i}]: action powerLoss needs the server's store under the lazy file \
                 system: set spec.faultInjection.powerLoss: true on {}",
                r.display
            ));
        }
    }
    let partitions = faults
        .iter()
        .enumerate()
        .filter(|(_, f)| f.action == FaultAction::Partition);
    for (i, f) in partitions {
        if !agent.network {
            return Some(format!(
                "spec.faults[{i}]: action partition needs the fault agent's network faults: set \
                 spec.faultInjection.network: true on {}",
                r.display
            ));
        }
        if f.partition_from.unwrap_or_default() != PartitionFrom::Clients && !agent.peers {
            return Some(format!(
                "spec.faults[{i}].partitionFrom: {} has no peers to be cut off from (its \
                 brokers are independent); use partitionFrom: clients",
                r.display
            ));
        }
    }
    None
}

/// The target's URL when it can take load, else what is missing (variant-prefixed).
fn ready_url(t: &TargetSeen, faults: &[Fault]) -> Result<String, Problem> {
    let prefix = |why: &str| match &t.variant {
        Some(v) => format!("variant {v}: {why}"),
        None => why.to_string(),
    };
    let r: &Resolved = match &t.resolved {
        Err(missing) => {
            let reason = RunFailureReason::TargetNotFound;
            return Err(Problem::Target(reason, prefix(missing)));
        }
        Ok(r) => r,
    };
    if let Some(why) = &r.unfit {
        return Err(Problem::Unfit(prefix(why)));
    }
    if let Some(why) = agent_unfit(faults, r) {
        return Err(Problem::Unfit(prefix(&why)));
    }
    if let Some(why) = &r.not_ready {
        return Err(Problem::Target(
            RunFailureReason::TargetNotReady,
            prefix(why),
        ));
    }
    if let Some(why) = &t.unreachable {
        return Err(Problem::Endpoints(r.url.clone(), prefix(why)));
    }
    Ok(r.url.clone())
}

/// A target is missing or not Ready: wait up to `targetReadyTimeoutSeconds` since acceptance,
/// then fail with `reason`.
fn wait(d: &mut Decision, obs: &Observed, br: &BenchmarkRun, reason: RunFailureReason, why: &str) {
    let g = d.status.observed_generation.unwrap_or(0);
    let limit = i64::from(br.spec.target_ready_timeout_seconds);
    let waited = seconds_between(&accepted_at(&d.status, &obs.now), &obs.now);
    let timed_out = waited > limit;
    let msg = match (timed_out, reason) {
        (false, _) => why.to_string(),
        (true, RunFailureReason::TargetNotFound) => {
            format!("{why}; still missing after {limit}s (targetReadyTimeoutSeconds)")
        }
        (true, _) => format!("{why}; still not Ready after {limit}s (targetReadyTimeoutSeconds)"),
    };
    let st = &mut d.status;
    cond::set(
        &mut st.conditions,
        TARGET_READY,
        Status::False,
        reason.as_str(),
        &msg,
        Some(g),
        &obs.now,
    );
    if timed_out {
        fail(st, reason, &msg, g, &obs.now);
    } else {
        st.phase = Some(Phase::WaitingForTarget);
        d.requeue = Some(POLL);
    }
}

/// The target is Ready but its Service lists no ready endpoint for the run's port: wait (no
/// runner exists yet) up to `targetReadyTimeoutSeconds`, then TargetUnreachable.
fn wait_for_endpoints(d: &mut Decision, obs: &Observed, br: &BenchmarkRun, url: &str, why: &str) {
    let g = d.status.observed_generation.unwrap_or(0);
    let limit = i64::from(br.spec.target_ready_timeout_seconds);
    let waited = seconds_between(&accepted_at(&d.status, &obs.now), &obs.now);
    let w = endpoints::waiting(waited, limit, url, why);
    let st = &mut d.status;
    cond::set(
        &mut st.conditions,
        TARGET_READY,
        Status::False,
        w.reason,
        &w.message,
        Some(g),
        &obs.now,
    );
    if w.failed {
        fail(
            st,
            RunFailureReason::TargetUnreachable,
            &w.message,
            g,
            &obs.now,
        );
    } else {
        st.phase = Some(Phase::WaitingForTarget);
        d.requeue = Some(POLL);
    }
}

/// Never load the same target twice at once: a run waits while its baseline runs. Runs that
/// wait for each other (a baselineRef cycle) would wait until their deadline: they fail at once.
fn waiting_for_baseline(
    b: &BaselineSeen,
    id: &RunIdentity,
    obs: &Observed,
    d: &mut Decision,
) -> bool {
    let g = id.generation;
    let running = b.state.as_ref().is_some_and(|s| s.ended.is_none());
    if !running {
        return false;
    }
    if b.waiting_chain.contains(&id.name) {
        let mut chain = vec![id.name.clone()];
        chain.extend(
            b.waiting_chain
                .iter()
                .take_while(|n| **n != id.name)
                .cloned(),
        );
        chain.push(id.name.clone());
        let msg = format!(
            "spec.baselineRef: runs wait for each other's verdict in a cycle ({}); \
             point one of them at a finished run or remove its baselineRef",
            chain.join(" -> ")
        );
        fail(
            &mut d.status,
            RunFailureReason::BaselineCycle,
            &msg,
            g,
            &obs.now,
        );
        return true;
    }
    let msg = format!("waiting for baseline {} to finish", b.name);
    let st = &mut d.status;
    cond::set(
        &mut st.conditions,
        RUNNERS_READY,
        Status::False,
        "WaitingForBaseline",
        &msg,
        Some(g),
        &obs.now,
    );
    st.phase = Some(Phase::Pending);
    d.requeue = Some(BASELINE_POLL);
    true
}

/// Records the variants' order (once), builds the agent config, ConfigMap and Job.
fn create_runners(
    br: &BenchmarkRun,
    id: &RunIdentity,
    obs: &Observed,
    d: &mut Decision,
    resolved: &Resolved,
    planned: &[variants::PlannedVariant],
    urls: &BTreeMap<String, String>,
) {
    let g = id.generation;
    let st = &mut d.status;
    let mut cfg = build::agent_config(&br.spec, &resolved.url);
    cfg.isolation = Some(build::run_isolation(
        br.metadata.uid.as_deref().unwrap_or_default(),
        g,
    ));
    if !planned.is_empty() {
        if st.schedule.is_empty() {
            let names: Vec<String> = planned.iter().map(|v| v.name.clone()).collect();
            let uid = br.metadata.uid.clone().unwrap_or_default();
            st.schedule = variants::schedule(
                &names,
                br.spec.trials.max(1) as usize,
                variants::seed(&uid, g),
            );
        }
        let shown: std::collections::BTreeSet<String> = planned
            .iter()
            .map(|v| variants::target_display(&br.spec, &v.name))
            .collect();
        st.target_name = Some(shown.into_iter().collect::<Vec<_>>().join(", "));
        cfg.schedule = variants::agent_schedule(&st.schedule, planned, |v| {
            urls.get(&v.name)
                .cloned()
                .unwrap_or_else(|| resolved.url.clone())
        });
    }
    // Every resolved target (the run's and its variants') that requires credentials.
    let (target_auth, auth_env) = target_auth::runner_auth(obs.targets.iter().filter_map(|t| {
        let r = t.resolved.as_ref().ok()?;
        Some((r.url.as_str(), r.auth.as_ref()?))
    }));
    cfg.target_auth = target_auth;
    let (target_tls, volumes, mounts) =
        target_auth::runner_tls(obs.targets.iter().filter_map(|t| {
            let r = t.resolved.as_ref().ok()?;
            Some((r.url.as_str(), r.tls.as_ref()?))
        }));
    cfg.target_tls = target_tls;
    let control = runner_access::control_env(&obs.operands.control_public_key, &id.owner_ref.uid);
    let secrets = target_auth::RunnerSecrets {
        env: control.into_iter().chain(auth_env).collect(),
        volumes,
        mounts,
    };
    let config_map = match build::config_map(id, &cfg) {
        Ok(cm) => cm,
        Err(e) => {
            let msg = format!("the agent config cannot be written: {e}");
            fail(st, RunFailureReason::InvalidSpec, &msg, g, &obs.now);
            return;
        }
    };
    let job = build::job(
        id,
        &br.spec,
        resolved.server_labels.as_ref(),
        timing::job_deadline_seconds(br),
        &secrets,
        &obs.operands,
    );
    if stream_sweep::creates_streams(&br.spec) && !stream_sweep::holds_finalizer(br) {
        d.effects.push(Effect::HoldStreams); // before any runner can make a stream
    }
    d.effects.push(Effect::CreateRunners {
        config_map: Box::new(config_map),
        job: Box::new(job),
    });
    st.job_name = Some(id.job_name());
    st.phase = Some(Phase::Starting);
    st.environment = resolved.environment.clone();
    cond::set(
        &mut st.conditions,
        RUNNERS_READY,
        Status::False,
        "Starting",
        "runner pods starting",
        Some(g),
        &obs.now,
    );
    d.requeue = Some(POLL);
}
