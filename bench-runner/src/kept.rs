//! `ackedNotKept`: acknowledged messages (publish acked by JetStream) that the benchmark stream
//! no longer holds when read back after the run's drain. Durability, where `lostAcked` is
//! delivery: a message delivered live and then lost from the servers' disks (a power loss
//! discards unsynced writes) was received, so `lostAcked` cannot see it; only a final read can.
//! Each runner reads back its own publishers' messages and counts, per phase, its publishers'
//! acked sequences the read did not find (same scope as `recorder::lost_acked_in_phase`).
use crate::payload::Header;
use crate::recorder::TaskStats;
use fixedbitset::FixedBitSet;
use runner_api::result::AckedNotKeptFrom;
use std::collections::HashMap;

/// What the stream still held of this runner's messages: sequences per own publisher.
#[derive(Debug, PartialEq)]
pub struct Kept {
    pub from: AckedNotKeptFrom,
    seqs: HashMap<u16, FixedBitSet>,
}

/// A read-back: what was kept, or why it could not be told (the figure is then unavailable).
pub type ReadBack = Result<Kept, String>;

/// Whose messages a read-back looks for: this runner's (in this trial), from its publishers.
#[derive(Clone, Debug)]
pub struct ReadScope {
    pub runner: u16,
    pub run_tag: u16,
    /// (publisher id, topic, sequences below this can have been acked).
    pub publishers: Vec<(u16, u32, u64)>,
}

impl ReadScope {
    /// This runner's publishers, from their tasks' ack books.
    pub fn of(tasks: &[&TaskStats], runner: u16, run_tag: u16) -> ReadScope {
        let publishers = (tasks.iter())
            .filter_map(|t| Some((t.acks.stream?, t.acks.acked_len() as u64)))
            .map(|((p, topic), limit)| (p, topic, limit))
            .collect();
        ReadScope {
            runner,
            run_tag,
            publishers,
        }
    }

    /// The topics its publishers used, each once.
    pub fn topics(&self) -> Vec<u32> {
        let mut t: Vec<u32> = self.publishers.iter().map(|p| p.1).collect();
        t.sort_unstable();
        t.dedup();
        t
    }
}

impl Kept {
    /// Nothing read yet (a read that finds nothing of ours: every acked message counts).
    pub fn read_back() -> Kept {
        Kept {
            from: AckedNotKeptFrom::ReadBack,
            seqs: HashMap::new(),
        }
    }

    /// The stream itself is gone: nothing is kept.
    pub fn stream_gone() -> Kept {
        Kept {
            from: AckedNotKeptFrom::StreamGone,
            seqs: HashMap::new(),
        }
    }

    /// Notes one stored message. Anything not this runner's (another runner, trial or client)
    /// or past what its publisher can have had acked is ignored, so a stray header never
    /// grows a set beyond the publisher's own acked set.
    pub fn note(&mut self, h: &Header, scope: &ReadScope) {
        if h.run != scope.run_tag || h.runner != scope.runner {
            return;
        }
        let Some(&(_, _, limit)) = scope.publishers.iter().find(|p| p.0 == h.publisher) else {
            return;
        };
        if h.seq < limit {
            let s = self.seqs.entry(h.publisher).or_default();
            s.grow_and_insert(h.seq as usize);
        }
    }

    /// How many of this runner's publishers' messages were found.
    pub fn found(&self) -> usize {
        self.seqs.values().map(|s| s.count_ones(..)).sum()
    }
}

/// `|acked ∖ kept|` (`acks::missing`); nothing kept of a publisher: all of it.
pub fn not_kept(acked: &FixedBitSet, kept: Option<&FixedBitSet>) -> u64 {
    kept.map_or(acked.count_ones(..) as u64, |k| {
        crate::acks::missing(acked, k)
    })
}

/// Acknowledged messages of phase `k`, from this runner's publishers, the read-back did not
/// find. Call it with every task of the runner (only publisher tasks count).
pub fn acked_not_kept_in_phase(tasks: &[&TaskStats], k: usize, kept: &Kept) -> u64 {
    tasks
        .iter()
        .filter_map(|t| Some((t.acks.stream?.0, t.acks.acked_in(k)?)))
        .map(|(publisher, acked)| not_kept(&acked, kept.seqs.get(&publisher)))
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::recorder::record_ack;
    use runner_api::result::Delivery;
    use std::sync::{Arc, Mutex};

    fn set(seqs: impl IntoIterator<Item = usize>) -> FixedBitSet {
        let mut s = FixedBitSet::new();
        seqs.into_iter().for_each(|q| s.grow_and_insert(q));
        s
    }

    #[test]
    fn not_kept_is_the_acked_set_minus_the_kept_one_whatever_their_lengths() {
        assert_eq!(not_kept(&set(0..10), Some(&set(0..10))), 0);
        assert_eq!(not_kept(&set(0..10), Some(&set([0, 1, 2, 5]))), 6);
        // Kept shorter than acked: the acked bits past its end are not kept.
        assert_eq!(not_kept(&set(0..100), Some(&set(0..10))), 90);
        // Kept messages that were never acked (an ack lost on the way) do not offset anything.
        assert_eq!(not_kept(&set([1, 3]), Some(&set(0..1000))), 0);
        assert_eq!(not_kept(&set([1, 3]), Some(&set([0, 2, 4]))), 2);
        assert_eq!(not_kept(&set(0..7), None), 7);
        assert_eq!(not_kept(&FixedBitSet::new(), None), 0);
    }

    /// Runner 1, trial tag 9: publishers 0 and 1 ack 0..10 in phase 1; the stream still holds
    /// publisher 0's messages but 3 and 7, and none of publisher 1's but 0..4 (plus runner 2's
    /// and another trial's copies, which must not count as kept).
    #[test]
    fn each_own_publisher_counts_its_acked_messages_the_stream_no_longer_holds() {
        let names = ["warmup".to_string(), "m".to_string()];
        let task = || Arc::new(Mutex::new(TaskStats::new(&names, 2, Delivery::FanOut, 0)));
        let (p0, p1, sub) = (task(), task(), task());
        p0.lock().unwrap().acks.stream = Some((0, 0));
        p1.lock().unwrap().acks.stream = Some((1, 1));
        let h = |run, runner, publisher, seq| Header {
            run,
            runner,
            phase: 1,
            publisher,
            seq,
            intended_us: 0,
        };
        for seq in 0..10 {
            record_ack(&p0, &h(9, 1, 0, seq));
            record_ack(&p1, &h(9, 1, 1, seq));
        }
        let guards = [&p0, &p1, &sub].map(|s| s.lock().unwrap());
        let tasks: Vec<&TaskStats> = guards.iter().map(|g| &**g).collect();
        let scope = ReadScope::of(&tasks, 1, 9);
        assert_eq!(scope.publishers, [(0, 0, 10), (1, 1, 10)]);
        assert_eq!(scope.topics(), [0, 1]);
        let mut kept = Kept::read_back();
        for seq in (0..10).filter(|q| *q != 3 && *q != 7) {
            kept.note(&h(9, 1, 0, seq), &scope);
        }
        for seq in 0..10 {
            kept.note(&h(9, 2, 1, seq), &scope);
            kept.note(&h(8, 1, 1, seq), &scope);
        }
        (0..4).for_each(|seq| kept.note(&h(9, 1, 1, seq), &scope));
        // Past what publisher 1 can have had acked, and an unknown publisher: ignored.
        kept.note(&h(9, 1, 1, 1 << 39), &scope);
        kept.note(&h(9, 1, 7, 1), &scope);
        assert_eq!(kept.found(), 8 + 4);
        assert_eq!(acked_not_kept_in_phase(&tasks, 1, &kept), 2 + 6);
        assert_eq!(
            acked_not_kept_in_phase(&tasks, 0, &kept),
            0,
            "nothing acked"
        );
        assert_eq!(acked_not_kept_in_phase(&tasks, 1, &Kept::stream_gone()), 20);
    }
}
