//! One run loads a target at a time. Pure: which other runs of the namespace stand between a
//! run and its targets, from plain summaries (the observer builds them from the run cache).
//!
//! The rule, in the order runs were applied (creation time, then name): a run may start when
//! no other unfinished run that uses one of its targets either already started (holds it) or
//! was applied earlier and still waits. Two runs that both set `spec.shareTarget` never wait
//! for each other. Ordering by creation makes a stale cache safe: a run's creation reaches the
//! cache before any later run's, and an earlier run blocks a later one whatever phase the
//! cache shows for it; a stale phase only delays.
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use msgbench_crds::benchmark_run::{BenchmarkRun, BenchmarkRunSpec, Phase, Target};
use std::collections::BTreeSet;

/// Another run as the lock sees it.
#[derive(Clone, Debug, PartialEq)]
pub struct RunOnTarget {
    pub name: String,
    pub created: Option<Time>,
    pub targets: BTreeSet<String>,
    pub shares: bool,
    /// Its runners exist and load the target (Starting, Running).
    pub holds: bool,
    /// Its load is over for its current spec (Merging, Succeeded, Failed).
    pub finished: bool,
    /// Its `spec.baselineRef`: a run waiting for this run's verdict must not block this run.
    pub baseline: Option<String>,
}

/// What stands between a run and its targets.
#[derive(Clone, Debug, PartialEq)]
pub enum TargetUse {
    /// Nobody else: start.
    Free,
    /// Only runs that share by request: start alongside them (names).
    Shared(Vec<String>),
    /// Wait: the first run in the way, the target it uses, and whether it already holds it.
    Busy {
        run: String,
        target: String,
        holds: bool,
    },
}

/// The keys a spec's targets are known by: `Kind/name` for a server, the URL for an endpoint.
pub fn target_keys(spec: &BenchmarkRunSpec) -> BTreeSet<String> {
    let variant_targets = spec.variants.iter().filter_map(|v| v.target.as_ref());
    std::iter::once(&spec.target)
        .chain(variant_targets)
        .filter_map(target_key)
        .collect()
}

fn target_key(t: &Target) -> Option<String> {
    if let Some(r) = &t.server_ref {
        return Some(super::faults::server_display(r));
    }
    t.endpoint.as_ref().map(|e| e.url.clone())
}

impl RunOnTarget {
    pub fn of(br: &BenchmarkRun) -> Self {
        let st = br.status.as_ref();
        let current = st.and_then(|s| s.observed_generation) == br.metadata.generation;
        let phase = st.and_then(|s| s.phase).filter(|_| current);
        RunOnTarget {
            name: br.metadata.name.clone().unwrap_or_default(),
            created: br.metadata.creation_timestamp.clone(),
            targets: target_keys(&br.spec),
            shares: br.spec.share_target,
            holds: matches!(phase, Some(Phase::Starting | Phase::Running)),
            finished: matches!(
                phase,
                Some(Phase::Merging | Phase::Succeeded | Phase::Failed)
            ),
            baseline: br.spec.baseline_ref.as_ref().map(|b| b.name.clone()),
        }
    }

    fn applied_before(&self, other: &RunOnTarget) -> bool {
        let key = |r: &RunOnTarget| (r.created.as_ref().map(|t| t.0), r.name.clone());
        key(self) < key(other)
    }
}

/// Who is in `me`'s way among `others` (the namespace's other runs, in any order).
pub fn target_use(me: &RunOnTarget, others: &[RunOnTarget]) -> TargetUse {
    let mut in_way: Vec<&RunOnTarget> = others
        .iter()
        .filter(|o| o.name != me.name && !o.finished)
        .filter(|o| o.baseline.as_deref() != Some(me.name.as_str()))
        .filter(|o| o.holds || o.applied_before(me))
        .filter(|o| !o.targets.is_disjoint(&me.targets))
        .collect();
    // Name the holder first, else the earliest applied.
    in_way.sort_by_key(|o| (!o.holds, o.created.as_ref().map(|t| t.0), o.name.clone()));
    if let Some(o) = in_way.iter().find(|o| !(me.shares && o.shares)) {
        let target = o.targets.intersection(&me.targets).next().cloned();
        return TargetUse::Busy {
            run: o.name.clone(),
            target: target.unwrap_or_default(),
            holds: o.holds,
        };
    }
    if in_way.is_empty() {
        TargetUse::Free
    } else {
        TargetUse::Shared(in_way.iter().map(|o| o.name.clone()).collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(name: &str, created_s: i64, target: &str) -> RunOnTarget {
        RunOnTarget {
            name: name.into(),
            created: Some(Time(
                k8s_openapi::jiff::Timestamp::from_second(1_800_000_000 + created_s).unwrap(),
            )),
            targets: BTreeSet::from([target.to_string()]),
            shares: false,
            holds: false,
            finished: false,
            baseline: None,
        }
    }

    #[test]
    fn runs_applied_together_go_one_after_the_other_in_the_order_applied() {
        let (a, b, c) = (run("a", 0, "js"), run("b", 0, "js"), run("c", 1, "js"));
        let all = [a.clone(), b.clone(), c.clone()];
        // Same second: the name breaks the tie.
        assert_eq!(target_use(&a, &all), TargetUse::Free);
        let busy = |run: &str, holds| TargetUse::Busy {
            run: run.into(),
            target: "js".into(),
            holds,
        };
        assert_eq!(target_use(&b, &all), busy("a", false));
        assert_eq!(target_use(&c, &all), busy("a", false));
        // a started: b still waits (now for a holder); once a finished, b goes, c waits for b.
        let a_holds = RunOnTarget {
            holds: true,
            ..a.clone()
        };
        assert_eq!(target_use(&b, &[a_holds, c.clone()]), busy("a", true));
        let a_done = RunOnTarget {
            finished: true,
            ..a
        };
        assert_eq!(
            target_use(&b, &[a_done.clone(), c.clone()]),
            TargetUse::Free
        );
        assert_eq!(target_use(&c, &[a_done, b]), busy("b", false));
    }

    #[test]
    fn a_holder_blocks_even_an_earlier_run_and_other_targets_do_not() {
        let early = run("early", 0, "js");
        let late_holder = RunOnTarget {
            holds: true,
            ..run("late", 5, "js")
        };
        let elsewhere = RunOnTarget {
            holds: true,
            ..run("x", 0, "mqtt")
        };
        assert!(matches!(
            target_use(&early, &[late_holder, elsewhere.clone()]),
            TargetUse::Busy { holds: true, .. }
        ));
        assert_eq!(target_use(&early, &[elsewhere]), TargetUse::Free);
    }

    #[test]
    fn runs_that_both_share_run_together_and_say_with_whom() {
        let a = RunOnTarget {
            shares: true,
            holds: true,
            ..run("a", 0, "js")
        };
        let s = RunOnTarget {
            shares: true,
            ..run("s", 1, "js")
        };
        let plain = run("p", 2, "js");
        assert_eq!(
            target_use(&s, std::slice::from_ref(&a)),
            TargetUse::Shared(vec!["a".into()])
        );
        // Sharing is mutual: a run that does not share waits for sharers, and sharers for it.
        assert!(matches!(
            target_use(&plain, &[a.clone(), s.clone()]),
            TargetUse::Busy { .. }
        ));
        let plain_first = run("p0", -1, "js");
        assert!(matches!(
            target_use(&s, &[plain_first]),
            TargetUse::Busy { .. }
        ));
    }

    #[test]
    fn a_run_waiting_for_this_runs_verdict_does_not_block_it() {
        let base = run("base", 5, "js");
        let candidate = RunOnTarget {
            baseline: Some("base".into()),
            ..run("cand", 0, "js")
        };
        assert_eq!(target_use(&base, &[candidate]), TargetUse::Free);
    }
}
