//! What publish acknowledgements say about a phase: acknowledged messages that an own-runner
//! subscriber never received (`lostAcked`), and the longest time a publisher waited with
//! publishes outstanding and no ack arriving (publish stall). Both matter when the server
//! loses a node mid-run: an ack is the server's promise that the message is kept.
use fixedbitset::FixedBitSet;

/// A publisher task's acknowledgements and stall clocks (one clock per phase).
#[derive(Debug, Default)]
pub struct AckBook {
    /// The (publisher id, topic) this task publishes as; set by the engine.
    pub stream: Option<(u16, u32)>,
    /// Acknowledged sequences (the header's, counted across phases).
    acked: FixedBitSet,
    /// Per phase: lowest and highest acknowledged sequence. A publisher's sequences rise from
    /// phase to phase, so a phase's acks are exactly the acked bits inside its span.
    spans: Vec<Option<(u64, u64)>>,
    stalls: Vec<StallClock>,
}

impl AckBook {
    pub fn new(phases: usize) -> Self {
        AckBook {
            spans: vec![None; phases],
            stalls: vec![StallClock::default(); phases],
            ..Default::default()
        }
    }

    /// `n` publishes of `phase` now wait for their acks.
    pub fn sent(&mut self, phase: u8, n: u64, now_us: u64) {
        if let Some(c) = self.stalls.get_mut(phase as usize) {
            c.sent(n, now_us);
        }
    }

    /// The publish `seq` of `phase` was acknowledged.
    pub fn acked(&mut self, phase: u8, seq: u64, now_us: u64) {
        let Some(c) = self.stalls.get_mut(phase as usize) else {
            return;
        };
        c.acked(now_us);
        self.acked.grow_and_insert(seq as usize);
        let span = &mut self.spans[phase as usize];
        *span = Some(span.map_or((seq, seq), |(lo, hi)| (lo.min(seq), hi.max(seq))));
    }

    /// A publish of `phase` failed instead of being acknowledged (ack error, lost connection).
    pub fn failed(&mut self, phase: u8, now_us: u64) {
        if let Some(c) = self.stalls.get_mut(phase as usize) {
            c.failed(now_us);
        }
    }

    /// The publisher stopped waiting for acks: a stall still open ends now.
    pub fn finish(&mut self, now_us: u64) {
        self.stalls.iter_mut().for_each(|c| c.finish(now_us));
    }

    /// This phase's acknowledged sequences.
    pub fn acked_in(&self, phase: usize) -> Option<FixedBitSet> {
        let (lo, hi) = (*self.spans.get(phase)?)?;
        let mut s = self.acked.clone();
        s.remove_range(..lo as usize);
        s.remove_range(hi as usize + 1..);
        Some(s)
    }

    /// One past the highest acknowledged sequence (0: none acked): no sequence at or above it
    /// was acknowledged.
    pub fn acked_len(&self) -> usize {
        self.acked.len()
    }

    /// Longest stall of `phase`: (µs, start in process-clock µs).
    pub fn longest_stall(&self, phase: usize) -> Option<(u64, u64)> {
        self.stalls.get(phase)?.longest
    }
}

/// Tracks the intervals during which the publisher was trying and nothing was acknowledged:
/// one starts when a publish goes out while none is pending, or at an ack with publishes still
/// outstanding; only the next ack ends it (or the end of the phase). A failed publish (an ack
/// timeout, "no responders" while a stream elects its leader, a lost connection) is not
/// progress: it never ends a stall. Otherwise fast failures during an election would cut the
/// stall into pieces and report the ack timeout, or milliseconds, instead of the outage (an
/// independent nats.go client in `e2e/tests/e2e/crash_fault.rs` measured 6.4 s where the old rule
/// said 5.0 s).
#[derive(Clone, Debug, Default)]
struct StallClock {
    outstanding: u64,
    /// Sent and not acknowledged since the last ack (failed ones included).
    waiting: bool,
    since_us: u64,
    longest: Option<(u64, u64)>,
}

impl StallClock {
    fn sent(&mut self, n: u64, now_us: u64) {
        if n > 0 && !self.waiting {
            self.waiting = true;
            self.since_us = now_us;
        }
        self.outstanding += n;
    }

    fn acked(&mut self, now_us: u64) {
        self.close(now_us);
        self.outstanding = self.outstanding.saturating_sub(1);
        self.waiting = self.outstanding > 0;
        self.since_us = now_us;
    }

    fn failed(&mut self, _now_us: u64) {
        self.outstanding = self.outstanding.saturating_sub(1);
    }

    fn finish(&mut self, now_us: u64) {
        self.close(now_us);
        self.outstanding = 0;
        self.waiting = false;
    }

    /// Ends the current interval (if the publisher is waiting) at `now_us`.
    fn close(&mut self, now_us: u64) {
        if !self.waiting {
            return;
        }
        let d = now_us.saturating_sub(self.since_us);
        if self.longest.is_none_or(|(l, _)| d > l) {
            self.longest = Some((d, self.since_us));
        }
    }
}

/// Which subscribers a message is for: every subscriber of its topic (fan-out), or any one of
/// them (a queue group or shared subscription).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Expect {
    Every,
    Any,
}

/// Acknowledged messages not received: `messages` missed by at least one subscriber they were
/// for (queue: by all of them), `deliveries` the (message, subscriber) pairs missing
/// (queue: equal to `messages`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Lost {
    pub messages: u64,
    pub deliveries: u64,
}

impl Lost {
    pub fn add(&mut self, o: Lost) {
        self.messages += o.messages;
        self.deliveries += o.deliveries;
    }
}

/// `|acked ∖ other|`, counted as acked minus acked-and-other: `intersection_count` handles sets
/// of different lengths (fixedbitset's `difference_count` ignores `acked` bits past `other`'s end).
pub fn missing(acked: &FixedBitSet, other: &FixedBitSet) -> u64 {
    (acked.count_ones(..) - acked.intersection_count(other)) as u64
}

/// Compares one publisher's acknowledged sequences with what each subscriber of its topic saw
/// of that publisher. Word-wide set operations: a 10 M message phase is a few ms.
pub fn lost(acked: &FixedBitSet, seen: &[&FixedBitSet], expect: Expect) -> Lost {
    let Some((first, rest)) = seen.split_first() else {
        return Lost::default(); // no own subscriber was to receive them
    };
    let missing = |s: &FixedBitSet| missing(acked, s);
    let mut all = (*first).clone();
    for s in rest {
        match expect {
            Expect::Every => all.intersect_with(s),
            Expect::Any => all.union_with(s),
        }
    }
    let messages = missing(&all);
    let deliveries = match expect {
        Expect::Every => seen.iter().map(|s| missing(s)).sum(),
        Expect::Any => messages,
    };
    Lost {
        messages,
        deliveries,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(seqs: impl IntoIterator<Item = usize>) -> FixedBitSet {
        let mut s = FixedBitSet::new();
        seqs.into_iter().for_each(|q| s.grow_and_insert(q));
        s
    }

    #[test]
    fn acked_messages_a_subscriber_missed_are_counted_exactly() {
        let acked = set(0..10);
        let saw = set((0..10).filter(|q| *q != 3 && *q != 7));
        let l = lost(&acked, &[&saw], Expect::Every);
        assert_eq!(
            l,
            Lost {
                messages: 2,
                deliveries: 2
            }
        );
        // Seen but never acknowledged (no ack, or the ack failed) is not lost, and neither is
        // a message no own subscriber was to receive.
        let acked_some = set([0, 1, 2, 4]);
        assert_eq!(lost(&acked_some, &[&saw], Expect::Every), Lost::default());
        assert_eq!(lost(&acked, &[], Expect::Every), Lost::default());
    }

    #[test]
    fn fan_out_counts_messages_once_and_deliveries_per_subscriber_queue_needs_any() {
        let acked = set(0..100);
        let a = set((0..100).filter(|q| *q != 3 && *q != 70));
        let b = set((0..100).filter(|q| *q != 3 && *q != 71));
        let every = lost(&acked, &[&a, &b], Expect::Every);
        assert_eq!(
            every,
            Lost {
                messages: 3,
                deliveries: 4
            }
        );
        // A queue group: only 3 reached nobody.
        let any = lost(&acked, &[&a, &b], Expect::Any);
        assert_eq!(
            any,
            Lost {
                messages: 1,
                deliveries: 1
            }
        );
    }

    #[test]
    fn acks_past_the_end_of_what_a_subscriber_saw_count_as_lost() {
        // The subscriber's set is shorter than the acked one (it stopped receiving at 5).
        let acked = set(0..1_000);
        let saw = set(0..5);
        let l = lost(&acked, &[&saw], Expect::Every);
        assert_eq!(l.messages, 995);
        let never = FixedBitSet::new();
        assert_eq!(lost(&acked, &[&never], Expect::Any).messages, 1_000);
    }

    #[test]
    fn a_phase_holds_only_its_own_acked_sequences() {
        let mut b = AckBook::new(3);
        for (phase, seq) in [(1, 0), (1, 4), (2, 5), (2, 9), (1, 2)] {
            b.sent(phase, 1, 0);
            b.acked(phase, seq, 1);
        }
        let ones = |p| b.acked_in(p).map(|s| s.ones().collect::<Vec<_>>());
        assert_eq!(ones(1), Some(vec![0, 2, 4]));
        assert_eq!(ones(2), Some(vec![5, 9]));
        assert_eq!(ones(0), None);
    }

    #[test]
    fn the_longest_stall_is_the_longest_wait_for_an_ack_with_publishes_outstanding() {
        let mut b = AckBook::new(2);
        let p = 1;
        // 0: two sent; acks at 10 and 15 (gaps 10, 5).
        b.sent(p, 2, 0);
        b.acked(p, 0, 10);
        b.acked(p, 1, 15);
        // Nothing outstanding from 15 to 100: idle, not a stall.
        b.sent(p, 1, 100);
        b.sent(p, 1, 120);
        // 100 → 400: the server stopped answering (300).
        b.acked(p, 2, 400);
        // The last one fails at 450, the next is sent at 500 and acked at 520: one stall from
        // the ack at 400 to 520 (120), shorter than 300.
        b.failed(p, 450);
        b.sent(p, 1, 500);
        b.acked(p, 3, 520);
        assert_eq!(b.longest_stall(1), Some((300, 100)));
        // One left outstanding when the publisher gives up counts to the end.
        b.sent(p, 1, 1_000);
        b.finish(1_500);
        assert_eq!(b.longest_stall(1), Some((500, 1_000)));
        // A phase with nothing sent has no stall.
        assert_eq!(b.longest_stall(0), None);
    }

    /// During an election publishes fail fast ("no responders") or time out; none of that is
    /// progress: the stall runs from the last ack before the outage to the first one after it.
    #[test]
    fn failures_never_end_a_stall_only_an_ack_does() {
        let mut b = AckBook::new(1);
        b.sent(0, 1, 0);
        b.acked(0, 0, 5); // the last ack before the outage
        b.sent(0, 3, 10);
        b.failed(0, 50);
        b.failed(0, 60);
        b.failed(0, 80); // nothing outstanding, still nothing acknowledged
        assert_eq!(b.longest_stall(0), Some((5, 0)));
        b.sent(0, 1, 100); // a retry, after every earlier one failed
        b.failed(0, 101);
        b.sent(0, 1, 200);
        b.acked(0, 1, 6_400);
        assert_eq!(
            b.longest_stall(0),
            Some((6_390, 10)),
            "from the first send after the last ack"
        );
    }
}
