//! The scenario catalogue (`config/scenarios.yaml`) and the one knob that shrinks its samples to
//! the local cluster: `SCENARIO_SCALE` (default 0.1).
//!
//! A run keeps its shape — protocol, clients, variants, sessions, stages, faults, thresholds —
//! and the scale multiplies its lengths and loads: measured seconds, messages, stage lengths,
//! rates, client and connection counts (each at least 1). Floors keep every figure defined: a
//! stage or measured phase lasts at least 3 s, a connection level is held at least 10 s (the
//! operator samples server memory every 5 s), trials or rounds stay at least 2 where the sample
//! asks for several (intervals need 2), and a fault stays inside the shortened run. Latency
//! thresholds become warnings: one shared CPU says nothing about a server's latency, while
//! delivery and error thresholds keep failing the run.
//!
//! Servers keep their kind, name, protocol and storage, but not their CPU pinning or size: the
//! samples pin whole CPUs the one-CPU node does not have.
use anyhow::{Context, Result};
use serde::Deserialize;
use serde_json::{json, Value};

/// One entry of `config/scenarios.yaml`.
#[derive(Clone, Debug, Deserialize)]
pub struct Scenario {
    pub study: String,
    pub scenario: String,
    pub sample: String,
    #[serde(default)]
    pub after: Option<String>,
    pub servers: Vec<String>,
    pub figures: Vec<String>,
    /// Images beyond `e2e/images/build`'s default set that the scenario's servers run, e.g.
    /// `sockudo` (built by name only: its first build takes 15-50 min).
    #[serde(default)]
    pub needs: Vec<String>,
}

#[derive(Deserialize)]
struct Catalogue {
    scenarios: Vec<Scenario>,
}

pub fn catalogue(text: &str) -> Result<Vec<Scenario>> {
    Ok(serde_norway::from_str::<Catalogue>(text)?.scenarios)
}

/// The scenarios to run: those whose `needs` are all in `images` (`SCENARIO_IMAGES`, e.g.
/// `sockudo`) and, with `only` (`SCENARIO_ONLY`), whose sample name contains it. The rest come
/// back with the reason they are not run, for the log: a scenario is never dropped silently.
pub fn select(
    all: Vec<Scenario>,
    images: &[String],
    only: Option<&str>,
) -> (Vec<Scenario>, Vec<(Scenario, String)>) {
    let mut run = Vec::new();
    let mut left = Vec::new();
    for sc in all {
        let missing: Vec<&str> = (sc.needs.iter())
            .filter(|n| !images.contains(n))
            .map(String::as_str)
            .collect();
        if !missing.is_empty() {
            let why = format!(
                "needs the {} image (SCENARIO_IMAGES={}; make e2e-sockudo)",
                missing.join(", "),
                missing.join(",")
            );
            left.push((sc, why));
        } else if only.is_some_and(|o| !sc.sample.contains(o)) {
            left.push((
                sc,
                format!("SCENARIO_ONLY={} excludes it", only.unwrap_or("")),
            ));
        } else {
            run.push(sc);
        }
    }
    (run, left)
}

/// `SCENARIO_IMAGES` (comma-separated) and `SCENARIO_ONLY` from the environment.
pub fn selection_from_env() -> (Vec<String>, Option<String>) {
    let images = std::env::var("SCENARIO_IMAGES")
        .unwrap_or_default()
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(String::from)
        .collect();
    let only = std::env::var("SCENARIO_ONLY")
        .ok()
        .filter(|s| !s.is_empty());
    (images, only)
}

/// `SCENARIO_SCALE`, default 0.1, within (0, 1].
pub fn scale_from_env() -> Result<f64> {
    let Ok(v) = std::env::var("SCENARIO_SCALE") else {
        return Ok(0.1);
    };
    let f: f64 = v.parse().context("SCENARIO_SCALE: a number")?;
    anyhow::ensure!(
        f > 0.0 && f <= 1.0,
        "SCENARIO_SCALE: within (0, 1], got {f}"
    );
    Ok(f)
}

/// `o[key] × f`, at least `floor` (never more than it was); absent keys stay absent (indexing a
/// `Value` mutably would insert a null).
fn times(o: &mut Value, key: &str, f: f64, floor: u64) {
    if let Some(v) = o.get_mut(key) {
        if let Some(n) = v.as_u64() {
            *v = json!(((n as f64 * f).round() as u64).max(floor).min(n.max(floor)));
        }
    }
}

/// `o[key]` capped at `max`, when present.
fn cap(o: &mut Value, key: &str, max: u64) {
    if let Some(v) = o.get_mut(key) {
        if let Some(n) = v.as_u64() {
            *v = json!(n.min(max));
        }
    }
}

/// A BenchmarkRun sample shrunk by `f` (see the module doc).
pub fn scale_run(run: &mut Value, f: f64) -> Result<()> {
    let spec = run.pointer_mut("/spec").context("spec")?;
    let faulted = spec["faults"].as_array().is_some_and(|a| !a.is_empty());
    let w = &mut spec["workload"];
    for (k, floor) in [
        ("publishers", 1),
        ("subscribers", 1),
        ("ratePerPublisher", 1),
    ] {
        if w[k].as_u64().is_some_and(|n| n > 0) {
            times(w, k, f, floor);
        }
    }
    // A fault needs seconds before it (the level it is measured against) and after it.
    times(w, "durationSeconds", f, if faulted { 16 } else { 3 });
    times(w, "messagesPerPublisher", f, 10);
    cap(w, "warmupSeconds", 1);
    cap(w, "drainSeconds", 2);
    let sessions = w.get_mut("sessions").and_then(Value::as_array_mut);
    for s in sessions.into_iter().flatten() {
        // Sessions of 10k … 1M keep their proportions at 1 % … so 0.1 takes them to 1/100.
        times(s, "messages", f * f, 10);
        cap(s, "pauseAfterSeconds", 1);
    }
    if let Some(st) = w.get_mut("stages") {
        times(st, "stageSeconds", f, 3);
        cap(st, "count", 3);
        if st["dimension"] == "rate" {
            times(st, "start", f, 1);
            times(st, "step", f, 0);
        }
    }
    if let Some(c) = w.get_mut("connections") {
        times(c, "count", f, 10);
        times(c, "stepHoldSeconds", f, 10);
        times(c, "holdSeconds", f, 10);
    }
    let trials = spec["trials"].as_u64().unwrap_or(1);
    spec["trials"] = json!(trials.min(if faulted { 1 } else { 2 }));
    cap(spec, "settleSeconds", 1);
    let measured = spec["workload"]["durationSeconds"].as_u64().unwrap_or(16);
    let faults = spec.get_mut("faults").and_then(Value::as_array_mut);
    for fault in faults.into_iter().flatten() {
        fault["afterSeconds"] = json!(measured / 3);
    }
    let thresholds = spec.get_mut("thresholds").and_then(Value::as_array_mut);
    for t in thresholds.into_iter().flatten() {
        if t["metric"]
            .as_str()
            .is_some_and(|m| m.starts_with("latency"))
        {
            t["severity"] = json!("warn");
        }
    }
    spec["runners"]["resources"] =
        json!({"requests": {"cpu": "20m", "memory": "32Mi"}, "limits": {"memory": "512Mi"}});
    if let Some(o) = spec.as_object_mut() {
        o.remove("ttlSecondsAfterFinished");
        o.remove("activeDeadlineSeconds");
    }
    Ok(())
}

/// A server sample fitted to the one-CPU node: no pinning or anti-affinity, a small request.
pub fn fit_server(server: &mut Value) -> Result<()> {
    let spec = server.pointer_mut("/spec").context("spec")?;
    spec["resources"] =
        json!({"requests": {"cpu": "10m", "memory": "64Mi"}, "limits": {"memory": "512Mi"}});
    if let Some(o) = spec.as_object_mut() {
        o.remove("tuning");
        o.remove("placement");
    }
    if spec["replicas"].as_u64().is_some_and(|r| r > 1) {
        spec["placement"] = json!({"podAntiAffinity": "none"});
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(sample: &str, needs: &[&str]) -> Scenario {
        Scenario {
            study: "s".into(),
            scenario: "x".into(),
            sample: sample.into(),
            after: None,
            servers: vec![],
            figures: vec![],
            needs: needs.iter().map(|n| n.to_string()).collect(),
        }
    }

    #[test]
    fn scenarios_needing_an_optional_image_run_only_when_it_is_present() {
        let all = || vec![entry("a.yaml", &[]), entry("b-sockudo.yaml", &["sockudo"])];
        let (run, left) = select(all(), &[], None);
        assert_eq!(run.len(), 1);
        assert_eq!(left[0].0.sample, "b-sockudo.yaml");
        assert!(
            left[0].1.contains("needs the sockudo image"),
            "{}",
            left[0].1
        );
        let (run, left) = select(all(), &["sockudo".into()], None);
        assert_eq!((run.len(), left.len()), (2, 0));
        let (run, left) = select(all(), &["sockudo".into()], Some("sockudo"));
        assert_eq!(run[0].sample, "b-sockudo.yaml");
        assert!(left[0].1.contains("SCENARIO_ONLY=sockudo"), "{}", left[0].1);
    }

    fn run(yaml: &str) -> Value {
        let mut v: Value = serde_norway::from_str(yaml).unwrap();
        scale_run(&mut v, 0.1).unwrap();
        v
    }

    #[test]
    fn sessions_keep_their_proportions_and_latency_thresholds_only_warn() {
        let v = run("spec:\n  workload:\n    ratePerPublisher: 20000\n    sessions: [{messages: 10000, pauseAfterSeconds: 5}, {messages: 1000000}]\n  thresholds:\n  - {metric: latencyP99Ms, op: le, value: 10}\n  - {metric: deliveredRatio, op: ge, value: 0.999}\n  trials: 3\n");
        let w = &v["spec"]["workload"];
        assert_eq!(w["sessions"][0]["messages"], 100);
        assert_eq!(w["sessions"][1]["messages"], 10_000);
        assert_eq!(w["sessions"][0]["pauseAfterSeconds"], 1);
        assert_eq!(w["ratePerPublisher"], 2_000);
        assert_eq!(v["spec"]["thresholds"][0]["severity"], "warn");
        assert!(v["spec"]["thresholds"][1].get("severity").is_none());
        assert_eq!(v["spec"]["trials"], 2);
    }

    #[test]
    fn floors_keep_figures_defined_and_faults_inside_the_run() {
        let v = run("spec:\n  workload:\n    durationSeconds: 30\n    publishers: 2\n    connections: {count: 1000, steps: 5, stepHoldSeconds: 10, holdSeconds: 30}\n    stages: {dimension: rate, start: 200, step: 0, count: 10, stageSeconds: 60}\n  faults:\n  - {afterSeconds: 15, action: kill}\n");
        let w = &v["spec"]["workload"];
        assert_eq!(
            w["durationSeconds"], 16,
            "a faulted run keeps room around its fault"
        );
        assert_eq!(w["publishers"], 1);
        assert_eq!(w["connections"]["count"], 100);
        assert_eq!(w["connections"]["stepHoldSeconds"], 10);
        assert_eq!(w["connections"]["steps"], 5);
        assert_eq!(w["stages"]["count"], 3);
        assert_eq!(w["stages"]["stageSeconds"], 6);
        assert_eq!(w["stages"]["step"], 0);
        assert_eq!(v["spec"]["faults"][0]["afterSeconds"], 5);
        assert_eq!(v["spec"]["trials"], 1);
        let plain = run("spec:\n  workload: {durationSeconds: 30}\n  trials: 5\n");
        assert_eq!(plain["spec"]["workload"]["durationSeconds"], 3);
        assert_eq!(plain["spec"]["trials"], 2);
    }

    #[test]
    fn every_catalogued_sample_scales_to_a_shorter_run_of_the_same_shape() {
        let root = crate::cluster::repo_root();
        let text = std::fs::read_to_string(root.join("config/scenarios.yaml")).unwrap();
        for sc in catalogue(&text).unwrap() {
            let path = root.join("config/samples").join(&sc.sample);
            let orig: Value =
                serde_norway::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
            let mut v = orig.clone();
            scale_run(&mut v, 0.1).unwrap();
            let (a, b) = (&orig["spec"], &v["spec"]);
            assert_eq!(a["variants"], b["variants"], "{}", sc.sample);
            assert_eq!(a["workload"]["protocol"], b["workload"]["protocol"]);
            let secs = |w: &Value| w["durationSeconds"].as_u64().unwrap_or(0);
            assert!(
                secs(&b["workload"]) <= secs(&a["workload"]).max(16),
                "{}",
                sc.sample
            );
            let parsed: Result<msgbench_crds::BenchmarkRun, _> = serde_json::from_value(v.clone());
            let run = parsed.unwrap_or_else(|e| panic!("{}: {e}", sc.sample));
            assert_eq!(run.spec.workload.violations(), vec![], "{}", sc.sample);
        }
    }
}
