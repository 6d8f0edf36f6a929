//! Per-task recorders. Each publisher and subscriber task owns one (behind an uncontended
//! mutex so the engine can read a stage's figures mid-run); nothing is shared on the hot path.
use crate::acks::{self, AckBook};
use crate::clock;
use crate::live_metrics::TrialSeries;
use crate::payload::Header;
use fixedbitset::FixedBitSet;
use runner_api::coarse::CoarseLatency;
use runner_api::result::{Delivery, SegmentStats};
use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::{Arc, Mutex};

/// Hashes a (runner, publisher) key, two small integers, with one multiply each: SipHash
/// per delivery was ~5 % of a fast subscriber's CPU (perf, bench/runner-notes.md).
#[derive(Default)]
pub struct StreamKeyHasher(u64);

impl Hasher for StreamKeyHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.write_u16(u16::from(b));
        }
    }
    fn write_u16(&mut self, n: u16) {
        self.0 = (self.0.rotate_left(16) ^ u64::from(n)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }
}

/// Figures of one task, per phase (index = header phase byte), plus a per-second timeline.
#[derive(Debug)]
pub struct TaskStats {
    pub phases: Vec<SegmentStats>,
    pub timeline_published: Vec<u64>,
    pub timeline_received: Vec<u64>,
    /// Per second: latency of this task's own-runner deliveries (coarse, for the timeline).
    pub timeline_latency: Vec<CoarseLatency>,
    /// Process-clock µs of the measured start (timeline second 0).
    pub timeline_origin_us: u64,
    first_recv_us: Vec<Option<u64>>,
    /// Per phase: when this publisher began it, and this subscriber's last delivery
    /// (process-clock µs; 0 = none). Together they give the first-send → last-delivery window.
    pub phase_start_us: Vec<Option<u64>>,
    pub last_recv_us: Vec<u64>,
    /// Per second: publishes acknowledged (publisher tasks).
    pub timeline_acked: Vec<u64>,
    /// Per second: duplicate and out-of-order deliveries (subscriber tasks), so a fault's
    /// window can be told from the rest of the run.
    pub timeline_duplicates: Vec<u64>,
    pub timeline_out_of_order: Vec<u64>,
    /// Publisher tasks: acknowledged sequences and stall clocks.
    pub acks: AckBook,
    /// Sequences received per (runner, publisher) stream (subscriber tasks).
    streams: HashMap<(u16, u16), SeqTracker, BuildHasherDefault<StreamKeyHasher>>,
    /// Per phase: first deliveries of this runner's own messages (what the drain waits for).
    pub own_unique: Vec<u64>,
    /// The agent's live `/metrics` series of this trial; `None` in standalone runs.
    pub live: Option<TrialSeries>,
}

impl TaskStats {
    pub fn new(phase_names: &[String], topics: u32, delivery: Delivery, origin_us: u64) -> Self {
        TaskStats {
            phases: phase_names
                .iter()
                .map(|n| SegmentStats::new(n, topics, delivery))
                .collect(),
            timeline_published: Vec::new(),
            timeline_received: Vec::new(),
            timeline_latency: Vec::new(),
            timeline_origin_us: origin_us,
            first_recv_us: vec![None; phase_names.len()],
            phase_start_us: vec![None; phase_names.len()],
            last_recv_us: vec![0; phase_names.len()],
            timeline_acked: Vec::new(),
            timeline_duplicates: Vec::new(),
            timeline_out_of_order: Vec::new(),
            acks: AckBook::new(phase_names.len()),
            streams: HashMap::default(),
            own_unique: vec![0; phase_names.len()],
            live: None,
        }
    }

    /// Counts an error of `kind` in phase `i` (and on the live series).
    fn count_error(&mut self, i: usize, kind: &str) {
        *self.phases[i].errors.entry(kind.into()).or_default() += 1;
        if let Some(l) = &self.live {
            l.error();
        }
    }

    /// Sequences this task received from `publisher` of `runner`.
    pub fn seen(&self, runner: u16, publisher: u16) -> Option<&FixedBitSet> {
        self.streams.get(&(runner, publisher)).map(|t| &t.seen)
    }

    fn second(&self, now_us: u64) -> Option<usize> {
        now_us
            .checked_sub(self.timeline_origin_us)
            .map(|d| (d / 1_000_000) as usize)
    }

    pub fn count_published(&mut self, now_us: u64, n: u64) {
        if let Some(s) = self.second(now_us) {
            bump(&mut self.timeline_published, s, n);
        }
    }

    fn count_received(&mut self, now_us: u64, latency_us: Option<u64>, (dup, ooo): (bool, bool)) {
        if let Some(s) = self.second(now_us) {
            bump(&mut self.timeline_received, s, 1);
            if dup {
                bump(&mut self.timeline_duplicates, s, 1);
            } else if ooo {
                bump(&mut self.timeline_out_of_order, s, 1);
            }
            if let Some(us) = latency_us {
                if self.timeline_latency.len() <= s {
                    self.timeline_latency
                        .resize(s + 1, CoarseLatency::default());
                }
                self.timeline_latency[s].record(us);
            }
        }
    }
}

/// Adds per-index counters `b` into `a` (growing it), saturating.
pub(crate) fn add_into(a: &mut Vec<u64>, b: &[u64]) {
    if a.len() < b.len() {
        a.resize(b.len(), 0);
    }
    for (x, y) in a.iter_mut().zip(b) {
        *x = x.saturating_add(*y);
    }
}

fn bump(v: &mut Vec<u64>, i: usize, n: u64) {
    if v.len() <= i {
        v.resize(i + 1, 0);
    }
    v[i] += n;
}

pub type Shared = Arc<Mutex<TaskStats>>;

/// Phase that takes errors not tied to a message: the first measured one (phase 0 is warm-up).
pub fn unphased(phases: usize) -> usize {
    1.min(phases.saturating_sub(1))
}

/// Sequence bookkeeping for one (runner, publisher) stream: exact duplicate detection with a
/// bitset (also what `lostAcked` checks acks against), out-of-order = arrived below the
/// highest sequence seen.
#[derive(Debug, Default)]
struct SeqTracker {
    seen: FixedBitSet,
    highest: Option<u64>,
}

/// The bitset grows only this far past the highest sequence seen (2 MiB per step), so one
/// stray header can never make a runner allocate gigabytes.
const SEQ_WINDOW: u64 = 1 << 24;
/// No stream's bitset grows past 2^32 sequences (512 MiB).
const SEQ_TRACKED_MAX: u64 = 1 << 32;

impl SeqTracker {
    /// Returns (duplicate, out_of_order), or `None` for a sequence too far ahead to track.
    fn observe(&mut self, seq: u64) -> Option<(bool, bool)> {
        let reach = self
            .highest
            .map_or(SEQ_WINDOW, |h| h.saturating_add(SEQ_WINDOW));
        if seq >= SEQ_TRACKED_MAX || seq > reach {
            return None;
        }
        let dup = self.seen.contains(seq as usize);
        if !dup {
            self.seen.grow_and_insert(seq as usize);
        }
        let ooo = !dup && self.highest.is_some_and(|h| seq < h);
        if self.highest.is_none_or(|h| seq > h) {
            self.highest = Some(seq);
        }
        Some((dup, ooo))
    }
}

/// Who may send this run's messages: runners 1 to `runners`, each with publishers 0 to
/// `publishers - 1`. A delivery naming anyone else is counted as an error and gets no sequence
/// tracker, so forged headers cannot make a subscriber allocate a map entry (and a bitset) per
/// id: at most `runners x publishers` trackers exist.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Senders {
    pub runners: u16,
    pub publishers: u16,
}

impl Senders {
    /// Any id a header can carry (tests that do not care).
    pub const ANY: Senders = Senders {
        runners: crate::payload::MAX_RUNNER,
        publishers: u16::MAX,
    };

    fn admits(&self, h: &Header) -> bool {
        (1..=self.runners).contains(&h.runner) && h.publisher < self.publishers
    }
}

/// What a subscriber task calls for each delivered payload.
pub struct ReceiveRecorder {
    runner: u16,
    run_tag: u16,
    senders: Senders,
    stats: Shared,
}

impl ReceiveRecorder {
    /// Records for runner `runner` of the run (trial) tagged `run_tag`, whose messages come from
    /// `senders`.
    pub fn new(runner: u16, run_tag: u16, senders: Senders, stats: Shared) -> Self {
        ReceiveRecorder {
            runner,
            run_tag,
            senders,
            stats,
        }
    }

    /// Counts a receive-side error that is not a message (e.g. a JetStream consumer that lost
    /// its server and is being recreated): `kind` names it in the result's errors, so a shortfall
    /// of deliveries is seen to be the subscriber's.
    pub fn on_receive_error(&mut self, kind: &str) {
        let mut s = self.stats.lock().expect("stats lock");
        let i = unphased(s.phases.len());
        s.count_error(i, kind);
    }

    /// Records one delivery; `now_us` is read by the caller right after the message arrived.
    pub fn on_payload(&mut self, header: Option<Header>, now_us: u64) {
        let mut s = self.stats.lock().expect("stats lock");
        let Some(h) = header else {
            let i = unphased(s.phases.len());
            s.count_error(i, "badPayload");
            return;
        };
        if h.run != self.run_tag {
            // Another run's (or another client's) message on this run's subjects: counted
            // apart, never as a delivery, a duplicate or a latency of this run.
            let i = unphased(s.phases.len());
            s.phases[i].foreign += 1;
            return;
        }
        let phase = h.phase as usize;
        if phase >= s.phases.len() {
            let i = unphased(s.phases.len());
            s.count_error(i, "unknownPhase");
            return;
        }
        if !self.senders.admits(&h) {
            s.count_error(phase, "unknownSender");
            return;
        }
        let tracked = s
            .streams
            .entry((h.runner, h.publisher))
            .or_default()
            .observe(h.seq);
        let Some((dup, ooo)) = tracked else {
            s.count_error(phase, "sequenceOutOfRange");
            return;
        };
        let own = h.runner == self.runner && !dup;
        if own {
            s.own_unique[phase] += 1;
        }
        // One clock per sample: only this runner's own messages carry a latency.
        let own_latency = own.then(|| h.latency_at(now_us));
        s.count_received(now_us, own_latency, (dup, ooo));
        if let Some(l) = &s.live {
            l.received();
            if let Some(us) = own_latency {
                l.latency_us(us);
            }
        }
        let first = *s.first_recv_us[phase].get_or_insert(now_us);
        s.last_recv_us[phase] = s.last_recv_us[phase].max(now_us);
        let p = &mut s.phases[phase];
        p.received += 1;
        p.receive_seconds = p.receive_seconds.max((now_us - first) as f64 / 1e6);
        if dup {
            p.duplicates += 1;
        } else if ooo {
            p.out_of_order += 1;
        }
        if h.runner != self.runner {
            p.received_remote += 1;
        } else if let Some(us) = own_latency {
            p.latency.record(us);
        }
    }

    pub fn stats(&self) -> &Shared {
        &self.stats
    }

    pub fn on_error(&mut self, kind: &str) {
        let mut s = self.stats.lock().expect("stats lock");
        let i = unphased(s.phases.len());
        s.count_error(i, kind);
    }
}

/// Marks a subscriber's topic subscriptions in every phase (for the expected count).
pub fn register_subscription(stats: &Shared, topics: &[u32]) {
    let mut s = stats.lock().expect("stats lock");
    for p in s.phases.iter_mut() {
        for &t in topics {
            p.subscribers_by_topic[t as usize] += 1;
        }
    }
}

/// `n` publishes of `phase` were handed to the server and now wait for their acks. Drivers
/// whose publishes are acknowledged call it before the acks can arrive.
pub fn note_sent(stats: &Shared, phase: u8, n: u64) {
    let now = clock::now_us();
    stats.lock().expect("stats lock").acks.sent(phase, n, now);
}

/// Records the acknowledgement of the publish `h` (from an ack-handling task): its latency,
/// its sequence, the second it arrived in.
pub fn record_ack(stats: &Shared, h: &Header) {
    let now = clock::now_us();
    let mut s = stats.lock().expect("stats lock");
    let Some(p) = s.phases.get_mut(h.phase as usize) else {
        return;
    };
    p.ack_latency.record(h.latency_at(now));
    s.acks.acked(h.phase, h.seq, now);
    if let Some(i) = s.second(now) {
        bump(&mut s.timeline_acked, i, 1);
    }
}

/// Records a send error of `kind` in phase `phase` of `stats` (`u8::MAX`: not tied to a message).
pub fn record_error(stats: &Shared, phase: u8, kind: &str) {
    let mut s = stats.lock().expect("stats lock");
    let i = if (phase as usize) < s.phases.len() {
        phase as usize
    } else {
        unphased(s.phases.len())
    };
    s.count_error(i, kind);
}

/// A publish noted with `note_sent` failed instead of being acknowledged: counted as an error
/// of `kind`; it no longer holds a publish stall open.
pub fn record_ack_error(stats: &Shared, phase: u8, kind: &str) {
    let now = clock::now_us();
    record_error(stats, phase, kind);
    stats.lock().expect("stats lock").acks.failed(phase, now);
}

/// Lost acknowledged messages of phase `k` among one runner's tasks: each own publisher's
/// acked sequences against the own subscribers of its topic (only `runner`'s messages are
/// checked; other runners check theirs). Call it after the drain.
pub fn lost_acked_in_phase(
    tasks: &[&TaskStats],
    k: usize,
    runner: u16,
    expect: acks::Expect,
) -> acks::Lost {
    let empty = fixedbitset::FixedBitSet::new();
    let mut total = acks::Lost::default();
    for t in tasks {
        let (Some((publisher, topic)), Some(acked)) = (t.acks.stream, t.acks.acked_in(k)) else {
            continue;
        };
        let seen: Vec<&fixedbitset::FixedBitSet> = tasks
            .iter()
            .filter(|s| {
                let subs = &s.phases[k].subscribers_by_topic;
                subs.get(topic as usize).is_some_and(|&n| n > 0)
            })
            .map(|s| s.seen(runner, publisher).unwrap_or(&empty))
            .collect();
        total.add(acks::lost(&acked, &seen, expect));
    }
    total
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn duplicates_and_reordering_are_counted_exactly() {
        let stats = Arc::new(Mutex::new(TaskStats::new(
            &["m".into()],
            1,
            Delivery::FanOut,
            0,
        )));
        let mut r = ReceiveRecorder::new(1, 0, Senders::ANY, stats.clone());
        for seq in [0, 1, 3, 2, 3, 5, 4, 0] {
            let h = Header {
                run: 0,
                runner: 1,
                phase: 0,
                publisher: 0,
                seq,
                intended_us: 10,
            };
            r.on_payload(Some(h), 110);
        }
        r.on_payload(
            Some(Header {
                run: 0,
                runner: 2,
                phase: 0,
                publisher: 0,
                seq: 0,
                intended_us: 1,
            }),
            120,
        );
        let s = stats.lock().unwrap();
        let p = &s.phases[0];
        assert_eq!(
            (p.received, p.duplicates, p.out_of_order, p.received_remote),
            (9, 2, 2, 1)
        );
        assert_eq!(p.latency.len(), 6, "latency only for own, unique messages");
        assert_eq!(p.latency.0.max(), 100);
        // The timeline's second 0 counts every delivery, and its coarse latency the same 6
        // samples as the exact histogram.
        assert_eq!(s.timeline_received, [9]);
        assert_eq!(s.timeline_latency.len(), 1);
        assert_eq!(s.timeline_latency[0].count(), 6);
        let p99 = s.timeline_latency[0].quantile_us(0.99).unwrap();
        assert!((p99 / 100.0 - 1.0).abs() < 0.06, "{p99}");
        assert_eq!(
            (&s.timeline_duplicates[..], &s.timeline_out_of_order[..]),
            (&[2][..], &[2][..])
        );
        drop(s);
        // Two seconds later: one more duplicate and one late arrival, in their own second.
        for seq in [5, 6, 9, 8] {
            let h = Header {
                run: 0,
                runner: 1,
                phase: 0,
                publisher: 0,
                seq,
                intended_us: 2_000_000,
            };
            r.on_payload(Some(h), 2_000_100);
        }
        let s = stats.lock().unwrap();
        assert_eq!(s.timeline_duplicates, [2, 0, 1]);
        assert_eq!(s.timeline_out_of_order, [2, 0, 1]);
    }

    /// Runner 1's recorder of a one-phase run tagged 3, from `runners` x `publishers` senders.
    fn recorder_of(runners: u16, publishers: u16) -> (ReceiveRecorder, Shared) {
        let stats = Arc::new(Mutex::new(TaskStats::new(
            &["m".into()],
            1,
            Delivery::FanOut,
            0,
        )));
        let senders = Senders {
            runners,
            publishers,
        };
        (ReceiveRecorder::new(1, 3, senders, stats.clone()), stats)
    }

    #[test]
    fn a_consumer_error_is_counted_by_its_kind_not_as_a_bad_payload() {
        let (mut r, stats) = recorder_of(1, 1);
        r.on_receive_error("consume:MissingHeartbeat");
        r.on_receive_error("consume:MissingHeartbeat");
        r.on_payload(None, 1);
        let s = stats.lock().unwrap();
        assert_eq!(s.phases[0].errors.get("consume:MissingHeartbeat"), Some(&2));
        assert_eq!(s.phases[0].errors.get("badPayload"), Some(&1));
    }

    /// Ids from the wire never size memory either: deliveries naming a runner past the run's
    /// count, runner 0, or a publisher past the workload's are counted as errors and get no
    /// tracker, however many distinct ids are forged.
    #[test]
    fn forged_sender_ids_cannot_grow_the_sequence_map() {
        let (mut r, stats) = recorder_of(2, 4);
        let (runners, publishers) = (256u16, 1024u16);
        for runner in 0..runners {
            for publisher in 0..publishers {
                let h = Header {
                    run: 3,
                    runner,
                    phase: 0,
                    publisher,
                    seq: 1000,
                    intended_us: 0,
                };
                r.on_payload(Some(h), 1);
            }
        }
        let s = stats.lock().unwrap();
        assert_eq!(s.streams.len(), 2 * 4, "one tracker per real sender only");
        let bits: usize = s.streams.values().map(|t| t.seen.len()).sum();
        assert!(bits <= 8 * 1001, "{bits} bits tracked");
        let forged = u64::from(runners) * u64::from(publishers) - 8;
        assert_eq!(s.phases[0].errors.get("unknownSender"), Some(&forged));
        assert_eq!(s.phases[0].received, 8);
    }

    /// A header from the wire never sizes memory: a sequence far past what the stream has
    /// reached is refused (counted as an error), and the bitset stays small.
    #[test]
    fn a_stray_sequence_cannot_grow_the_bitset() {
        let stats = Arc::new(Mutex::new(TaskStats::new(
            &["m".into()],
            1,
            Delivery::FanOut,
            0,
        )));
        let mut r = ReceiveRecorder::new(1, 3, Senders::ANY, stats.clone());
        let h = |seq| Header {
            run: 3,
            runner: 1,
            phase: 0,
            publisher: 0,
            seq,
            intended_us: 0,
        };
        for seq in [0, 1, (1 << 40) - 1, 1 << 30, 2] {
            r.on_payload(Some(h(seq)), 1);
        }
        let s = stats.lock().unwrap();
        assert_eq!(s.phases[0].received, 3);
        assert_eq!(s.phases[0].errors.get("sequenceOutOfRange"), Some(&2));
        assert!(
            s.seen(1, 0).unwrap().len() <= 64,
            "{}",
            s.seen(1, 0).unwrap().len()
        );
        // Another run's tag: foreign, not a delivery.
        drop(s);
        r.on_payload(Some(Header { run: 4, ..h(3) }), 1);
        let s = stats.lock().unwrap();
        assert_eq!((s.phases[0].received, s.phases[0].foreign), (3, 1));
    }

    /// Runner 1: publisher 0 on topic 0 (acks 0..10 in phase 1), subscriber A on topic 0 that
    /// missed 3 and 7 (and saw runner 2's copies of them, which do not count), subscriber B on
    /// topic 1 that saw nothing of it.
    #[test]
    fn each_own_publisher_is_checked_against_the_own_subscribers_of_its_topic() {
        use crate::payload::Header;
        use runner_api::result::Delivery;
        use std::sync::{Arc, Mutex};
        let names = ["warmup".to_string(), "m".to_string()];
        let task = || Arc::new(Mutex::new(TaskStats::new(&names, 2, Delivery::FanOut, 0)));
        let (publisher, a, b) = (task(), task(), task());
        publisher.lock().unwrap().acks.stream = Some((0, 0));
        register_subscription(&a, &[0]);
        register_subscription(&b, &[1]);
        let h = |runner, seq| Header {
            run: 0,
            runner,
            phase: 1,
            publisher: 0,
            seq,
            intended_us: 0,
        };
        let mut rec = ReceiveRecorder::new(1, 0, Senders::ANY, a.clone());
        for seq in 0..10 {
            record_ack(&publisher, &h(1, seq));
            rec.on_payload(Some(h(2, seq)), 5);
            if seq != 3 && seq != 7 {
                rec.on_payload(Some(h(1, seq)), 5);
            }
        }
        let guards = [&publisher, &a, &b].map(|s| s.lock().unwrap());
        let tasks: Vec<&TaskStats> = guards.iter().map(|g| &**g).collect();
        let l = lost_acked_in_phase(&tasks, 1, 1, acks::Expect::Every);
        assert_eq!(
            l,
            acks::Lost {
                messages: 2,
                deliveries: 2
            }
        );
        assert_eq!(
            lost_acked_in_phase(&tasks, 0, 1, acks::Expect::Every),
            acks::Lost::default()
        );
    }
}
