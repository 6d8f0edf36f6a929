//! `spec.variants` → what each variant runs (validated), the order of each round, and the
//! agent's schedule. Pure: no client.
use msgbench_crds::benchmark_run::{BenchmarkRunSpec, ScheduledRound, Target};
use msgbench_crds::workload::Workload;
use runner_api::agent::ScheduledTrial;

/// One variant, its overrides applied.
#[derive(Clone, Debug, PartialEq)]
pub struct PlannedVariant {
    pub name: String,
    pub workload: Workload,
    /// Its own target; `None`: `spec.target`.
    pub target: Option<Target>,
}

/// The validated workload of every variant (empty without variants). `Err` names the field
/// and the rule, e.g. `spec.variants[1].workload.payloadBytes: must be at least 24 for socketio`.
pub fn plan(spec: &BenchmarkRunSpec) -> Result<Vec<PlannedVariant>, String> {
    if let Some(v) = spec.workload.violations().first() {
        return Err(format!("spec.{v}"));
    }
    spec.variants
        .iter()
        .enumerate()
        .map(|(i, v)| {
            let workload = match &v.workload {
                Some(o) => spec.workload.with_override(o),
                None => spec.workload.clone(),
            };
            if let Some(x) = workload.violations().first() {
                return Err(format!("spec.variants[{i}].{x} (variant {})", v.name));
            }
            Ok(PlannedVariant {
                name: v.name.clone(),
                workload,
                target: v.target.clone(),
            })
        })
        .collect()
}

/// The variant the others are compared against.
pub fn baseline(spec: &BenchmarkRunSpec) -> Option<String> {
    spec.baseline_variant
        .clone()
        .or_else(|| spec.variants.first().map(|v| v.name.clone()))
}

/// How a target is shown: `<Kind>/<name>` or the endpoint URL.
pub fn display(t: &Target) -> String {
    match (&t.server_ref, &t.endpoint) {
        (Some(r), _) => format!("{:?}/{}", r.kind, r.name),
        (None, Some(e)) => e.url.clone(),
        (None, None) => String::new(),
    }
}

/// A variant's target as shown: its own, or `spec.target`.
pub fn target_display(spec: &BenchmarkRunSpec, name: &str) -> String {
    spec.variants
        .iter()
        .find(|v| v.name == name)
        .and_then(|v| v.target.as_ref())
        .map_or_else(|| display(&spec.target), display)
}

/// A seed that is stable for one spec generation of one object, so a restarted operator that
/// rebuilds the schedule before it was recorded draws the same one.
pub fn seed(uid: &str, generation: i64) -> u64 {
    // FNV-1a.
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in uid.bytes().chain(generation.to_le_bytes()) {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

/// SplitMix64: a tiny, well-mixed generator; cryptographic quality is not needed to shuffle
/// a handful of names, and the drawn order is recorded in status anyway.
struct SplitMix(u64);

impl SplitMix {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn shuffle<T>(&mut self, xs: &mut [T]) {
        for i in (1..xs.len()).rev() {
            let j = (self.next() % (i as u64 + 1)) as usize;
            xs.swap(i, j);
        }
    }
}

/// The `round`-th draw (1-based) from `seed`: the same every time, so a restarted operator
/// makes the same random choice, and every variant of a round gets the same one.
pub fn draw(seed: u64, round: u32) -> u64 {
    let mut rng = SplitMix(seed);
    (0..round.max(1)).map(|_| rng.next()).last().unwrap_or(0)
}

/// Each round's order: rows of a Latin square (rotations of a shuffled order) dealt to the
/// rounds in a shuffled sequence. Every variant holds every position equally often when
/// `rounds` is a multiple of the variant count, so "always runs second" (warm caches, a
/// stream left behind) cannot masquerade as an effect, and the sequence is still random.
pub fn schedule(names: &[String], rounds: usize, seed: u64) -> Vec<ScheduledRound> {
    let mut rng = SplitMix(seed);
    let mut base = names.to_vec();
    rng.shuffle(&mut base);
    let k = base.len().max(1);
    let mut rows: Vec<Vec<String>> = (0..rounds)
        .map(|r| {
            let mut row = base.clone();
            row.rotate_left(r % k);
            row
        })
        .collect();
    rng.shuffle(&mut rows);
    rows.into_iter()
        .enumerate()
        .map(|(i, order)| ScheduledRound {
            round: i as i32 + 1,
            order,
        })
        .collect()
}

/// The agent's trials in execution order. `url(name)`: the resolved URL of a variant's target.
pub fn agent_schedule(
    rounds: &[ScheduledRound],
    variants: &[PlannedVariant],
    url: impl Fn(&PlannedVariant) -> String,
) -> Vec<ScheduledTrial> {
    rounds
        .iter()
        .flat_map(|r| {
            r.order.iter().filter_map(|name| {
                let v = variants.iter().find(|v| &v.name == name)?;
                Some(ScheduledTrial {
                    round: r.round as u32,
                    variant: v.name.clone(),
                    target: url(v),
                    workload: v.workload.clone(),
                })
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use msgbench_crds::benchmark_run::BenchmarkRun;
    use std::collections::BTreeMap;

    fn names(xs: &[&str]) -> Vec<String> {
        xs.iter().map(|s| s.to_string()).collect()
    }

    fn spec(yaml: &str) -> BenchmarkRunSpec {
        let br: BenchmarkRun = serde_norway::from_str(yaml).unwrap();
        br.spec
    }

    const R1_R2: &str = r#"
apiVersion: msgbench.dev/v1alpha1
kind: BenchmarkRun
metadata: {name: r1-vs-r2, namespace: bench}
spec:
  target: {serverRef: {kind: JetStreamCluster, name: js3}}
  workload:
    protocol: jetstream
    durationSeconds: 10
    ratePerPublisher: 1000
    jetstream: {replicas: 1, publish: async, maxInFlight: 200, consumer: push}
  trials: 4
  variants:
    - name: r1
    - name: r2
      workload: {jetstream: {replicas: 2}}
"#;

    #[test]
    fn every_round_runs_every_variant_once_and_positions_balance() {
        let n = names(&["a", "b", "c"]);
        let s = schedule(&n, 6, 42);
        assert_eq!(s.len(), 6);
        assert_eq!(
            s.iter().map(|r| r.round).collect::<Vec<_>>(),
            [1, 2, 3, 4, 5, 6]
        );
        let mut firsts = BTreeMap::new();
        for r in &s {
            let mut o = r.order.clone();
            o.sort();
            assert_eq!(o, n, "round {} must run each variant once", r.round);
            *firsts.entry(r.order[0].clone()).or_insert(0) += 1;
        }
        assert_eq!(firsts.values().collect::<Vec<_>>(), [&2, &2, &2]);
        // Same seed, same schedule; some other seed, another sequence.
        assert_eq!(schedule(&n, 6, 42), s);
        assert!((0..20).any(|seed| schedule(&n, 6, seed) != s));
    }

    #[test]
    fn two_variants_over_two_rounds_run_in_both_orders() {
        for seed in 0..50 {
            let s = schedule(&names(&["r1", "r2"]), 2, seed);
            assert_ne!(s[0].order, s[1].order, "seed {seed}");
        }
    }

    #[test]
    fn plan_applies_overrides_and_the_agent_schedule_follows_the_rounds() {
        let sp = spec(R1_R2);
        let p = plan(&sp).unwrap();
        let replicas: Vec<u32> = p
            .iter()
            .map(|v| v.workload.jetstream.as_ref().unwrap().replicas)
            .collect();
        assert_eq!(replicas, [1, 2]);
        assert_eq!(baseline(&sp).as_deref(), Some("r1"));
        let rounds = schedule(&names(&["r1", "r2"]), 2, seed("uid-1", 3));
        let trials = agent_schedule(&rounds, &p, |v| format!("nats://{}", v.name));
        assert_eq!(trials.len(), 4);
        for (t, (round, name)) in trials.iter().zip(
            rounds
                .iter()
                .flat_map(|r| r.order.iter().map(move |n| (r.round as u32, n))),
        ) {
            assert_eq!((t.round, &t.variant), (round, name));
            assert_eq!(t.target, format!("nats://{name}"));
            let want = if name == "r1" { 1 } else { 2 };
            assert_eq!(t.workload.jetstream.as_ref().unwrap().replicas, want);
        }
    }

    #[test]
    fn a_variant_that_breaks_a_workload_rule_is_named() {
        let yaml = R1_R2.replace(
            "protocol: jetstream",
            "protocol: jetstream\n    payloadBytes: 64",
        );
        let mut sp = spec(&yaml);
        sp.variants[1].workload.as_mut().unwrap().rate_per_publisher = Some(0);
        let err = plan(&sp).unwrap_err();
        assert!(
            err.starts_with("spec.variants[1].workload.ratePerPublisher:") && err.contains("r2"),
            "{err}"
        );
        // Without variants the plan is empty and the base workload is still checked.
        sp.variants.clear();
        assert_eq!(plan(&sp).unwrap(), vec![]);
        sp.workload.rate_per_publisher = Some(0);
        assert!(plan(&sp)
            .unwrap_err()
            .starts_with("spec.workload.ratePerPublisher"));
    }
}
