//! Property tests: decoding histograms, result lines and log frames from arbitrary input never
//! panics and never allocates past a bound; what msgbench writes decodes back exactly.
//!
//! The allocation bound is measured by a counting allocator: the only unsafe code in the
//! crate's tests, needed to implement `GlobalAlloc` (the library itself forbids unsafe code).
use base64::Engine as _;
use proptest::prelude::*;
use runner_api::agent::{RawResultLine, ResultLine};
use runner_api::histo::{Histo, MAX_MICROS};
use runner_api::result_frames::{frames, reassemble};
use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

thread_local! {
    static ARMED: Cell<bool> = const { Cell::new(false) };
    static LIVE: Cell<isize> = const { Cell::new(0) };
    static PEAK: Cell<isize> = const { Cell::new(0) };
}

/// Past this, a measured allocation is refused (the test aborts) rather than made.
const REFUSE_BYTES: usize = 256 << 20;

/// Counts bytes live on the measuring thread while it is armed.
struct Counting;

fn note(delta: isize) {
    let _ = ARMED.try_with(|armed| {
        if armed.get() {
            let live = LIVE.with(|l| l.get()) + delta;
            LIVE.with(|l| l.set(live));
            PEAK.with(|p| p.set(p.get().max(live)));
        }
    });
}

fn refused(size: usize) -> bool {
    size > REFUSE_BYTES && ARMED.try_with(Cell::get).unwrap_or(false)
}

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        if refused(l.size()) {
            return std::ptr::null_mut();
        }
        note(l.size() as isize);
        unsafe { System.alloc(l) }
    }
    unsafe fn alloc_zeroed(&self, l: Layout) -> *mut u8 {
        if refused(l.size()) {
            return std::ptr::null_mut();
        }
        note(l.size() as isize);
        unsafe { System.alloc_zeroed(l) }
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        note(-(l.size() as isize));
        unsafe { System.dealloc(p, l) }
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, new: usize) -> *mut u8 {
        if refused(new) {
            return std::ptr::null_mut();
        }
        note(new as isize - l.size() as isize);
        unsafe { System.realloc(p, l, new) }
    }
}

#[global_allocator]
static ALLOC: Counting = Counting;

/// Runs `f` and returns the most bytes it had live at once on this thread.
fn peak_bytes<T>(f: impl FnOnce() -> T) -> (T, usize) {
    LIVE.with(|l| l.set(0));
    PEAK.with(|p| p.set(0));
    ARMED.with(|a| a.set(true));
    let out = f();
    ARMED.with(|a| a.set(false));
    (out, PEAK.with(Cell::get).max(0) as usize)
}

/// What decoding one histogram may hold at once: the text's bytes, the inflated payload and
/// two counts arrays of the largest accepted range, with room to spare.
const HISTO_DECODE_BYTES: usize = 4 << 20;

fn v2_bytes(
    cookie: u32,
    payload_len: u32,
    digits: u32,
    low: u64,
    high: u64,
    ratio: f64,
    payload: &[u8],
) -> Vec<u8> {
    let mut b = cookie.to_be_bytes().to_vec();
    b.extend_from_slice(&payload_len.to_be_bytes());
    b.extend_from_slice(&0u32.to_be_bytes());
    b.extend_from_slice(&digits.to_be_bytes());
    b.extend_from_slice(&low.to_be_bytes());
    b.extend_from_slice(&high.to_be_bytes());
    b.extend_from_slice(&ratio.to_be_bytes());
    b.extend_from_slice(payload);
    b
}

/// A V2 header with fields drawn near and far from msgbench's ranges, then random payload.
fn hostile_v2() -> impl Strategy<Value = Vec<u8>> {
    let cookie = prop_oneof![Just(0x1c84_9313u32), Just(0x1c84_9314), any::<u32>()];
    let len = prop_oneof![0u32..64, any::<u32>()];
    let digits = prop_oneof![0u32..6, any::<u32>()];
    let low = prop_oneof![1u64..4, any::<u64>()];
    let high = prop_oneof![Just(MAX_MICROS), 1u64..(1 << 40), any::<u64>()];
    let ratio = prop_oneof![Just(1.0f64), any::<f64>()];
    let payload = proptest::collection::vec(any::<u8>(), 0..64);
    (cookie, len, digits, low, high, ratio, payload)
        .prop_map(|(c, n, d, l, h, r, p)| v2_bytes(c, n, d, l, h, r, &p))
}

fn histo_of(values: &[u64]) -> Histo {
    let mut h = Histo::default();
    for &v in values {
        h.record(v);
    }
    h
}

fn values() -> impl Strategy<Value = Vec<u64>> {
    proptest::collection::vec(0u64..=70_000_000, 0..100)
}

/// A one-phase record of `runner`'s `trial` with these latencies, against `target`.
fn record(runner: u16, trial: u32, latencies: &[u64], target: String) -> ResultLine {
    let mut l = runner_api::testing::record(runner, trial, latencies, latencies.len() as u64, 0);
    l.result.target = target;
    l
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn any_histogram_text_decodes_or_errs_within_bounds(text in "\\PC{0,200}") {
        let json = serde_json::to_string(&text).unwrap();
        let (_, peak) = peak_bytes(|| serde_json::from_str::<Histo>(&json).is_ok());
        prop_assert!(peak <= HISTO_DECODE_BYTES, "{peak} bytes");
    }

    #[test]
    fn any_v2_header_decodes_or_errs_within_bounds(v2 in hostile_v2()) {
        let text = base64::engine::general_purpose::STANDARD.encode(&v2);
        let (_, peak) = peak_bytes(|| Histo::decode(&text).is_ok());
        prop_assert!(peak <= HISTO_DECODE_BYTES, "{peak} bytes");
    }

    #[test]
    fn any_result_line_text_parses_or_errs(text in "\\PC{0,300}") {
        let (_, peak) = peak_bytes(|| serde_json::from_str::<ResultLine>(&text).is_ok());
        prop_assert!(peak <= HISTO_DECODE_BYTES, "{peak} bytes");
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    #[test]
    fn histograms_round_trip(v in values()) {
        let h = histo_of(&v);
        let back: Histo = serde_json::from_str(&serde_json::to_string(&h).unwrap()).unwrap();
        prop_assert_eq!(back, h);
    }

    /// A damaged copy of a real record (a byte range overwritten) parses or errs, never panics.
    #[test]
    fn a_damaged_result_line_parses_or_errs(
        v in values(),
        at in any::<prop::sample::Index>(),
        junk in proptest::collection::vec(any::<u8>(), 1..16),
    ) {
        let mut bytes = serde_json::to_vec(&record(1, 1, &v, "nats://x:4222".into())).unwrap();
        let at = at.index(bytes.len());
        let end = (at + junk.len()).min(bytes.len());
        bytes.splice(at..end, junk);
        let text = String::from_utf8_lossy(&bytes);
        let (_, peak) = peak_bytes(|| serde_json::from_str::<ResultLine>(&text).is_ok());
        prop_assert!(peak <= 4 * HISTO_DECODE_BYTES, "{peak} bytes");
    }

    /// Frames of a record, interleaved with other lines and duplicated, reassemble to it.
    #[test]
    fn framed_records_round_trip_through_a_noisy_log(
        v in values(),
        target in "[a-z]{1,20000}",
        noise in proptest::collection::vec("\\PC{0,80}", 0..8),
    ) {
        let line = record(3, 7, &v, target);
        let mut log = String::new();
        for (i, f) in frames(&line).unwrap().iter().enumerate() {
            log.push_str(&noise[..noise.len().min(i)].join("\n"));
            log.push('\n');
            log.push_str(f);
            log.push('\n');
            if i == 0 {
                log.push_str(f); // repeated frames are used once
                log.push('\n');
            }
        }
        let r = reassemble(&log, 3);
        prop_assert!(r.damaged.is_empty(), "{:?}", r.damaged);
        let sent = RawResultLine::from_line(&line).unwrap();
        prop_assert_eq!(r.records.get(&7), Some(&sent));
        prop_assert_eq!(r.records[&7].decode().unwrap(), line.result);
    }

    /// Any log reassembles without panicking, and what it reports stays proportional to it.
    #[test]
    fn any_log_reassembles_within_bounds(
        lines in proptest::collection::vec(
            prop_oneof![
                "\\PC{0,60}",
                "MSGBENCH-FRAME v2 [0-3] [0-9]{1,3} [0-9]{1,5}/[0-9]{1,5} [0-9a-f]{0,32} \\PC{0,40}",
            ],
            0..40,
        )
    ) {
        let log = lines.join("\n");
        let (r, peak) = peak_bytes(|| reassemble(&log, 1));
        let report: usize = r.damaged.values().map(String::len).sum();
        prop_assert!(report <= 4 * log.len() + 200, "{report} bytes for {}", log.len());
        prop_assert!(peak <= HISTO_DECODE_BYTES + 16 * log.len(), "{peak} bytes");
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// Histo::add, the merge every result uses: commutative, associative, and merging the
    /// parts equals recording every value into one histogram.
    #[test]
    fn histogram_merge_is_exact(a in values(), b in values(), c in values()) {
        let (ha, hb, hc) = (histo_of(&a), histo_of(&b), histo_of(&c));
        let merged = |x: &Histo, y: &Histo| {
            let mut m = x.clone();
            m.add(y);
            m
        };
        prop_assert_eq!(merged(&ha, &hb), merged(&hb, &ha));
        let left = merged(&merged(&ha, &hb), &hc);
        prop_assert_eq!(&left, &merged(&ha, &merged(&hb, &hc)));
        let all: Vec<u64> = a.iter().chain(&b).chain(&c).copied().collect();
        prop_assert_eq!(&left, &histo_of(&all));
        prop_assert_eq!(left.summary(), histo_of(&all).summary());
    }
}

/// A record listing more stages than any workload makes is refused before its histograms are
/// decoded (each takes 139 KB however short its text).
#[test]
fn a_record_with_more_phases_than_a_workload_makes_is_refused_before_decoding() {
    let mut line = runner_api::testing::record(1, 1, &[10], 1, 0);
    let stage = line.result.measured.clone();
    line.result.stages = vec![stage; 33];
    let raw = RawResultLine::from_line(&line).unwrap();
    let e = raw.decode().unwrap_err().to_string();
    assert!(e.contains("stages: 33 entries"), "{e}");
    line.result.stages.truncate(32);
    let raw = RawResultLine::from_line(&line).unwrap();
    assert_eq!(raw.decode().unwrap(), line.result);
}
