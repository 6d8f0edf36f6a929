//! What the operator keeps of finished runs, in memory and in the cluster. Pure: the controller
//! applies [`summary_for_cache`] to every run before its reflector stores it, and its sweep asks
//! [`expired`] which finished runs the retention policy deletes.
//!
//! Memory: a run's status holds its results (up to 1.34 MiB, a soak about 234 KiB), and a
//! cluster keeps finished runs for months. The cache keeps only what the controller's cache
//! readers need (the target lock, the sweeps): the spec, the labels, and the phase, generation
//! and completion time of the status. A reconcile reads the whole run itself, one at a time.
//!
//! Retention, as Kubernetes keeps history (CronJob's history limits, Job's TTL): per benchmark
//! (the `msgbench.dev/benchmark` label, else `generateName`), the newest N succeeded and the
//! newest M failed runs of each namespace are kept; `spec.deleteAfterSeconds` (or the operator's
//! default) deletes a finished run that long after it finished. A run with the annotation
//! `msgbench.dev/retain: "true"`, and a run an unfinished run names as its baseline, are kept.
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::ResourceExt;
use msgbench_crds::benchmark_run::{BenchmarkRun, BenchmarkRunStatus, Phase};
use std::collections::{BTreeMap, BTreeSet};

/// The label that names a benchmark across runs (its trend series, its history).
pub const BENCHMARK_LABEL: &str = "msgbench.dev/benchmark";
/// `"true"`: retention never deletes this run.
pub const RETAIN_ANNOTATION: &str = "msgbench.dev/retain";
/// Written by `kubectl apply`: a copy of the whole object as applied.
const LAST_APPLIED: &str = "kubectl.kubernetes.io/last-applied-configuration";

/// Strips `br` to what the controller's cache readers need: results, conditions, environment,
/// managed fields and `kubectl apply`'s copy go; spec, labels and the phase, generation and
/// completion time stay. What is left is independent of the status's size.
pub fn summary_for_cache(br: &mut BenchmarkRun) {
    br.metadata.managed_fields = None;
    if let Some(a) = br.metadata.annotations.as_mut() {
        a.remove(LAST_APPLIED);
    }
    br.status = br.status.take().map(|st| BenchmarkRunStatus {
        phase: st.phase,
        observed_generation: st.observed_generation,
        completion_time: st.completion_time,
        ..BenchmarkRunStatus::default()
    });
}

/// The run's stable benchmark name: its `msgbench.dev/benchmark` label, else its `generateName`
/// without the trailing `-`; none for a run with neither (its object name is not stable).
pub fn benchmark_name(br: &BenchmarkRun) -> Option<String> {
    if let Some(l) = br.labels().get(BENCHMARK_LABEL).filter(|l| !l.is_empty()) {
        return Some(l.clone());
    }
    let g = br.metadata.generate_name.as_deref()?.trim_end_matches('-');
    (!g.is_empty()).then(|| g.to_string())
}

/// The operator's retention settings (the chart's `retention.*`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RetentionPolicy {
    /// Succeeded runs kept per benchmark and namespace; None: all.
    pub succeeded_history_limit: Option<u32>,
    /// Failed runs kept per benchmark and namespace; None: all.
    pub failed_history_limit: Option<u32>,
    /// Seconds after finishing before a run without `spec.deleteAfterSeconds` is deleted; None:
    /// never.
    pub delete_after_seconds: Option<i64>,
}

impl RetentionPolicy {
    /// Whether this policy can ever delete a run (the sweep skips the work otherwise).
    pub fn deletes_anything(&self) -> bool {
        *self != RetentionPolicy::default()
    }
}

/// Why a run is deleted.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ExpiryReason {
    /// Newer finished runs of its benchmark fill the history limit for its outcome.
    HistoryLimit {
        benchmark: String,
        succeeded: bool,
        limit: u32,
    },
    /// `deleteAfterSeconds` (the run's own, or the operator's default) passed since it finished.
    DeleteAfter { seconds: i64 },
}

impl ExpiryReason {
    /// A metric label value.
    pub fn label(&self) -> &'static str {
        match self {
            ExpiryReason::HistoryLimit { .. } => "historyLimit",
            ExpiryReason::DeleteAfter { .. } => "deleteAfterSeconds",
        }
    }
}

impl std::fmt::Display for ExpiryReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ExpiryReason::HistoryLimit {
                benchmark,
                succeeded,
                limit,
            } => {
                let outcome = if *succeeded { "succeeded" } else { "failed" };
                write!(
                    f,
                    "{limit} newer {outcome} runs of benchmark {benchmark} are kept (retention history limit)"
                )
            }
            ExpiryReason::DeleteAfter { seconds } => {
                write!(f, "finished more than {seconds} s ago (deleteAfterSeconds)")
            }
        }
    }
}

/// A run the policy deletes. `uid` is the delete's precondition: a run created again under the
/// same name is not this one.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Expired {
    pub namespace: String,
    pub name: String,
    pub uid: String,
    pub reason: ExpiryReason,
}

/// A finished run as retention sees it.
struct Finished<'a> {
    br: &'a BenchmarkRun,
    succeeded: bool,
    finished_ms: i64,
}

/// The finished runs among `runs` that `policy` deletes at `now`, in (namespace, name) order.
/// A run is finished when its status describes its current generation and is Succeeded or
/// Failed with a completion time.
pub fn expired(runs: &[&BenchmarkRun], policy: &RetentionPolicy, now: &Time) -> Vec<Expired> {
    let baselines = waited_for_baselines(runs);
    let now_ms = now.0.as_millisecond();
    let mut out: BTreeMap<(String, String), Expired> = BTreeMap::new();
    let mut groups: BTreeMap<(String, String, bool), Vec<Finished>> = BTreeMap::new();
    for br in runs {
        let Some(f) = finished(br) else { continue };
        let ns = br.namespace().unwrap_or_default();
        if retained(br) || baselines.contains(&(ns.clone(), br.name_any())) {
            continue;
        }
        let after = br.spec.delete_after_seconds.or(policy.delete_after_seconds);
        if let Some(seconds) = after.filter(|s| now_ms - f.finished_ms >= s * 1000) {
            let reason = ExpiryReason::DeleteAfter { seconds };
            out.insert((ns.clone(), br.name_any()), expiry(br, reason));
            continue;
        }
        if let Some(b) = benchmark_name(br) {
            groups.entry((ns, b, f.succeeded)).or_default().push(f);
        }
    }
    for ((ns, benchmark, succeeded), mut group) in groups {
        let limit = if succeeded {
            policy.succeeded_history_limit
        } else {
            policy.failed_history_limit
        };
        let Some(limit) = limit else { continue };
        // Newest first; the name breaks ties so the choice is stable.
        group.sort_by_key(|f| (std::cmp::Reverse(f.finished_ms), f.br.name_any()));
        for f in group.iter().skip(limit as usize) {
            let reason = ExpiryReason::HistoryLimit {
                benchmark: benchmark.clone(),
                succeeded,
                limit,
            };
            out.insert((ns.clone(), f.br.name_any()), expiry(f.br, reason));
        }
    }
    out.into_values().collect()
}

fn finished(br: &BenchmarkRun) -> Option<Finished<'_>> {
    let st = br.status.as_ref()?;
    if st.observed_generation != br.metadata.generation {
        return None; // a new spec runs again: not finished
    }
    let succeeded = match st.phase? {
        Phase::Succeeded => true,
        Phase::Failed => false,
        _ => return None,
    };
    let finished_ms = st.completion_time.as_ref()?.0.as_millisecond();
    Some(Finished {
        br,
        succeeded,
        finished_ms,
    })
}

fn retained(br: &BenchmarkRun) -> bool {
    br.annotations().get(RETAIN_ANNOTATION).map(String::as_str) == Some("true")
}

/// (namespace, name) of every run that an unfinished run names in `spec.baselineRef`: its
/// comparison still needs it.
fn waited_for_baselines(runs: &[&BenchmarkRun]) -> BTreeSet<(String, String)> {
    runs.iter()
        .filter(|br| finished(br).is_none())
        .filter_map(|br| {
            let b = br.spec.baseline_ref.as_ref()?;
            Some((br.namespace().unwrap_or_default(), b.name.clone()))
        })
        .collect()
}

fn expiry(br: &BenchmarkRun, reason: ExpiryReason) -> Expired {
    Expired {
        namespace: br.namespace().unwrap_or_default(),
        name: br.name_any(),
        uid: br.uid().unwrap_or_default(),
        reason,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW_S: i64 = 1_800_000_000;

    fn at(s: i64) -> Time {
        Time(k8s_openapi::jiff::Timestamp::from_second(NOW_S + s).unwrap())
    }

    /// A run in `bench`; `phase` with a completion `finished_s` seconds from NOW (negative: ago).
    fn run(
        name: &str,
        benchmark: Option<&str>,
        phase: Option<Phase>,
        finished_s: i64,
    ) -> BenchmarkRun {
        let mut br: BenchmarkRun = serde_norway::from_str(&format!(
            r#"
apiVersion: msgbench.dev/v1alpha1
kind: BenchmarkRun
metadata: {{name: {name}, namespace: bench, uid: uid-{name}, generation: 1}}
spec:
  target: {{serverRef: {{kind: JetStreamCluster, name: js}}}}
  workload: {{protocol: nats, payloadBytes: 16, ratePerPublisher: 10, durationSeconds: 1}}
"#
        ))
        .unwrap();
        if let Some(b) = benchmark {
            br.metadata.labels = Some([(BENCHMARK_LABEL.to_string(), b.to_string())].into());
        }
        br.status = phase.map(|p| BenchmarkRunStatus {
            phase: Some(p),
            observed_generation: Some(1),
            completion_time: matches!(p, Phase::Succeeded | Phase::Failed).then(|| at(finished_s)),
            ..BenchmarkRunStatus::default()
        });
        br
    }

    fn names(runs: &[BenchmarkRun], policy: &RetentionPolicy) -> Vec<String> {
        let refs: Vec<&BenchmarkRun> = runs.iter().collect();
        expired(&refs, policy, &at(0))
            .into_iter()
            .map(|e| e.name)
            .collect()
    }

    fn limits(succeeded: u32, failed: u32) -> RetentionPolicy {
        RetentionPolicy {
            succeeded_history_limit: Some(succeeded),
            failed_history_limit: Some(failed),
            delete_after_seconds: None,
        }
    }

    #[test]
    fn the_cache_keeps_a_summary_whatever_the_status_size() {
        let mut br = run("big", Some("nightly"), Some(Phase::Succeeded), -5);
        let st = br.status.as_mut().unwrap();
        st.target_name = Some("x".repeat(200_000)); // stands for results of any size
        st.job_name = Some("big-runners".into());
        br.metadata.annotations = Some([(LAST_APPLIED.to_string(), "y".repeat(50_000))].into());
        let before = (br.spec.clone(), br.labels().clone());
        summary_for_cache(&mut br);
        let st = br.status.as_ref().unwrap();
        assert_eq!(st.phase, Some(Phase::Succeeded));
        assert_eq!(st.observed_generation, Some(1));
        assert_eq!(st.completion_time, Some(at(-5)));
        assert_eq!(
            (st.target_name.as_ref(), st.job_name.as_ref()),
            (None, None)
        );
        assert_eq!((br.spec.clone(), br.labels().clone()), before);
        let size = serde_json::to_vec(&br).unwrap().len();
        assert!(size < 2048, "the cached summary is {size} B");
    }

    #[test]
    fn history_limits_keep_the_newest_of_each_benchmark_and_outcome() {
        let runs = vec![
            run("n1", Some("nightly"), Some(Phase::Succeeded), -400),
            run("n2", Some("nightly"), Some(Phase::Succeeded), -300),
            run("n3", Some("nightly"), Some(Phase::Succeeded), -200),
            run("f1", Some("nightly"), Some(Phase::Failed), -350),
            run("f2", Some("nightly"), Some(Phase::Failed), -250),
            run("other", Some("weekly"), Some(Phase::Succeeded), -900),
            run("running", Some("nightly"), Some(Phase::Running), 0),
            run("pending", Some("nightly"), None, 0),
        ];
        assert_eq!(names(&runs, &limits(2, 1)), vec!["f1", "n1"]);
        assert_eq!(names(&runs, &limits(1, 5)), vec!["n1", "n2"]);
        assert!(names(&runs, &RetentionPolicy::default()).is_empty());
    }

    #[test]
    fn the_history_limit_names_its_benchmark_and_outcome() {
        let runs = [
            run("a", Some("nightly"), Some(Phase::Failed), -20),
            run("b", Some("nightly"), Some(Phase::Failed), -10),
        ];
        let refs: Vec<&BenchmarkRun> = runs.iter().collect();
        let e = expired(&refs, &limits(1, 1), &at(0));
        assert_eq!(e.len(), 1);
        assert_eq!((e[0].name.as_str(), e[0].uid.as_str()), ("a", "uid-a"));
        assert_eq!(
            e[0].reason.to_string(),
            "1 newer failed runs of benchmark nightly are kept (retention history limit)"
        );
    }

    #[test]
    fn a_run_from_generate_name_counts_as_its_benchmark() {
        let mut runs = vec![
            run("gate-abcde", None, Some(Phase::Succeeded), -20),
            run("gate-fghij", None, Some(Phase::Succeeded), -10),
            run("unnamed", None, Some(Phase::Succeeded), -30),
        ];
        runs[0].metadata.generate_name = Some("gate-".into());
        runs[1].metadata.generate_name = Some("gate-".into());
        // "unnamed" has no stable benchmark name: no history to trim.
        assert_eq!(names(&runs, &limits(1, 1)), vec!["gate-abcde"]);
    }

    #[test]
    fn delete_after_seconds_counts_from_completion_and_the_runs_own_value_wins() {
        let mut runs = vec![
            run("old", None, Some(Phase::Succeeded), -3600),
            run("young", None, Some(Phase::Failed), -60),
            run("own", None, Some(Phase::Succeeded), -120),
        ];
        runs[2].spec.delete_after_seconds = Some(100);
        let policy = RetentionPolicy {
            delete_after_seconds: Some(600),
            ..RetentionPolicy::default()
        };
        assert_eq!(names(&runs, &policy), vec!["old", "own"]);
        // Without an operator default only the run's own setting deletes.
        assert_eq!(names(&runs, &RetentionPolicy::default()), vec!["own"]);
    }

    #[test]
    fn retained_runs_and_baselines_still_awaited_are_kept() {
        let mut runs = vec![
            run("keep", Some("nightly"), Some(Phase::Succeeded), -300),
            run("base", Some("nightly"), Some(Phase::Succeeded), -200),
            run("n3", Some("nightly"), Some(Phase::Succeeded), -100),
            run("cmp", Some("other"), Some(Phase::Running), 0),
        ];
        runs[0].metadata.annotations =
            Some([(RETAIN_ANNOTATION.to_string(), "true".into())].into());
        runs[3].spec.baseline_ref =
            serde_json::from_value(serde_json::json!({"name": "base"})).unwrap();
        assert_eq!(names(&runs, &limits(0, 0)), vec!["n3"]);
        // Once the comparing run has finished, its baseline is history like any other run.
        runs[3].status = run("x", None, Some(Phase::Succeeded), -1).status;
        assert_eq!(names(&runs, &limits(0, 0)), vec!["base", "cmp", "n3"]);
    }

    #[test]
    fn a_status_of_an_older_generation_is_not_finished() {
        let mut runs = vec![
            run("a", Some("nightly"), Some(Phase::Succeeded), -20),
            run("b", Some("nightly"), Some(Phase::Succeeded), -10),
        ];
        runs[0].metadata.generation = Some(2); // edited: it runs again
        assert_eq!(names(&runs, &limits(0, 0)), vec!["b"]);
    }
}
