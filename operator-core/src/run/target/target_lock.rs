//! One run loads a target at a time, across every namespace the operator watches. Pure: which
//! other runs stand between a run and its targets, from plain summaries (the observer builds
//! them from the run cache).
//!
//! A target is known by the server it reaches, however a run names it: a `serverRef` and an
//! endpoint URL at that server's Service are one target (`target_key`), so a run by reference
//! and a run by URL take turns, as do runs in two namespaces at one server.
//!
//! The rule, in the order runs were applied (creation time, then namespace and name): a run may
//! start when no other unfinished run that uses one of its targets either already started
//! (holds it) or was applied earlier and still waits. Two runs that both set
//! `spec.shareTarget` never wait for each other. Ordering by creation makes a stale cache safe:
//! a run's creation reaches the cache before any later run's, and an earlier run blocks a later
//! one whatever phase the cache shows for it; a stale phase only delays.
use crate::run::target::endpoint_readiness::service_of_host;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use msgbench_crds::benchmark_run::{BenchmarkRun, BenchmarkRunSpec, Phase, Target};
use runner_api::target::TargetUrl;
use std::collections::BTreeSet;

/// Another run as the lock sees it.
#[derive(Clone, Debug, PartialEq)]
pub struct RunOnTarget {
    pub namespace: String,
    pub name: String,
    pub created: Option<Time>,
    /// Its targets' keys (`target_keys`).
    pub targets: BTreeSet<String>,
    pub shares: bool,
    /// Its runners exist and load the target (Starting, Running).
    pub holds: bool,
    /// Its load is over for its current spec (Merging, Succeeded, Failed).
    pub finished: bool,
    /// Its `spec.baselineRef` (same namespace): a run waiting for this run's verdict must not
    /// block this run.
    pub baseline: Option<String>,
}

/// What stands between a run and its targets.
#[derive(Clone, Debug, PartialEq)]
pub enum TargetUse {
    /// Nobody else: start.
    Free,
    /// Only runs that share by request: start alongside them (names, `namespace/name` when in
    /// another namespace).
    Shared(Vec<String>),
    /// Wait: the first run in the way (named as in `Shared`), the target it uses, and whether
    /// it already holds it.
    Busy {
        run: String,
        target: String,
        holds: bool,
    },
}

/// The keys a spec's targets are known by, for a run in `namespace` (see `target_key`).
pub fn target_keys(spec: &BenchmarkRunSpec, namespace: &str) -> BTreeSet<String> {
    let variant_targets = spec.variants.iter().filter_map(|v| v.target.as_ref());
    std::iter::once(&spec.target)
        .chain(variant_targets)
        .filter_map(|t| target_key(t, namespace))
        .collect()
}

/// `namespace/service` for a server in this cluster: a server object's client Service has the
/// object's name; an endpoint URL names it as `service.namespace.svc[.domain]`,
/// `service.namespace` or `service` (the run's namespace), the way cluster DNS resolves them.
/// Anything else (an address, a host outside the cluster) is its `host:port`.
fn target_key(t: &Target, namespace: &str) -> Option<String> {
    if let Some(r) = &t.server_ref {
        return Some(format!("{namespace}/{}", r.name));
    }
    t.endpoint.as_ref().map(|e| endpoint_key(&e.url, namespace))
}

/// The URL as the runner reads it (`TargetUrl`), its host as the endpoint check resolves it to
/// a Service (`service_of_host`); a pod under a server's headless Service
/// (`pod.<name>-headless.ns.svc`, how msgbench names a JetStreamCluster's routes) is that
/// server's.
fn endpoint_key(url: &str, namespace: &str) -> String {
    let Ok(t) = TargetUrl::parse(url) else {
        return url.to_string();
    };
    let host = t.host.to_ascii_lowercase();
    let under_headless = host
        .split_once('.')
        .and_then(|(_, rest)| rest.split_once("-headless."))
        .filter(|(server, _)| !server.contains('.'))
        .map(|(server, rest)| format!("{server}.{rest}"));
    match service_of_host(under_headless.as_deref().unwrap_or(&host), namespace) {
        Some((ns, service)) => format!("{ns}/{service}"),
        None if host.contains(':') => format!("[{host}]:{}", t.port),
        None => format!("{host}:{}", t.port),
    }
}

impl RunOnTarget {
    pub fn of(br: &BenchmarkRun) -> Self {
        let st = br.status.as_ref();
        let current = st.and_then(|s| s.observed_generation) == br.metadata.generation;
        let phase = st.and_then(|s| s.phase).filter(|_| current);
        let namespace = br.metadata.namespace.clone().unwrap_or_default();
        RunOnTarget {
            targets: target_keys(&br.spec, &namespace),
            namespace,
            name: br.metadata.name.clone().unwrap_or_default(),
            created: br.metadata.creation_timestamp.clone(),
            shares: br.spec.share_target,
            holds: matches!(phase, Some(Phase::Starting | Phase::Running)),
            finished: matches!(
                phase,
                Some(Phase::Merging | Phase::Succeeded | Phase::Failed)
            ),
            baseline: br.spec.baseline_ref.as_ref().map(|b| b.name.clone()),
        }
    }

    fn is(&self, other: &RunOnTarget) -> bool {
        (&self.namespace, &self.name) == (&other.namespace, &other.name)
    }

    fn applied_before(&self, other: &RunOnTarget) -> bool {
        let key = |r: &RunOnTarget| {
            (
                r.created.as_ref().map(|t| t.0),
                r.namespace.clone(),
                r.name.clone(),
            )
        };
        key(self) < key(other)
    }

    /// Its name as `me` says it: `namespace/name` when in another namespace.
    fn seen_from(&self, me: &RunOnTarget) -> String {
        if self.namespace == me.namespace {
            self.name.clone()
        } else {
            format!("{}/{}", self.namespace, self.name)
        }
    }

    fn awaits_verdict_of(&self, me: &RunOnTarget) -> bool {
        self.namespace == me.namespace && self.baseline.as_deref() == Some(me.name.as_str())
    }
}

/// Who is in `me`'s way among `others` (other runs of any namespace, in any order).
pub fn target_use(me: &RunOnTarget, others: &[RunOnTarget]) -> TargetUse {
    let mut in_way: Vec<&RunOnTarget> = others
        .iter()
        .filter(|o| !o.is(me) && !o.finished)
        .filter(|o| !o.awaits_verdict_of(me))
        .filter(|o| o.holds || o.applied_before(me))
        .filter(|o| !o.targets.is_disjoint(&me.targets))
        .collect();
    // Name the holder first, else the earliest applied.
    in_way.sort_by_key(|o| {
        let created = o.created.as_ref().map(|t| t.0);
        (!o.holds, created, o.namespace.clone(), o.name.clone())
    });
    if let Some(o) = in_way.iter().find(|o| !(me.shares && o.shares)) {
        let target = o.targets.intersection(&me.targets).next().cloned();
        return TargetUse::Busy {
            run: o.seen_from(me),
            target: target.unwrap_or_default(),
            holds: o.holds,
        };
    }
    if in_way.is_empty() {
        TargetUse::Free
    } else {
        TargetUse::Shared(in_way.iter().map(|o| o.seen_from(me)).collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(name: &str, created_s: i64, target: &str) -> RunOnTarget {
        RunOnTarget {
            namespace: "bench".into(),
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

    #[test]
    fn a_server_is_one_target_whether_named_by_reference_or_by_url() {
        use msgbench_crds::benchmark_run::{Endpoint, ServerKind, ServerRef};
        use msgbench_crds::workload::Protocol;
        let by_ref = Target {
            server_ref: Some(ServerRef {
                kind: ServerKind::JetStreamCluster,
                name: "js1".into(),
            }),
            ..Target::default()
        };
        assert_eq!(target_key(&by_ref, "bench").as_deref(), Some("bench/js1"));
        let by_url = |url: &str| Target {
            endpoint: Some(Endpoint {
                protocol: Protocol::Nats,
                url: url.into(),
                auth: None,
                tls: None,
                monitoring: None,
            }),
            ..Target::default()
        };
        for (url, key) in [
            ("nats://js1.bench.svc:4222", "bench/js1"),
            ("nats://js1.bench.svc.cluster.local.:4222", "bench/js1"),
            ("tls://user:pw@JS1.Bench.svc:4222/", "bench/js1"),
            ("nats://js1.bench:4222", "bench/js1"),
            ("nats://js1:4222", "bench/js1"),
            ("nats://js1", "bench/js1"),
            ("nats://js1-0.js1-headless.bench.svc:4222", "bench/js1"),
            ("mqtt://mq.other.svc:1883", "other/mq"),
            ("nats://10.96.0.12:4222", "10.96.0.12:4222"),
            ("nats://[fd00::1]:4222", "[fd00::1]:4222"),
            ("nats://nats.example.com:4222", "nats.example.com:4222"),
        ] {
            assert_eq!(
                target_key(&by_url(url), "bench").as_deref(),
                Some(key),
                "{url}"
            );
        }
    }

    #[test]
    fn runs_in_two_namespaces_at_one_server_take_turns_and_the_wait_names_the_namespace() {
        let first = run("nightly", 0, "bench/js1");
        let other_ns = RunOnTarget {
            namespace: "team-b".into(),
            ..run("adhoc", 1, "bench/js1")
        };
        assert_eq!(
            target_use(&first, std::slice::from_ref(&other_ns)),
            TargetUse::Free
        );
        assert_eq!(
            target_use(&other_ns, std::slice::from_ref(&first)),
            TargetUse::Busy {
                run: "bench/nightly".into(),
                target: "bench/js1".into(),
                holds: false,
            }
        );
        // The same name in another namespace is another run, and a baselineRef of that name
        // names a run of its own namespace: neither is taken for `first`.
        let namesake = RunOnTarget {
            namespace: "team-b".into(),
            baseline: Some("nightly".into()),
            ..run("nightly", -1, "bench/js1")
        };
        assert!(matches!(
            target_use(&first, &[namesake]),
            TargetUse::Busy { run, .. } if run == "team-b/nightly"
        ));
    }
}
