//! A progress bar on a terminal only (never in logs or pods).
use crate::plan::{Length, PlanPhase};
use crate::recorder::Shared;
use msgbench_crds::workload::Workload;
use std::time::Duration;

/// The bar of one run (inert when not on a terminal).
pub struct ConsoleProgress {
    task: Option<tokio::task::JoinHandle<()>>,
    bar: Option<indicatif::ProgressBar>,
}

impl ConsoleProgress {
    pub fn new(
        enabled: bool,
        phases: &[PlanPhase],
        w: &Workload,
        stats: Vec<Shared>,
    ) -> ConsoleProgress {
        if !enabled {
            return ConsoleProgress {
                task: None,
                bar: None,
            };
        }
        let planned: u64 = phases
            .iter()
            .map(|p| match p.length {
                Length::Timed { seconds, .. } => u64::from(seconds),
                Length::Count {
                    messages,
                    pause_after_seconds,
                    ..
                } => p.rate.map_or(0, |r| messages / u64::from(r)) + u64::from(pause_after_seconds),
            })
            .sum::<u64>()
            + u64::from(w.drain_seconds);
        let bar = indicatif::ProgressBar::new(planned.max(1));
        bar.set_style(
            indicatif::ProgressStyle::with_template(
                "{elapsed_precise} [{bar:30}] {pos}/{len}s {msg}",
            )
            .expect("template")
            .progress_chars("=> "),
        );
        let b = bar.clone();
        let task = tokio::spawn(async move {
            let t0 = std::time::Instant::now();
            loop {
                tokio::time::sleep(Duration::from_millis(250)).await;
                let (mut p, mut r) = (0u64, 0u64);
                for s in &stats {
                    let s = s.lock().expect("stats lock");
                    p += s.phases.iter().map(|x| x.published).sum::<u64>();
                    r += s.phases.iter().map(|x| x.received).sum::<u64>();
                }
                b.set_position(t0.elapsed().as_secs());
                b.set_message(format!("published {p} received {r}"));
            }
        });
        ConsoleProgress {
            task: Some(task),
            bar: Some(bar),
        }
    }
}

impl Drop for ConsoleProgress {
    fn drop(&mut self) {
        if let Some(t) = self.task.take() {
            t.abort();
        }
        if let Some(b) = self.bar.take() {
            b.finish_and_clear();
        }
    }
}
