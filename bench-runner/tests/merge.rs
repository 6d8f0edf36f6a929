//! Merging N partial results gives exactly the result of one process that saw everything,
//! through the JSON files and the `bench-runner merge` command.
use runner_api::histo::Histo;
use runner_api::result::{Delivery, Generator, RunnerResult, SegmentStats, FORMAT};
use std::process::Command;

fn workload() -> msgbench_crds::workload::Workload {
    serde_norway::from_str(
        "protocol: nats\ntopics: 3\nsessions: [{messages: 10}, {messages: 20}]\nwarmupSeconds: 1\n",
    )
    .unwrap()
}

/// A deterministic spread of latencies (1 µs .. ~2 s) for part `k` of `n`.
fn samples(k: u64, n: u64) -> Vec<u64> {
    (0..20_000u64)
        .filter(|i| i % n == k)
        .map(|i| 1 + (i * i * 7919) % 2_000_000)
        .collect()
}

fn phase(name: &str, lat: &[u64], published: u64, topic: usize) -> SegmentStats {
    let mut p = SegmentStats::new(name, 3, Delivery::FanOut);
    p.publishers = 1;
    p.published = published;
    p.scheduled = published;
    p.published_by_topic[topic] = published;
    p.subscribers_by_topic = vec![1, 1, 1];
    p.received = lat.len() as u64;
    p.duplicates = lat.len() as u64 / 1000;
    p.publish_seconds = 1.0 + topic as f64 / 10.0;
    p.receive_seconds = 1.5;
    p.delivery_seconds = 1.6 + topic as f64 / 10.0;
    for &v in lat {
        p.latency.record(v);
        p.send_lag.record(v / 100);
        p.ack_latency.record(v / 2);
    }
    p.error("publish");
    p
}

fn part(runner: u16, lat: &[u64], topic: usize) -> RunnerResult {
    let (a, b) = lat.split_at(lat.len() / 3);
    let sessions = vec![
        phase("session-1", a, a.len() as u64, topic),
        phase("session-2", b, b.len() as u64, topic),
    ];
    let mut r = RunnerResult {
        format: FORMAT.into(),
        target: "nats://127.0.0.1:4222".into(),
        runner_ids: vec![runner],
        workload: workload(),
        generator: Generator {
            cpu_seconds: 0.5,
            wall_seconds: 3.0,
            cpus: 2.0,
            ..Default::default()
        },
        warmup: Some(phase("warmup", &lat[..10], 10, topic)),
        measured: runner_api::result::aggregate_measured(&sessions),
        sessions,
        stages: vec![],
        breaking_stage: None,
        connections: None,
        timeline: vec![],
        rest: vec![],
    };
    r.finalize();
    r
}

#[test]
fn merging_parts_equals_the_whole() {
    let n = 3;
    let parts: Vec<(String, RunnerResult)> = (0..n)
        .map(|k| (format!("p{k}"), part(k as u16, &samples(k, n), k as usize)))
        .collect();
    let merged = RunnerResult::merge(&parts).unwrap();

    // The whole, recorded by one process.
    let mut whole = Histo::default();
    for k in 0..n {
        for v in samples(k, n) {
            whole.record(v);
        }
    }
    let m = &merged.measured;
    assert_eq!(m.received, 20_000);
    assert_eq!(m.latency, whole, "merged histogram is the whole histogram");
    assert_eq!(
        m.summary.latency,
        whole.summary(),
        "percentiles from the merged histogram"
    );
    assert_eq!(m.errors["publish"], 6, "2 sessions × 3 parts");
    assert_eq!(merged.sessions.len(), 2);
    let pubs: u64 = parts.iter().map(|(_, p)| p.measured.published).sum();
    assert_eq!(m.published, pubs);
    // Each part published on its own topic, each topic has one subscriber per part (3).
    assert_eq!(m.summary.expected, pubs * 3);
    assert_eq!(merged.generator.cpu_seconds, 1.5);
    // Windows take the longest runner's per session (1.8 s), and sessions add up.
    assert!(
        (m.delivery_seconds - 3.6).abs() < 1e-9,
        "{}",
        m.delivery_seconds
    );
    let unique = m.received - m.duplicates;
    assert_eq!(
        m.summary.delivery_rate,
        (unique as f64 / 3.6 * 10.0).round() / 10.0
    );
    assert_eq!(merged.warmup.as_ref().unwrap().published, 30);

    // Same through files and the CLI.
    let dir = tempfile::tempdir().unwrap();
    let mut args = vec!["merge".to_string()];
    for (name, r) in &parts {
        let p = dir.path().join(format!("{name}.json"));
        std::fs::write(&p, serde_json::to_vec(r).unwrap()).unwrap();
        args.push(p.display().to_string());
    }
    let out = dir.path().join("merged.json");
    args.extend(["--output".into(), out.display().to_string()]);
    let st = Command::new(env!("CARGO_BIN_EXE_bench-runner"))
        .args(&args)
        .output()
        .unwrap();
    assert!(
        st.status.success(),
        "{}",
        String::from_utf8_lossy(&st.stderr)
    );
    let table = String::from_utf8_lossy(&st.stdout);
    assert!(
        table.contains("session-2") && table.contains("measured"),
        "{table}"
    );
    let from_cli: RunnerResult = serde_json::from_slice(&std::fs::read(&out).unwrap()).unwrap();
    assert_eq!(from_cli, merged);
}

#[test]
fn merge_refuses_parts_of_different_runs() {
    let a = part(1, &samples(0, 2), 0);
    let mut b = part(2, &samples(1, 2), 1);
    b.workload.payload_bytes = 999;
    let e = RunnerResult::merge(&[("a".into(), a), ("b.json".into(), b)])
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("b.json") && e.contains("workload differs"),
        "{e}"
    );
}

#[test]
fn shipped_example_workloads_are_valid() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("workloads");
    let mut n = 0;
    for e in std::fs::read_dir(&dir).unwrap() {
        let p = e.unwrap().path();
        let w: msgbench_crds::workload::Workload =
            serde_norway::from_str(&std::fs::read_to_string(&p).unwrap())
                .unwrap_or_else(|e| panic!("{}: {e}", p.display()));
        assert!(
            w.violations().is_empty(),
            "{}: {:?}",
            p.display(),
            w.violations()
        );
        n += 1;
    }
    assert!(n >= 5);
}
