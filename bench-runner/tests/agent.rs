//! `bench-runner agent` against a real nats-server: ready only once connected, nothing sent
//! before `/start`, one record per trial held for the operator, only the token opens the
//! control endpoint, records survive a log that splits and interleaves lines, and a barrier
//! that times out with a clear error.
mod support;
use bench_runner::agent;
use runner_api::agent::{AgentConfig, AgentResults, RawResultLine, ResultLine, ScheduledTrial};
use runner_api::control_auth::{Claim, ControlSigner};
use runner_api::result_frames;
use std::net::SocketAddr;
use std::time::{Duration, Instant};
use support::*;

fn config(port: u16, trials: u32, barrier: u32) -> AgentConfig {
    AgentConfig {
        target: format!("nats://127.0.0.1:{port}"),
        workload: workload(
            "protocol: nats\npublishers: 1\nsubscribers: 1\npayloadBytes: 32\nratePerPublisher: 500\nmessagesPerPublisher: 250\ndrainSeconds: 1\n",
        ),
        trials,
        settle_seconds: 0,
        barrier_timeout_seconds: barrier,
        connect_timeout_seconds: 30,
        schedule: vec![],
        trial_barrier: false,
        results_hold_seconds: 30,
        target_auth: vec![],
        target_tls: vec![],
        // As the operator writes it: every trial on subjects and a tag of its own.
        isolation: Some(runner_api::agent::RunIsolation {
            id: "a1b2c3d4g1".into(),
            tag: 77,
        }),
        // As the operator writes it: the run's runner count (ids 1 to 3 here).
        runners: 3,
    }
}

/// A credential the operator signed for `method path` of this run at `at_s` (unix seconds).
fn signed_at(at_s: u64, method: &str, path: &str) -> String {
    let claim = Claim {
        scope: TEST_SCOPE,
        method,
        path,
    };
    let nonce = (now_ms() as u128).to_be_bytes();
    test_signer().credential(&claim, at_s, nonce)
}

/// A control request refused with 403 and `why` in its answer.
async fn refused(addr: SocketAddr, credential: &str, method: &str, path: &str, why: &str) {
    let (code, body) = http_as(
        addr,
        Some(credential),
        method,
        path,
        "{\"startAtUnixMs\":1}",
    )
    .await;
    assert_eq!(code, 403, "{method} {path}: {body}");
    assert!(
        body.contains(why),
        "{method} {path}: {body:?} does not say {why:?}"
    );
}

/// Replays are refused with a reason: a credential used twice, one signed for another
/// endpoint, one past its time. (Version 1 credentials were bearer tokens for any path for
/// five minutes: each of these passed.)
async fn replays_are_refused(addr: SocketAddr) {
    let used = credential(&test_signer(), TEST_SCOPE, "GET", "/progress");
    let (code, body) = http_as(addr, Some(&used), "GET", "/progress", "").await;
    assert_eq!(code, 200, "{body}");
    refused(addr, &used, "GET", "/progress", "already used").await;
    let for_progress = credential(&test_signer(), TEST_SCOPE, "GET", "/progress");
    refused(addr, &for_progress, "POST", "/start", "another request").await;
    refused(
        addr,
        &for_progress,
        "GET",
        "/results",
        "signed for GET /progress",
    )
    .await;
    let expired = signed_at(now_ms() / 1000 - 120, "GET", "/progress");
    refused(addr, &expired, "GET", "/progress", "expired").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn barrier_holds_the_load_until_start_then_results_are_held_until_acknowledged() {
    let s = nats_server(false);
    let state = agent::AgentState::new(test_verifier());
    let addr = agent::serve("127.0.0.1:0".parse().unwrap(), state.clone())
        .await
        .unwrap();
    let cfg = config(s.port, 2, 60);
    let held = state.clone();
    let live = state.live();
    let run = tokio::spawn(async move {
        let mut lines = Vec::new();
        let mut emit = |l: &ResultLine| {
            lines.push(l.clone());
            Ok(())
        };
        agent::run(cfg, 3, state, &mut emit).await?;
        let acked = held.hold_results(Duration::from_secs(30)).await;
        anyhow::Ok((lines, acked))
    });

    // Ready once connected (the probe needs no token); nothing published at the barrier.
    let deadline = Instant::now() + Duration::from_secs(20);
    while http(addr, "GET", "/ready", "").await.0 != 200 {
        assert!(Instant::now() < deadline, "agent never became ready");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    let p = progress(addr).await;
    assert!(p.ready && !p.started && !p.finished);
    assert_eq!((p.trial, p.published), (1, 0));

    // Without the token nothing moves: no release, no progress, no results.
    let at = now_ms() + 300;
    let start = format!("{{\"startAtUnixMs\":{at}}}");
    assert_eq!(http_open(addr, "POST", "/start", &start).await.0, 401);
    assert_eq!(http_open(addr, "GET", "/progress", "").await.0, 401);
    assert_eq!(http_open(addr, "GET", "/results", "").await.0, 401);
    let other_key = credential(
        &ControlSigner::from_seed([8; 32]),
        TEST_SCOPE,
        "POST",
        "/start",
    );
    let other_run = credential(&test_signer(), "run-uid-2", "POST", "/start");
    for wrong in [other_key, other_run, "0123456789abcdef".into()] {
        let refused = http_as(addr, Some(&wrong), "POST", "/start", &start).await;
        assert_eq!(refused.0, 403, "{refused:?}");
    }
    replays_are_refused(addr).await;
    assert!(
        !progress(addr).await.started,
        "a refused /start released the load"
    );

    let (code, body) = http(addr, "POST", "/start", &start).await;
    assert_eq!(code, 200, "{body}");
    // A resent /start (operator restart) keeps the first time.
    let (_, again) = http(addr, "POST", "/start", "{\"startAtUnixMs\":1}").await;
    assert!(again.contains(&at.to_string()), "{again}");

    // Finished: the records wait on /results; an ack for fewer than all is refused.
    let deadline = Instant::now() + Duration::from_secs(60);
    while !progress(addr).await.finished {
        assert!(Instant::now() < deadline, "agent never finished");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let (code, body) = http(addr, "GET", "/results", "").await;
    assert_eq!(code, 200);
    let held: AgentResults = serde_json::from_str(&body).unwrap();
    assert_eq!((held.runner_id, held.trials, held.finished), (3, 2, true));
    assert_eq!(
        held.records.iter().map(|l| l.trial).collect::<Vec<_>>(),
        [1, 2]
    );
    assert!(
        !run.is_finished(),
        "the agent let go of its results before the ack"
    );
    let ack = |n: u32| format!("{{\"records\":{n}}}");
    assert_eq!(http(addr, "POST", "/results/ack", &ack(1)).await.0, 409);
    assert_eq!(http(addr, "POST", "/results/ack", &ack(2)).await.0, 200);

    let (lines, acked) = tokio::time::timeout(Duration::from_secs(10), run)
        .await
        .expect("agent exits after the ack")
        .unwrap()
        .expect("agent run");
    assert!(acked);
    assert_eq!(
        lines, held.records,
        "the endpoint serves exactly what was emitted"
    );
    assert!(
        lines[0].started_unix_ms >= at,
        "load started before the common start"
    );
    for l in &lines {
        assert_eq!(l.runner_id, 3);
        assert_eq!(l.result.measured.published, 250);
        assert_eq!(l.result.measured.received, 250);
    }
    live_series_match_the_results(&live.render(), &lines);
    // Each trial ran on its own subjects, yet the trials merge: results name the workload as
    // specified, not the trial's wire names.
    let trials: Vec<(String, runner_api::result::RunnerResult)> = lines
        .iter()
        .map(|l| (format!("trial {}", l.trial), l.result.clone()))
        .collect();
    let merged = runner_api::result::RunnerResult::merge(&trials).expect("trials merge");
    assert_eq!(merged.measured.published, 500);
    records_survive_a_log_that_splits_and_interleaves(&lines);
}

/// The live `/metrics` series of each trial counted what its result counts (no warm-up here),
/// and a trial that ended is behind no schedule.
fn live_series_match_the_results(text: &str, lines: &[ResultLine]) {
    use bench_runner::live_metrics::{GENERATOR_LAG, LATENCY, RECEIVED, SENT};
    for l in lines {
        let labels = format!(r#"{{round="{0}",trial="{0}",variant=""}}"#, l.trial);
        let value = |name: &str| {
            let prefix = format!("{name}{labels} ");
            let v = text.lines().find_map(|x| x.strip_prefix(prefix.as_str()));
            v.unwrap_or_else(|| panic!("{prefix} missing:\n{text}"))
                .parse::<f64>()
                .unwrap()
        };
        let m = &l.result.measured;
        assert_eq!(value(SENT), m.published as f64);
        assert_eq!(value(RECEIVED), m.received as f64);
        assert_eq!(value(&format!("{LATENCY}_count")), m.latency.len() as f64);
        assert_eq!(value(GENERATOR_LAG), 0.0);
    }
}

/// What a container runtime does to a log: lines over 16 KiB are cut into parts, and lines of
/// the other stream land between the parts (with colour codes).
fn runtime_log(stdout_lines: &[String]) -> String {
    let noise = "\u{1b}[2m2026-11-23T10:00:00Z\u{1b}[0m \u{1b}[32m INFO\u{1b}[0m async_nats: event: connected";
    let mut log = String::new();
    for l in stdout_lines {
        let mut rest = l.as_str();
        while rest.len() > 16 * 1024 {
            let mut cut = 16 * 1024;
            while !rest.is_char_boundary(cut) {
                cut -= 1;
            }
            log.push_str(&rest[..cut]);
            log.push('\n');
            log.push_str(noise);
            log.push('\n');
            rest = &rest[cut..];
        }
        log.push_str(rest);
        log.push('\n');
        log.push_str(noise);
        log.push('\n');
    }
    log
}

/// Records far above 16 KiB arrive intact through such a log; a lost or altered frame is
/// reported for its trial, never misread.
fn records_survive_a_log_that_splits_and_interleaves(lines: &[ResultLine]) {
    let mut big = lines.to_vec();
    for l in &mut big {
        l.result.target = format!("nats://{}:4222", "h".repeat(40_000));
    }
    let frames: Vec<String> = big
        .iter()
        .flat_map(|l| result_frames::frames(l).unwrap())
        .collect();
    assert!(
        frames.len() >= 2 * 5,
        "40 KB records go out as several frames"
    );
    assert!(frames.iter().all(|f| f.len() < 16 * 1024));
    let got = result_frames::reassemble(&runtime_log(&frames), 3);
    assert!(got.damaged.is_empty(), "{:?}", got.damaged);
    let sent: Vec<RawResultLine> = big
        .iter()
        .map(|l| RawResultLine::from_line(l).unwrap())
        .collect();
    assert_eq!(got.records.into_values().collect::<Vec<_>>(), sent);
    // Another runner's frames are not ours.
    assert!(result_frames::reassemble(&runtime_log(&frames), 4)
        .records
        .is_empty());

    // Unframed, the same record is cut by the runtime and cannot be read back.
    let whole = serde_json::to_string(&big[0]).unwrap();
    assert!(runtime_log(&[whole])
        .lines()
        .all(|l| serde_json::from_str::<ResultLine>(l).is_err()));

    // Trial 1 loses a frame, trial 2 has one byte altered.
    let mut damaged = frames.clone();
    let t1: Vec<usize> = (0..damaged.len())
        .filter(|i| damaged[*i].contains(" 3 1 "))
        .collect();
    damaged.remove(t1[1]);
    let t2 = damaged.iter().position(|f| f.contains(" 3 2 2/")).unwrap();
    damaged[t2] = damaged[t2].replacen("hhhh", "hhhx", 1);
    let got = result_frames::reassemble(&runtime_log(&damaged), 3);
    assert!(got.records.is_empty());
    assert!(got.damaged[&1].contains("frames 2 of"), "{:?}", got.damaged);
    assert!(
        got.damaged[&2].contains("digest does not match"),
        "{:?}",
        got.damaged
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_barrier_never_released_fails_with_a_clear_error() {
    let s = nats_server(false);
    let state = agent::AgentState::new(test_verifier());
    let mut emit = |_: &ResultLine| Ok(());
    let t0 = Instant::now();
    let err = agent::run(config(s.port, 1, 1), 1, state, &mut emit)
        .await
        .expect_err("no /start → error");
    let msg = format!("{err:#}");
    assert!(msg.contains("start barrier timed out"), "{msg}");
    assert!(msg.contains("barrierTimeoutSeconds"), "{msg}");
    assert!(t0.elapsed() < Duration::from_secs(20));
}

/// A variants schedule runs each entry with its own workload, in the given order, and tags
/// each line with its variant and round.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_schedule_runs_each_variant_in_order_and_tags_its_lines() {
    let s = nats_server(false);
    let state = agent::AgentState::new(test_verifier());
    let addr = agent::serve("127.0.0.1:0".parse().unwrap(), state.clone())
        .await
        .unwrap();
    let mut cfg = config(s.port, 2, 60);
    let small = cfg.workload.clone();
    let mut big = small.clone();
    big.payload_bytes = 512;
    big.messages_per_publisher = Some(100);
    let entry = |round, variant: &str, w: &msgbench_crds::workload::Workload| ScheduledTrial {
        round,
        variant: variant.into(),
        target: cfg.target.clone(),
        workload: w.clone(),
    };
    cfg.schedule = vec![
        entry(1, "big", &big),
        entry(1, "small", &small),
        entry(2, "small", &small),
        entry(2, "big", &big),
    ];
    let run = tokio::spawn(async move {
        let mut lines = Vec::new();
        let mut emit = |l: &ResultLine| {
            lines.push(l.clone());
            Ok(())
        };
        agent::run(cfg, 1, state, &mut emit).await.map(|_| lines)
    });
    let deadline = Instant::now() + Duration::from_secs(20);
    while http(addr, "GET", "/ready", "").await.0 != 200 {
        assert!(Instant::now() < deadline, "agent never became ready");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let (code, _) = http(
        addr,
        "POST",
        "/start",
        &format!("{{\"startAtUnixMs\":{}}}", now_ms()),
    )
    .await;
    assert_eq!(code, 200);
    let lines = tokio::time::timeout(Duration::from_secs(60), run)
        .await
        .expect("agent finished")
        .unwrap()
        .expect("agent run");
    let got: Vec<(u32, Option<&str>, Option<u32>, u64)> = lines
        .iter()
        .map(|l| {
            (
                l.trial,
                l.variant.as_deref(),
                l.round,
                l.result.measured.published,
            )
        })
        .collect();
    assert_eq!(
        got,
        [
            (1, Some("big"), Some(1), 100),
            (2, Some("small"), Some(1), 250),
            (3, Some("small"), Some(2), 250),
            (4, Some("big"), Some(2), 100),
        ]
    );
    for l in &lines {
        assert_eq!(l.result.measured.received, l.result.measured.published);
    }
}

/// With the trial barrier (several runners), trial 2 waits for its own `/start {trial: 2}`
/// after the settle pause, and says so in `/progress`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_the_trial_barrier_each_later_trial_waits_for_its_own_start() {
    let s = nats_server(false);
    let state = agent::AgentState::new(test_verifier());
    let addr = agent::serve("127.0.0.1:0".parse().unwrap(), state.clone())
        .await
        .unwrap();
    let mut cfg = config(s.port, 2, 60);
    cfg.trial_barrier = true;
    let run = tokio::spawn(async move {
        let mut lines = Vec::new();
        let mut emit = |l: &ResultLine| {
            lines.push(l.clone());
            Ok(())
        };
        agent::run(cfg, 1, state, &mut emit).await.map(|_| lines)
    });
    let deadline = Instant::now() + Duration::from_secs(20);
    while progress(addr).await.waiting_for != 1 {
        assert!(Instant::now() < deadline, "agent never waited for trial 1");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let start = |trial: u32| format!("{{\"startAtUnixMs\":{},\"trial\":{trial}}}", now_ms());
    assert_eq!(http(addr, "POST", "/start", &start(1)).await.0, 200);
    // Trial 1 (250 messages at 500/s) ends; the agent then waits for trial 2 and sends nothing.
    let deadline = Instant::now() + Duration::from_secs(30);
    let waiting = loop {
        let p = progress(addr).await;
        if p.waiting_for == 2 {
            break p;
        }
        assert!(
            Instant::now() < deadline,
            "agent never waited for trial 2: {p:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    tokio::time::sleep(Duration::from_millis(700)).await;
    let still = progress(addr).await;
    assert_eq!((still.waiting_for, still.published), (2, waiting.published));
    assert_eq!(
        still.trial_start_unix_ms, 0,
        "trial 2 has no start yet: {still:?}"
    );
    let released_at = now_ms();
    let at = released_at + 200;
    let body = format!("{{\"startAtUnixMs\":{at},\"trial\":2}}");
    assert_eq!(http(addr, "POST", "/start", &body).await.0, 200);
    // The start it keeps for its current trial, what the operator sends a late runner too.
    let kept = progress(addr).await;
    assert_eq!((kept.trial, kept.trial_start_unix_ms), (2, at), "{kept:?}");
    let lines = tokio::time::timeout(Duration::from_secs(60), run)
        .await
        .expect("agent finished")
        .unwrap()
        .expect("agent run");
    assert_eq!(lines.len(), 2);
    assert!(
        lines[1].started_unix_ms >= released_at - 5,
        "trial 2 started before its release"
    );
    assert_eq!(lines[1].result.measured.received, 250);
}
