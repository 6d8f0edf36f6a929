//! The operator holds every record of a run until all runners are in, then merges them. This
//! measures the heap that takes for the largest result set admission allows and holds it to a
//! budget well inside the chart's 128Mi limit (the rest of the process needs room too).
use msgbench_operator_core::run::results::{self, TrialRecord};
use peak_alloc::PeakAlloc;
use runner_api::agent::{RawResultLine, ResultLine};
use runner_api::histo::Histo;
use runner_api::result::SegmentStats;

#[global_allocator]
static HEAP: PeakAlloc = PeakAlloc;

/// A histogram with values spread over 100 µs .. 1 s, as a loaded server produces (a narrow
/// one would compress to nothing and make the records look smaller than they are).
fn spread(seed: u64, n: u64) -> Histo {
    let mut h = Histo::default();
    for i in 0..n {
        let x = (i.wrapping_mul(2_654_435_761).wrapping_add(seed)) % 10_000;
        h.record(100 + x * x / 100);
    }
    h
}

fn phase(name: &str, seed: u64) -> SegmentStats {
    let mut p = SegmentStats::new(name, 1, Default::default());
    p.published = 20_000;
    p.published_by_topic = vec![20_000];
    p.subscribers_by_topic = vec![1];
    p.received = 20_000;
    p.publish_seconds = 10.0;
    p.receive_seconds = 10.0;
    p.latency = spread(seed, 4_000);
    p.ack_latency = spread(seed + 1, 4_000);
    p.send_lag = spread(seed + 2, 4_000);
    p
}

/// Runner `runner`'s record of `trial` with `stages` stages (each with full histograms).
fn record(runner: u16, trial: u32, stages: usize) -> RawResultLine {
    let mut l: ResultLine =
        runner_api::testing::record(runner, trial, &[1000], 1, 1_700_000_000_000);
    l.result.measured = phase("measured", u64::from(runner));
    l.result.stages = (0..stages)
        .map(|s| phase(&format!("stage-{s}"), s as u64))
        .collect();
    l.result.finalize();
    RawResultLine::from_line(&l).expect("record encodes")
}

/// `runners` x `trials` records of `stages` stages each, merged as the operator merges them:
/// (record JSON bytes held, peak heap of the merge above what the records hold).
fn measure(runners: u16, trials: u32, stages: usize) -> (usize, usize) {
    let one = record(1, 1, stages);
    let json = one.json_bytes();
    let lines: Vec<RawResultLine> = (1..=trials)
        .flat_map(|t| (1..=runners).map(move |r| (r, t)))
        .map(|(r, t)| {
            let mut l = one.clone();
            (l.runner_id, l.trial) = (r, t);
            l
        })
        .collect();
    drop(one);
    let records: Vec<TrialRecord> = lines.iter().map(|l| (l.trial, l)).collect();
    let held = HEAP.current_usage();
    HEAP.reset_peak_usage();
    let c = results::collect(&records, runners as usize, trials as usize).expect("merges");
    assert_eq!(c.trials.len(), trials as usize);
    let peak = HEAP.peak_usage().saturating_sub(held);
    (json * lines.len(), peak)
}

const MIB: usize = 1 << 20;

#[test]
fn the_largest_admitted_results_merge_within_the_budget() {
    // The admission bound (runners x trials x phases <= 2560, phases <= 34) at its corners:
    // many runners and trials with one phase, and few records with the most stages.
    for (runners, trials, stages) in [(64u16, 20u32, 0usize), (1, 3, 32), (4, 20, 31)] {
        let (held, peak) = measure(runners, trials, stages);
        eprintln!(
            "{runners} runners x {trials} trials x {stages} stages: records {:.1} MiB, merge peak {:.1} MiB",
            held as f64 / MIB as f64,
            peak as f64 / MIB as f64
        );
        assert!(held + peak < 80 * MIB, "{held} + {peak} bytes");
    }
}
