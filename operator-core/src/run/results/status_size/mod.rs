//! The size of `BenchmarkRun.status`: the largest status admission allows, a large realistic
//! run and the demo's run, each serialised as the API server stores it. Every status write
//! re-sends the whole object to every watcher, and etcd refuses objects past 1.5 MiB, so the
//! worst case must stay under [`STATUS_BOUND_BYTES`]. Figures: `cargo test -p
//! msgbench-operator-core status_size -- --nocapture`.
//!
//! The bound: 1.375 MiB leaves 128 KiB of etcd's 1.5 MiB (`--max-request-bytes`) for the
//! object's metadata (managedFields, a `kubectl apply` annotation) and spec, a few KiB each in
//! practice. Most of the worst case is the six variants' merged histograms (each up to
//! [`MAX_STATUS_HISTOGRAM_CHARS`]); the rest (fault records, stage rows, environment,
//! thresholds) is about 400 KiB. A realistic large run and the demo's run stay under
//! [`STATUS_TARGET_BYTES`]; the worst case gets there only once the bulk (histograms,
//! timelines, stage rows) moves to a child object (docs/src/measurements/status-size.md).
use msgbench_crds::benchmark_run::*;
#[cfg(test)]
use runner_api::histo::Histo;

mod fill;
mod realistic;
use fill::*;
use realistic::*;

/// Finished runs' statuses of real sizes, each a Succeeded run of generation 1, for tests and
/// benchmarks that fill a cluster with history (e2e `finished_runs`, `bench/operator`).
pub mod samples {
    use super::*;

    /// The largest status admission allows, with the widest histograms msgbench writes
    /// (about 1.34 MiB as JSON).
    pub fn largest() -> BenchmarkRunStatus {
        finished(largest_admitted(&widest_histogram()).1)
    }

    /// A realistic large run: 6 variants x 10 rounds of a 600 s soak, 60 fault records
    /// (about 234 KiB).
    pub fn soak() -> BenchmarkRunStatus {
        finished(realistic(&soak_spec(6, 10, 600, 1), 200_000, 0.01, 1))
    }

    /// The demo's run (about 26 KiB).
    pub fn demo() -> BenchmarkRunStatus {
        finished(realistic(&demo_spec(), 200_000, 0.0, 0))
    }

    fn finished(mut st: BenchmarkRunStatus) -> BenchmarkRunStatus {
        st.phase = Some(Phase::Succeeded);
        st.observed_generation = Some(1);
        st.completion_time = Some(time(3600));
        st
    }
}

/// The bound the status of any admitted run stays under (see the module's docs).
const STATUS_BOUND_BYTES: usize = 1_441_792;
/// What a realistic large run (6 variants x 10 rounds, a 10-minute soak, 60 fault records)
/// stays under.
const STATUS_TARGET_BYTES: usize = 256 * 1024;

/// Weighs the largest status admission allows (6 variants x up to 20 rounds, their share of
/// the timeline, 60 fault records, every bounded list full, histograms at their limit) and a
/// realistic large and demo-sized run built through the operator's merge, and keeps them under
/// their bounds.
#[test]
fn status_size_stays_under_its_bound() {
    let widest = widest_histogram();
    let mut rng = Rng(1);
    let mut wide = Histo::default();
    for us in latencies(&mut rng, 2_000_000, 3_000.0, 0.6, 0.01) {
        wide.record(us);
    }
    let wide = encoded(&wide);
    println!(
        "histogram (1 µs .. 60 s, 3 digits): every bucket full {} chars; 2 M samples, 1 % tail \
         to 30 s {} chars; status keeps at most {MAX_STATUS_HISTOGRAM_CHARS}",
        widest.len(),
        wide.len()
    );
    assert!(
        widest.len() <= MAX_STATUS_HISTOGRAM_CHARS,
        "the widest histogram msgbench writes must fit in status"
    );
    let cap = "A".repeat(MAX_STATUS_HISTOGRAM_CHARS);
    let (worst, st) = largest_admitted(&cap);
    print(
        "worst case the schema admits (histograms at their limit)",
        &st,
    );
    let (lean, _) = largest(admitted(&cap).map(without_bulk));
    println!(
        "    the largest without histograms, timelines and stage/session rows (what a child \
         object would take): status {}",
        kib(lean)
    );
    let (widest_case, st) = largest_admitted(&widest);
    print("worst case the code fills (widest histograms)", &st);
    let (wide_case, st) = largest_admitted(&wide);
    print("worst case with wide realistic histograms", &st);

    let br = soak_spec(6, 10, 600, 1);
    let st = realistic(&br, 200_000, 0.01, 1);
    let large = print(
        "realistic large: 6 variants x 10 rounds, 600 s soak, 1 fault per trial (60 records)",
        &st,
    );
    println!("    whole object {}", kib(object_bytes(&br, &st)));
    for v in &st.variants {
        let points = v.result.as_ref().map_or(0, |r| r.timeline.len());
        assert_eq!(points, timeline_points_per_result(6), "{}", v.name);
    }
    let soak_running = print_running(&br, &st, 30);
    let br = demo_spec();
    let st = realistic(&br, 200_000, 0.0, 0);
    let demo = print(
        "the demo's run: config/demo/benchmarkrun-js-r1-vs-r2.yaml (2 variants x 4 rounds, 5 s)",
        &st,
    );
    println!("    whole object {}", kib(object_bytes(&br, &st)));
    let demo_running = print_running(&br, &st, 0);
    println!(
        "bound {}, target for realistic runs {}",
        kib(STATUS_BOUND_BYTES),
        kib(STATUS_TARGET_BYTES)
    );
    assert!(worst >= widest_case && widest_case >= wide_case);
    assert!(worst <= STATUS_BOUND_BYTES, "worst case {}", kib(worst));
    assert!(
        large <= STATUS_TARGET_BYTES,
        "realistic large {}",
        kib(large)
    );
    assert!(demo <= STATUS_TARGET_BYTES, "demo {}", kib(demo));
    // What a watcher of runs receives while one runs: under a MiB a minute.
    assert!(soak_running.max(demo_running) < 1 << 20);
}
