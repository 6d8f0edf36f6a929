//! Connection workloads: open N connections as fast as allowed (connections/s, connect-time
//! percentiles), hold them idle for a while, close them.
use crate::clock;
use crate::cpu;
use crate::drivers::{Driver, Target};
use crate::engine::RunOptions;
use crate::histo::Histo;
use crate::result::{self, ConnectionStats, Generator, PhaseStats, RunResult};
use msgbench_crds::workload::Workload;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::Semaphore;

/// Connect times, errors by kind, and when the last connection came up (µs).
type Tally = (Histo, std::collections::BTreeMap<String, u64>, u64);

pub async fn run(
    w: Arc<Workload>,
    target: Target,
    driver: Arc<dyn Driver>,
    opts: RunOptions,
) -> anyhow::Result<RunResult> {
    let c = w.connections.clone().expect("connection workload");
    if let Some(g) = &opts.gate {
        g.wait().await?;
    }
    let cpu0 = cpu::process_cpu_seconds().unwrap_or(0.0);
    let start = clock::now_us();
    let sem = Arc::new(Semaphore::new(c.concurrency as usize));
    let held: Arc<Mutex<Vec<Box<dyn Send>>>> = Arc::default();
    let stats: Arc<Mutex<Tally>> = Arc::default();
    let mut tasks = Vec::with_capacity(c.count as usize);
    for i in 0..c.count {
        if let Some(mps) = c.max_per_second {
            let at = start + u64::from(i) * 1_000_000 / u64::from(mps);
            tokio::time::sleep_until(clock::instant_at(at).into()).await;
        }
        let permit = sem.clone().acquire_owned().await?;
        let (driver, held, stats) = (driver.clone(), held.clone(), stats.clone());
        tasks.push(tokio::spawn(async move {
            let t0 = clock::now_us();
            let r = tokio::time::timeout(Duration::from_secs(30), driver.connect_idle(i)).await;
            let took = clock::now_us() - t0;
            drop(permit);
            let mut s = stats.lock().expect("lock");
            match r {
                Ok(Ok(conn)) => {
                    s.0.record(took);
                    s.2 = s.2.max(clock::now_us());
                    held.lock().expect("lock").push(conn);
                }
                Ok(Err(e)) => {
                    *s.1.entry(format!("connect: {}", first_line(&e)))
                        .or_default() += 1
                }
                Err(_) => *s.1.entry("connectTimeout".into()).or_default() += 1,
            }
        }));
    }
    for t in tasks {
        t.await?;
    }
    let (hist, errors, last) = stats.lock().expect("lock").clone();
    let connected = held.lock().expect("lock").len() as u64;
    let hold_start = clock::now_us();
    tokio::time::sleep(Duration::from_secs(u64::from(c.hold_seconds))).await;
    let held_seconds = (clock::now_us() - hold_start) as f64 / 1e6;
    held.lock().expect("lock").clear();
    let wall = (clock::now_us() - start) as f64 / 1e6;
    let mut cs = ConnectionStats {
        attempted: u64::from(c.count),
        connected,
        failed: u64::from(c.count) - connected,
        connect_seconds: last.saturating_sub(start) as f64 / 1e6,
        held_seconds,
        connect_time: hist,
        errors,
        ..Default::default()
    };
    cs.finalize();
    let mut r = RunResult {
        format: result::FORMAT.into(),
        target: target.raw.clone(),
        runner_ids: vec![opts.runner_id],
        workload: (*w).clone(),
        generator: Generator {
            cpu_seconds: cpu::process_cpu_seconds().unwrap_or(0.0) - cpu0,
            wall_seconds: wall,
            cpus: cpu::available_cpus(),
            ..Default::default()
        },
        warmup: None,
        measured: PhaseStats::new("measured", w.topics, driver.delivery()),
        sessions: vec![],
        stages: vec![],
        breaking_stage: None,
        connections: Some(cs),
        rest: Vec::new(),
        timeline: vec![],
    };
    r.finalize();
    Ok(r)
}

fn first_line(e: &anyhow::Error) -> String {
    let s = format!("{e:#}");
    s.lines().next().unwrap_or("").chars().take(80).collect()
}
