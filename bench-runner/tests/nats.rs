//! bench-runner against a real nats-server on loopback.
mod support;
use bench_runner::{run, RunOptions};
use runner_api::result::RunnerResult;
use std::time::Duration;
use support::*;

fn opts(runner_id: u16) -> RunOptions {
    RunOptions {
        runner_id,
        ..Default::default()
    }
}

async fn run_ok(yaml: &str, port: u16, runner: u16) -> RunnerResult {
    run(
        workload(yaml),
        &format!("nats://127.0.0.1:{port}"),
        opts(runner),
    )
    .await
    .expect("run")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exact_counts_and_full_delivery_at_a_modest_rate() {
    let s = nats_server(false);
    let r = run_ok(
        "protocol: nats\npublishers: 2\nsubscribers: 4\ntopics: 2\npayloadBytes: 64\nratePerPublisher: 1000\nmessagesPerPublisher: 1000\n",
        s.port,
        7,
    )
    .await;
    let m = &r.measured;
    assert_eq!(m.published, 2000);
    assert_eq!(m.scheduled, 2000);
    // Two subscribers per topic, one publisher per topic.
    assert_eq!(m.summary.expected, 4000);
    assert_eq!(m.received, 4000);
    assert_eq!((m.duplicates, m.out_of_order, m.received_remote), (0, 0, 0));
    assert_eq!(m.summary.delivered_ratio, 1.0);
    assert_eq!(m.latency.len(), 4000);
    // Core NATS does not acknowledge publishes: nothing to say about acked messages.
    assert_eq!((m.lost_acked, m.lost_acked_deliveries), (None, None));
    assert_eq!(m.publish_stall, None);
    assert!(r.timeline.iter().all(|p| p.acked == 0));
    // (Send lag depends on the load of the shared machine; the schedule itself held.)
    assert!(
        !r.generator.reasons.iter().any(|x| x.contains("scheduled")),
        "{:?}",
        r.generator.reasons
    );
    assert!(!r.generator.closed_loop);
    assert!(r.warmup.is_none());
    let sum: u64 = r.timeline.iter().map(|t| t.published).sum();
    assert_eq!(sum, 2000, "timeline accounts for every publish");
    // The end-to-end window runs from the first send to the last delivery: the 1 s schedule
    // plus the last message's trip, so 4000 deliveries come at just under 4000/s.
    assert!(
        (0.999..1.5).contains(&m.delivery_seconds),
        "{}",
        m.delivery_seconds
    );
    assert!(m.delivery_seconds >= m.receive_seconds);
    assert!(
        (2600.0..=4004.0).contains(&m.summary.delivery_rate),
        "{}",
        m.summary.delivery_rate
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn added_network_delay_shows_in_latency() {
    let s = nats_server(false);
    let w = "protocol: nats\npayloadBytes: 32\nratePerPublisher: 200\nmessagesPerPublisher: 200\n";
    let direct = run_ok(w, s.port, 1).await;
    let proxy = delay_proxy(s.port, Duration::from_millis(25)).await;
    let delayed = run_ok(w, proxy, 1).await;
    let d = direct.measured.summary.latency.clone().unwrap();
    let p = delayed.measured.summary.latency.clone().unwrap();
    // Publisher → proxy → server → proxy → subscriber: the delay is paid twice.
    assert!(d.p50_us < 20_000, "direct p50 {} µs", d.p50_us);
    assert!(p.p50_us >= 48_000, "delayed p50 {} µs", p.p50_us);
    assert_eq!(delayed.measured.summary.delivered_ratio, 1.0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stalled_server_shows_in_high_percentiles() {
    let s = nats_server(false);
    // 3 s at 1000/s; the server is stopped for 600 ms from t≈1 s. Every message scheduled
    // during the stall is late by up to 600 ms, measured from its intended send time, so
    // ~20 % of the samples carry the stall (a closed-loop tool would record one slow sample).
    let port = s.port;
    let stall = std::thread::spawn({
        let pid = s.pid();
        move || {
            std::thread::sleep(Duration::from_millis(1000));
            let k = |sig: &str| {
                std::process::Command::new("kill")
                    .arg(sig)
                    .arg(pid.to_string())
                    .status()
                    .unwrap()
            };
            k("-STOP");
            std::thread::sleep(Duration::from_millis(600));
            k("-CONT");
        }
    });
    let r = run_ok(
        "protocol: nats\npayloadBytes: 32\nratePerPublisher: 1000\ndurationSeconds: 3\n",
        port,
        1,
    )
    .await;
    stall.join().unwrap();
    let l = r.measured.summary.latency.clone().unwrap();
    assert_eq!(r.measured.summary.delivered_ratio, 1.0);
    assert!(l.max_us >= 450_000, "max {} µs", l.max_us);
    assert!(l.p99_us >= 300_000, "p99 {} µs", l.p99_us);
    assert!(l.p90_us >= 50_000, "p90 {} µs", l.p90_us);
    assert!(l.p50_us < 50_000, "p50 {} µs", l.p50_us);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_impossible_rate_is_flagged_saturated_and_closed_loop_is_flagged() {
    // 200 M/s is past any loopback: the runner once sent all of 10 M/s within its grace second.
    let s = nats_server(false);
    let r = run_ok("protocol: nats\nsubscribers: 0\npayloadBytes: 16\nratePerPublisher: 200000000\ndurationSeconds: 1\n", s.port, 1).await;
    assert!(r.generator.saturated);
    assert!(!r.generator.reasons.is_empty());
    assert!(
        r.measured.published < r.measured.scheduled,
        "{} of {}",
        r.measured.published,
        r.measured.scheduled
    );
    let c = run_ok(
        "protocol: nats\nsubscribers: 1\npayloadBytes: 16\nmessagesPerPublisher: 20000\n",
        s.port,
        1,
    )
    .await;
    assert!(c.generator.closed_loop);
    assert_eq!(c.measured.published, 20000);
    assert_eq!(c.measured.received, 20000);
}

/// The start barrier hook: both runners start once both are connected (as pods will).
struct Barrier(std::sync::Arc<tokio::sync::Barrier>);
impl bench_runner::StartGate for Barrier {
    fn wait(&self) -> futures::future::BoxFuture<'_, anyhow::Result<()>> {
        Box::pin(async move {
            self.0.wait().await;
            Ok(())
        })
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_runners_behind_a_barrier_merge_exactly() {
    let s = nats_server(false);
    let w = workload("protocol: nats\npublishers: 1\nsubscribers: 1\nratePerPublisher: 500\ndurationSeconds: 2\ndrainSeconds: 3\n");
    let b = std::sync::Arc::new(tokio::sync::Barrier::new(2));
    let target = format!("nats://127.0.0.1:{}", s.port);
    let o = |id| RunOptions {
        runner_id: id,
        progress: false,
        gate: Some(std::sync::Arc::new(Barrier(b.clone()))),
        ..Default::default()
    };
    let (a, b) = tokio::join!(
        run(w.clone(), &target, o(11)),
        run(w.clone(), &target, o(22))
    );
    let (a, b) = (a.unwrap(), b.unwrap());
    // Each runner's subscriber receives both runners' messages (same topic), but records
    // latency only for its own: the other runner's clock is not its clock.
    for r in [&a, &b] {
        assert_eq!(r.measured.published, 1000);
        assert_eq!(r.measured.received, 2000);
        assert_eq!(r.measured.received_remote, 1000);
        assert_eq!(r.measured.latency.len(), 1000);
    }
    let m = RunnerResult::merge(&[("a".into(), a.clone()), ("b".into(), b.clone())]).unwrap();
    assert_eq!(m.runner_ids, vec![11, 22]);
    assert_eq!(m.measured.published, 2000);
    assert_eq!(m.measured.summary.expected, 4000);
    assert_eq!(m.measured.received, 4000);
    assert_eq!(m.measured.summary.delivered_ratio, 1.0);
    let mut whole = a.measured.latency.clone();
    whole.add(&b.measured.latency);
    assert_eq!(m.measured.latency, whole);
    assert_eq!(m.measured.summary.latency, whole.summary());
    // Through JSON and back, as `bench-runner merge` does: the same result.
    let a2: RunnerResult = serde_json::from_str(&serde_json::to_string(&a).unwrap()).unwrap();
    let b2: RunnerResult = serde_json::from_str(&serde_json::to_string(&b).unwrap()).unwrap();
    assert_eq!(
        RunnerResult::merge(&[("a".into(), a2), ("b".into(), b2)]).unwrap(),
        m
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sessions_stages_and_warmup_have_their_own_sections() {
    let s = nats_server(false);
    let r = run_ok(
        "protocol: nats\nratePerPublisher: 2000\nwarmupSeconds: 1\nsessions:\n- {messages: 300, pauseAfterSeconds: 1}\n- {messages: 500}\n",
        s.port,
        1,
    )
    .await;
    let w = r.warmup.as_ref().expect("warm-up section");
    assert_eq!(w.published, 2000, "1 s of warm-up at 2000/s");
    assert_eq!(w.received, 2000);
    assert_eq!(r.sessions.len(), 2);
    assert_eq!(
        (r.sessions[0].published, r.sessions[0].received),
        (300, 300)
    );
    assert_eq!(
        (r.sessions[1].published, r.sessions[1].received),
        (500, 500)
    );
    assert_eq!(
        r.measured.published, 800,
        "warm-up excluded from the measured part"
    );
    assert_eq!(r.measured.latency.len(), 800);

    let st = run_ok(
        "protocol: nats\nstages: {dimension: rate, start: 200, step: 200, count: 3, stageSeconds: 1}\n",
        s.port,
        1,
    )
    .await;
    let counts: Vec<u64> = st.stages.iter().map(|p| p.published).collect();
    assert_eq!(counts, vec![200, 400, 600]);
    assert_eq!(st.stages[2].rate_per_publisher, Some(600));
    assert!(st.stages.iter().all(|p| p.summary.delivered_ratio == 1.0));
    assert!(st.breaking_stage.is_none());

    // A threshold no stage can meet stops after the first stage.
    let br = run_ok(
        "protocol: nats\nstages: {dimension: rate, start: 100, step: 100, count: 5, stageSeconds: 1, stopWhen: {p99MicrosAbove: 1}}\n",
        s.port,
        1,
    )
    .await;
    assert_eq!(br.stages.len(), 1);
    assert_eq!(br.breaking_stage.as_deref(), Some("stage-1"));
}

/// Ramps rise linearly within each stage: stage k's message count is the integral of its rate
/// (rate dimension) or of its growing publisher count (connections dimension).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ramped_stages_send_the_integral_of_their_linear_load() {
    let s = nats_server(false);
    let r = run_ok(
        "protocol: nats\nstages: {dimension: rate, shape: ramp, start: 200, step: 200, count: 3, stageSeconds: 1}\n",
        s.port,
        1,
    )
    .await;
    let counts: Vec<u64> = r.stages.iter().map(|p| p.published).collect();
    assert_eq!(
        counts,
        [300, 500, 700],
        "200→400, 400→600, 600→800 msg/s for 1 s"
    );
    assert_eq!(
        (r.stages[1].rate_per_publisher, r.stages[1].ramp_to),
        (Some(400), Some(600))
    );
    assert!(r.stages.iter().all(|p| p.summary.delivered_ratio == 1.0));
    let table = bench_runner::report::render(&r);
    assert!(
        table.contains("stage-3: 600 → 800 msg/s per publisher × 1 publishers"),
        "{table}"
    );

    // Publishers 1→3 then 3→5 over 2 s at 100/s each: each joins when the count reaches it.
    let c = run_ok(
        "protocol: nats\nratePerPublisher: 100\nstages: {dimension: connections, shape: ramp, start: 1, step: 2, count: 2, stageSeconds: 2}\n",
        s.port,
        1,
    )
    .await;
    let counts: Vec<u64> = c.stages.iter().map(|p| p.published).collect();
    assert_eq!(counts, [200 + 100, 3 * 200 + 100]);
    assert_eq!((c.stages[1].publishers, c.stages[1].ramp_to), (3, Some(5)));
    let table = bench_runner::report::render(&c);
    assert!(
        table.contains("stage-2: 100 msg/s per publisher × 3 → 5 publishers"),
        "{table}"
    );
    assert!(c.stages.iter().all(|p| p.summary.delivered_ratio == 1.0));
    assert!(c.measured.errors.is_empty(), "{:?}", c.measured.errors);
}

/// The breaking point is the first stage that breaks `stopWhen`, here a server stalled for
/// 500 ms in the middle of stage 3 (of a step and of a ramp): stages 1 and 2 pass, stage 3
/// breaks, nothing after it is reported.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stop_when_finds_the_stage_where_a_server_stalls() {
    let monitor = free_port();
    let s = nats_server_with(free_port(), false, &["-m", &monitor.to_string()]);
    for shape in ["step", "ramp"] {
        let yaml = format!(
            "protocol: nats\nstages: {{dimension: rate, shape: {shape}, start: 200, step: 100, count: 5, stageSeconds: 1, stopWhen: {{p99MicrosAbove: 150000}}}}\n"
        );
        let pid = s.pid();
        let before = in_msgs_when_up(monitor);
        // Stage 3 spans 2.0–3.0 s after the first message; the stall covers 2.3–2.8 s.
        let staller = std::thread::spawn(move || {
            wait_for_traffic(monitor, before, Duration::from_secs(30));
            std::thread::sleep(Duration::from_millis(2300));
            signal(pid, "STOP");
            std::thread::sleep(Duration::from_millis(500));
            signal(pid, "CONT");
        });
        let r = run_ok(&yaml, s.port, 1).await;
        staller.join().unwrap();
        let names: Vec<&str> = r.stages.iter().map(|p| p.name.as_str()).collect();
        assert_eq!(names, ["stage-1", "stage-2", "stage-3"], "{shape}");
        assert_eq!(r.breaking_stage.as_deref(), Some("stage-3"), "{shape}");
        for p in &r.stages[..2] {
            let p99 = p.summary.latency.as_ref().unwrap().p99_us;
            assert!(p99 < 150_000, "{shape} {}: p99 {p99} µs", p.name);
        }
        let p99 = r.stages[2].summary.latency.as_ref().unwrap().p99_us;
        assert!(
            p99 >= 300_000,
            "{shape}: stall of 500 ms shows in stage 3's p99 ({p99} µs)"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn request_reply_measures_round_trips_and_connection_workloads_count_connects() {
    let s = nats_server(false);
    let r = run_ok(
        "protocol: nats\nsubscribers: 2\nratePerPublisher: 500\nmessagesPerPublisher: 500\nnats: {requestReply: true}\n",
        s.port,
        1,
    )
    .await;
    assert_eq!(r.measured.published, 500);
    assert_eq!(r.measured.received, 500);
    assert_eq!(r.measured.summary.delivered_ratio, 1.0);

    let c = run_ok(
        "protocol: nats\nconnections: {count: 50, concurrency: 10, holdSeconds: 1}\n",
        s.port,
        1,
    )
    .await;
    let cs = c.connections.expect("connection section");
    assert_eq!((cs.attempted, cs.connected, cs.failed), (50, 50, 0));
    assert_eq!(cs.connect_time.len(), 50);
    assert!(cs.connections_per_second > 0.0);
    assert!(cs.held_seconds >= 1.0);
}

#[tokio::test]
async fn bad_workloads_are_rejected_naming_the_field() {
    let e = run(
        workload("protocol: nats\npayloadBytes: 8\ndurationSeconds: 1\n"),
        "nats://127.0.0.1:1",
        opts(1),
    )
    .await
    .unwrap_err()
    .to_string();
    assert!(e.contains("workload.payloadBytes"), "{e}");
    let e = run(
        workload("protocol: nats\ndurationSeconds: 1\n"),
        "mqtt://127.0.0.1:1",
        opts(1),
    )
    .await
    .unwrap_err()
    .to_string();
    assert!(e.contains("does not fit protocol"), "{e}");
}

/// Two runs against one server at once. With the same subjects, each counts the other's
/// messages apart (foreign) and its own figures stay exact; with each run's own names (what
/// the operator configures) no message of the other run even arrives.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_runs_on_one_server_never_count_each_others_messages() {
    use runner_api::agent::RunIsolation;
    let s = nats_server(false);
    let target = format!("nats://127.0.0.1:{}", s.port);
    let yaml = "protocol: nats\npublishers: 1\nsubscribers: 1\nratePerPublisher: 500\ndurationSeconds: 2\ndrainSeconds: 2\n";
    let b = std::sync::Arc::new(tokio::sync::Barrier::new(2));
    let o = |tag| RunOptions {
        runner_id: 1,
        run_tag: tag,
        gate: Some(std::sync::Arc::new(Barrier(b.clone()))),
        ..Default::default()
    };
    let (a, c) = tokio::join!(
        run(workload(yaml), &target, o(1)),
        run(workload(yaml), &target, o(2))
    );
    for r in [a.unwrap(), c.unwrap()] {
        let m = &r.measured;
        assert_eq!(
            (m.published, m.received, m.summary.expected),
            (1000, 1000, 1000)
        );
        assert_eq!((m.duplicates, m.out_of_order, m.received_remote), (0, 0, 0));
        assert_eq!(m.latency.len(), 1000);
        assert_eq!(m.foreign, 1000, "the other run's messages, counted apart");
    }
    let isolated = |id: &str, tag| {
        let iso = RunIsolation { id: id.into(), tag };
        let mut w = workload(yaml);
        iso.apply(&mut w, 1);
        (w, iso.tag_of(1))
    };
    let ((wa, ta), (wc, tc)) = (isolated("runa", 5), isolated("runc", 9));
    assert_ne!(wa.topic_prefix, wc.topic_prefix);
    let (a, c) = tokio::join!(run(wa, &target, o(ta)), run(wc, &target, o(tc)));
    for r in [a.unwrap(), c.unwrap()] {
        let m = &r.measured;
        assert_eq!((m.published, m.received, m.foreign), (1000, 1000, 0));
        assert_eq!(m.summary.delivered_ratio, 1.0);
    }
}
