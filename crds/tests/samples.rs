//! Every sample and fixture manifest parses into the typed API with no field dropped on the way.
use std::path::{Path, PathBuf};

use msgbench_crds::{BenchmarkRun, JetStreamCluster, MqttBroker, PubSubServer};
use serde_json::Value;

/// The user guide's page with the scenario table.
const SCENARIO_TABLE: &str = "docs/src/guide/scenarios.md";

fn yaml_files(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.expect("dir entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == "yaml"))
        .collect();
    files.sort();
    files
}

fn load(path: &Path) -> Value {
    let text = std::fs::read_to_string(path).expect("read");
    serde_norway::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Every key of `original` must survive a typed round trip: catches misspelt fields that serde
/// would otherwise ignore silently.
fn assert_subset(original: &Value, typed: &Value, at: &str) {
    match (original, typed) {
        (Value::Object(o), Value::Object(t)) => {
            for (k, v) in o {
                let t = t
                    .get(k)
                    .unwrap_or_else(|| panic!("{at}.{k}: unknown field"));
                assert_subset(v, t, &format!("{at}.{k}"));
            }
        }
        (Value::Array(o), Value::Array(t)) => {
            assert_eq!(o.len(), t.len(), "{at}: list length changed");
            for (i, (o, t)) in o.iter().zip(t).enumerate() {
                assert_subset(o, t, &format!("{at}[{i}]"));
            }
        }
        _ => {}
    }
}

fn round_trip<T: serde::de::DeserializeOwned + serde::Serialize>(doc: &Value, name: &str) {
    let typed: T = serde_json::from_value(doc.clone()).unwrap_or_else(|e| panic!("{name}: {e}"));
    let back = serde_json::to_value(&typed).expect("serialize");
    assert_subset(&doc["spec"], &back["spec"], &format!("{name}: spec"));
}

/// Parses `doc` as its kind; returns the kind.
fn check(doc: &Value, name: &str) -> String {
    assert_eq!(
        doc["apiVersion"], "msgbench.dev/v1alpha1",
        "{name}: apiVersion"
    );
    let kind = doc["kind"]
        .as_str()
        .unwrap_or_else(|| panic!("{name}: no kind"));
    match kind {
        "JetStreamCluster" => round_trip::<JetStreamCluster>(doc, name),
        "MqttBroker" => round_trip::<MqttBroker>(doc, name),
        "PubSubServer" => round_trip::<PubSubServer>(doc, name),
        "BenchmarkRun" => {
            round_trip::<BenchmarkRun>(doc, name);
            // The runner's own rules (beyond what admission checks) must hold for a run.
            let run: BenchmarkRun = serde_json::from_value(doc.clone()).expect("parsed above");
            let violations = run.spec.workload.violations();
            assert!(violations.is_empty(), "{name}: {violations:?}");
        }
        other => panic!("{name}: unknown kind {other}"),
    }
    kind.to_string()
}

#[test]
fn samples_parse_and_cover_every_kind() {
    let mut kinds: Vec<String> = yaml_files(&repo_root().join("config/samples"))
        .iter()
        .map(|p| check(&load(p), &p.display().to_string()))
        .collect();
    kinds.sort();
    kinds.dedup();
    assert_eq!(
        kinds,
        [
            "BenchmarkRun",
            "JetStreamCluster",
            "MqttBroker",
            "PubSubServer"
        ]
    );
}

#[test]
fn valid_fixtures_parse() {
    let files = yaml_files(&repo_root().join("crds/tests/valid"));
    assert!(!files.is_empty());
    for p in files {
        check(&load(&p), &p.display().to_string());
    }
}

#[test]
fn invalid_fixtures_name_their_expected_rejection() {
    let files = yaml_files(&repo_root().join("crds/tests/invalid"));
    assert!(files.len() >= 20, "only {} invalid fixtures", files.len());
    for p in files {
        let text = std::fs::read_to_string(&p).expect("read");
        let expect = text
            .lines()
            .next()
            .and_then(|l| l.strip_prefix("# expect: "));
        assert!(
            expect.is_some_and(|e| e.len() >= 6),
            "{}: first line must be `# expect: <message fragment>`",
            p.display()
        );
        let doc = load(&p);
        assert_eq!(
            doc["apiVersion"],
            "msgbench.dev/v1alpha1",
            "{}",
            p.display()
        );
        assert!(doc["kind"].is_string(), "{}: no kind", p.display());
    }
}

#[test]
fn update_fixtures_come_in_pairs_and_parse() {
    let dir = repo_root().join("crds/tests/update");
    let befores: Vec<PathBuf> = yaml_files(&dir)
        .into_iter()
        .filter(|p| p.to_string_lossy().ends_with(".before.yaml"))
        .collect();
    assert!(!befores.is_empty());
    for before in befores {
        let after = PathBuf::from(before.to_string_lossy().replace(".before.", ".after."));
        check(&load(&before), &before.display().to_string());
        let text = std::fs::read_to_string(&after).expect("every .before has an .after");
        assert!(
            text.starts_with("# expect: "),
            "{}: no expect line",
            after.display()
        );
        check(&load(&after), &after.display().to_string());
    }
}

#[test]
fn demo_and_quickstart_manifests_parse() {
    for dir in ["config/demo", "config/demo-faults", "config/quickstart"] {
        let files = yaml_files(&repo_root().join(dir));
        assert!(files.len() >= 2, "{dir}: {} manifests", files.len());
        for p in files {
            check(&load(&p), &p.display().to_string());
        }
    }
}

/// `config/scenarios.yaml` lists every BenchmarkRun sample, and every server a sample's run
/// names (target or a variant's) is created by a server sample its entry lists.
#[test]
fn every_run_sample_is_a_listed_scenario_whose_servers_exist() {
    let root = repo_root();
    let catalogue = load(&root.join("config/scenarios.yaml"));
    let entries = catalogue["scenarios"]
        .as_array()
        .expect("scenarios: a list");
    let samples = root.join("config/samples");
    let mut listed: Vec<String> = Vec::new();
    for e in entries {
        let sample = e["sample"].as_str().expect("sample");
        let at = format!("config/scenarios.yaml: {sample}");
        let run = load(&samples.join(sample));
        assert_eq!(run["kind"], "BenchmarkRun", "{at}");
        let figures = e["figures"].as_array().expect("figures");
        assert!(!figures.is_empty(), "{at}: no figures");
        for f in figures {
            assert!(
                f.as_str().is_some_and(|f| f.starts_with("/status/")),
                "{at}: {f}"
            );
        }
        // Servers the entry's server samples create, by (kind, name).
        let created: Vec<(String, String)> = e["servers"]
            .as_array()
            .expect("servers")
            .iter()
            .map(|s| {
                let doc = load(&samples.join(s.as_str().expect("server file")));
                (
                    doc["kind"].as_str().unwrap().to_string(),
                    doc["metadata"]["name"].as_str().unwrap().to_string(),
                )
            })
            .collect();
        let spec = &run["spec"];
        let mut refs = vec![&spec["target"]["serverRef"]];
        for v in spec["variants"].as_array().into_iter().flatten() {
            refs.push(&v["target"]["serverRef"]);
        }
        for r in refs.into_iter().filter(|r| r.is_object()) {
            let want = (
                r["kind"].as_str().unwrap().to_string(),
                r["name"].as_str().unwrap().to_string(),
            );
            assert!(
                created.contains(&want),
                "{at}: {want:?} is created by none of {created:?}"
            );
        }
        endpoint_has_its_server_and_secrets(e, spec, &at);
        listed.push(sample.to_string());
    }
    // The scenario table of the user guide names every one.
    let table = std::fs::read_to_string(root.join(SCENARIO_TABLE)).expect(SCENARIO_TABLE);
    for l in &listed {
        assert!(
            table.contains(&format!("`{l}`")),
            "{SCENARIO_TABLE}'s scenario table lacks {l}"
        );
    }
    for p in yaml_files(&samples) {
        if load(&p)["kind"] == "BenchmarkRun" {
            let name = p.file_name().unwrap().to_string_lossy().to_string();
            assert!(
                listed.contains(&name),
                "{name}: not in config/scenarios.yaml"
            );
        }
    }
}

/// An `endpoint` sample's entry lists the plain manifests that create the Service its URL names,
/// and every Secret the run names (credentials, CA) among its `secrets`.
fn endpoint_has_its_server_and_secrets(entry: &Value, spec: &Value, at: &str) {
    let endpoint = &spec["target"]["endpoint"];
    if !endpoint.is_object() {
        return;
    }
    let url = endpoint["url"].as_str().expect("url");
    let host = url
        .split("://")
        .nth(1)
        .unwrap()
        .split([':', '/'])
        .next()
        .unwrap();
    let service = host.split('.').next().unwrap();
    let samples = repo_root().join("config/samples");
    let mut services = Vec::new();
    for m in entry["manifests"].as_array().expect("manifests").iter() {
        let text = std::fs::read_to_string(samples.join(m.as_str().unwrap())).expect("manifest");
        for doc in serde_norway::Deserializer::from_str(&text) {
            let doc: Value = serde::Deserialize::deserialize(doc).expect("manifest document");
            if doc["kind"] == "Service" {
                services.push(doc["metadata"]["name"].as_str().unwrap().to_string());
            }
        }
    }
    assert!(
        services.iter().any(|s| s == service),
        "{at}: Service {service} is created by none of its manifests ({services:?})"
    );
    let made: Vec<&str> = (entry["secrets"].as_array().expect("secrets").iter())
        .map(|s| s["name"].as_str().expect("secret name"))
        .collect();
    let named = [
        &endpoint["auth"]["secretName"],
        &endpoint["tls"]["ca"]["secretName"],
    ];
    for name in named.into_iter().filter_map(Value::as_str) {
        assert!(
            made.contains(&name),
            "{at}: Secret {name} is not among its secrets {made:?}"
        );
    }
}

/// The repository root: the parent of this crate's directory.
fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("crds/ has a parent")
        .to_path_buf()
}
