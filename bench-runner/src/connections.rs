//! Connection workloads: open N connections as fast as allowed (connections/s, connect-time
//! percentiles), in equal steps each held for a while when `steps` > 1 (so the operator can
//! fit the server's memory against its connection count), hold them idle, close them.
use crate::clock;
use crate::cpu;
use crate::drivers::Driver;
use crate::options::RunOptions;
use msgbench_crds::workload::Workload;
use runner_api::histo::Histo;
use runner_api::result::{self, ConnectionStats, Generator, RunnerResult, SegmentStats};
use runner_api::target::TargetUrl;
use std::num::NonZeroU32;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::Semaphore;

/// Connect times, errors by kind, and when the last connection came up (µs).
type Tally = (Histo, std::collections::BTreeMap<String, u64>, u64);

pub async fn run(
    w: Arc<Workload>,
    target: TargetUrl,
    driver: Arc<dyn Driver>,
    opts: RunOptions,
) -> anyhow::Result<RunnerResult> {
    let c = w.connections.clone().expect("connection workload");
    if let Some(g) = &opts.gate {
        g.wait().await?;
    }
    let cpu0 = cpu::process_cpu_seconds().unwrap_or(0.0);
    let start = clock::now_us();
    let sem = Arc::new(Semaphore::new(c.concurrency as usize));
    let held: Arc<Mutex<Vec<Box<dyn Send>>>> = Arc::default();
    let stats: Arc<Mutex<Tally>> = Arc::default();
    // Each step opens up to the next level, then holds it so the server's memory settles and
    // the operator samples it; the last level is held for `holdSeconds`.
    let levels = c.levels();
    let (mut opened, mut opening_us, mut held_seconds) = (0u32, 0u64, 0.0);
    for (k, &level) in levels.iter().enumerate() {
        let step_start = clock::now_us();
        stats.lock().expect("lock").2 = 0;
        let opening = Opening {
            sem: &sem,
            driver: &driver,
            held: &held,
            stats: &stats,
            // validate() refuses 0; were it to get here, it means no limit.
            max_per_second: c.max_per_second.and_then(NonZeroU32::new),
        };
        opening.open(opened..level, step_start).await?;
        opened = level;
        let last_up = stats.lock().expect("lock").2;
        opening_us += last_up.saturating_sub(step_start);
        let last = k + 1 == levels.len();
        let hold = if last {
            c.hold_seconds
        } else {
            c.step_hold_seconds
        };
        let hold_start = clock::now_us();
        tokio::time::sleep(Duration::from_secs(u64::from(hold))).await;
        if last {
            held_seconds = (clock::now_us() - hold_start) as f64 / 1e6;
        }
    }
    let (hist, errors, _) = stats.lock().expect("lock").clone();
    let connected = held.lock().expect("lock").len() as u64;
    held.lock().expect("lock").clear();
    let wall = (clock::now_us() - start) as f64 / 1e6;
    let mut cs = ConnectionStats {
        attempted: u64::from(c.count),
        connected,
        failed: u64::from(c.count) - connected,
        // Time spent opening, the holds between steps left out.
        connect_seconds: opening_us as f64 / 1e6,
        held_seconds,
        connect_time: hist,
        errors,
        ..Default::default()
    };
    cs.finalize();
    let generator = Generator {
        cpu_seconds: cpu::process_cpu_seconds().unwrap_or(0.0) - cpu0,
        wall_seconds: wall,
        cpus: cpu::available_cpus(),
        ..Default::default()
    };
    let measured = SegmentStats::new("measured", w.topics, driver.delivery());
    Ok(connection_result(
        &w, &target, &opts, generator, measured, cs,
    ))
}

/// A connection workload's result: its connection figures, and no messaging segments.
fn connection_result(
    w: &Workload,
    target: &TargetUrl,
    opts: &RunOptions,
    generator: Generator,
    measured: SegmentStats,
    cs: ConnectionStats,
) -> RunnerResult {
    let mut r = RunnerResult {
        format: result::FORMAT.into(),
        target: target.raw.clone(),
        runner_ids: vec![opts.runner_id],
        workload: w.clone(),
        generator,
        warmup: None,
        measured,
        sessions: vec![],
        stages: vec![],
        breaking_stage: None,
        connections: Some(cs),
        rest: Vec::new(),
        timeline: vec![],
    };
    r.finalize();
    r
}

/// What one step needs to open connections: shared by all steps.
struct Opening<'a> {
    sem: &'a Arc<Semaphore>,
    driver: &'a Arc<dyn Driver>,
    held: &'a Arc<Mutex<Vec<Box<dyn Send>>>>,
    stats: &'a Arc<Mutex<Tally>>,
    /// Non-zero by type: the pacing divides by it.
    max_per_second: Option<NonZeroU32>,
}

impl Opening<'_> {
    /// Opens connections `ids` (at most `max_per_second` from `from_us` on) and waits until
    /// every attempt has ended.
    async fn open(&self, ids: std::ops::Range<u32>, from_us: u64) -> anyhow::Result<()> {
        let mut tasks = Vec::with_capacity(ids.len());
        let first = ids.start;
        for i in ids {
            if let Some(mps) = self.max_per_second {
                let at = from_us + u64::from(i - first) * 1_000_000 / u64::from(mps.get());
                tokio::time::sleep_until(clock::instant_at(at).into()).await;
            }
            let permit = self.sem.clone().acquire_owned().await?;
            let (driver, held, stats) =
                (self.driver.clone(), self.held.clone(), self.stats.clone());
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
        Ok(())
    }
}

fn first_line(e: &anyhow::Error) -> String {
    let s = format!("{e:#}");
    s.lines().next().unwrap_or("").chars().take(80).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::drivers::{Publisher, Stop};
    use crate::recorder::ReceiveRecorder;
    use futures::future::BoxFuture;

    /// Connects at once to nothing: only the pacing is under test.
    struct Instant;

    impl Driver for Instant {
        fn subscribe(
            &self,
            _: u32,
            _: Vec<u32>,
            _: ReceiveRecorder,
            _: Stop,
        ) -> BoxFuture<'_, anyhow::Result<tokio::task::JoinHandle<()>>> {
            Box::pin(async { anyhow::bail!("not a messaging driver") })
        }
        fn publisher(
            &self,
            _: u32,
            _: crate::recorder::Shared,
            _: ReceiveRecorder,
            _: Stop,
        ) -> BoxFuture<'_, anyhow::Result<Box<dyn Publisher>>> {
            Box::pin(async { anyhow::bail!("not a messaging driver") })
        }
        fn connect_idle(&self, _: u32) -> BoxFuture<'_, anyhow::Result<Box<dyn Send>>> {
            Box::pin(async { Ok(Box::new(()) as Box<dyn Send>) })
        }
    }

    /// A rate of 0 that got past validation must not divide by zero in the pacing (it did:
    /// `1_000_000 / 0`); as the pacing's type it now means no limit.
    #[tokio::test]
    async fn pacing_never_divides_by_zero() {
        let driver: Arc<dyn Driver> = Arc::new(Instant);
        let (sem, held, stats) = (Arc::new(Semaphore::new(4)), Arc::default(), Arc::default());
        let opening = Opening {
            sem: &sem,
            driver: &driver,
            held: &held,
            stats: &stats,
            max_per_second: NonZeroU32::new(0),
        };
        opening.open(0..3, clock::now_us()).await.unwrap();
        assert_eq!(held.lock().unwrap().len(), 3);
    }
}
