//! The counts a runner's drain waits on, taken from its tasks' records.
use crate::recorder::{add_into, TaskStats};
use runner_api::result::Delivery;

/// What the drain compares: this runner's own messages delivered (first copies only) against
/// what its own subscribers should get, and every delivery (to see the traffic go quiet).
#[derive(Debug, Default, PartialEq)]
pub(crate) struct DrainCounts {
    pub received: u64,
    pub own_unique: u64,
    pub expected: u64,
}

impl DrainCounts {
    pub fn of(tasks: &[&TaskStats], delivery: Delivery) -> Self {
        let mut c = DrainCounts::default();
        let (mut published_by_topic, mut subs, mut published) = (Vec::new(), Vec::new(), 0u64);
        for s in tasks {
            for p in &s.phases {
                add_into(&mut published_by_topic, &p.published_by_topic);
                add_into(&mut subs, &p.subscribers_by_topic);
                published = published.saturating_add(p.published);
                c.received = c.received.saturating_add(p.received);
            }
            // Counted where it happens, never derived by subtraction: duplicates include
            // other runners' copies, so received - duplicates - remote undercounts and wraps.
            c.own_unique = s
                .own_unique
                .iter()
                .fold(c.own_unique, |a, b| a.saturating_add(*b));
        }
        // Subscriber counts are repeated in every phase: divide back to one set.
        let n = tasks.first().map_or(1, |s| s.phases.len().max(1) as u64);
        c.expected = match delivery {
            Delivery::RoundTrip => published,
            Delivery::FanOut => published_by_topic
                .iter()
                .zip(&subs)
                .map(|(p, s)| p.saturating_mul(s / n))
                .fold(0, u64::saturating_add),
        };
        c
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::payload::Header;
    use crate::recorder::{register_subscription, ReceiveRecorder, Senders};
    use proptest::prelude::*;
    use std::collections::BTreeSet;
    use std::sync::{Arc, Mutex};

    proptest! {
        /// Any order of deliveries, own and other runners', with any duplicates: the drain's
        /// own count is exactly the distinct own messages seen, never more than were published,
        /// and never wraps.
        #[test]
        fn own_deliveries_are_counted_exactly_whatever_the_order(
            deliveries in proptest::collection::vec((1u16..4, 0u64..50), 0..400)
        ) {
            let names = ["m".to_string()];
            let st = Arc::new(Mutex::new(TaskStats::new(&names, 1, Delivery::FanOut, 0)));
            register_subscription(&st, &[0]);
            st.lock().unwrap().phases[0].published = 50;
            st.lock().unwrap().phases[0].published_by_topic[0] = 50;
            let mut rec = ReceiveRecorder::new(1, 7, Senders::ANY, st.clone());
            let mut own = BTreeSet::new();
            for &(runner, seq) in &deliveries {
                let h = Header { run: 7, runner, phase: 0, publisher: 0, seq, intended_us: 0 };
                rec.on_payload(Some(h), 10);
                if runner == 1 {
                    own.insert(seq);
                }
            }
            let g = st.lock().unwrap();
            let c = DrainCounts::of(&[&*g], Delivery::FanOut);
            prop_assert_eq!(c.own_unique, own.len() as u64);
            prop_assert_eq!(c.received, deliveries.len() as u64);
            prop_assert_eq!(c.expected, 50);
            prop_assert!(c.own_unique <= c.expected);
        }
    }

    /// The counterexample of the old `received - duplicates - remote`: a duplicate of another
    /// runner's message is subtracted twice (once as a duplicate, once as remote).
    #[test]
    fn a_remote_duplicate_does_not_hide_an_own_delivery() {
        let names = ["m".to_string()];
        let st = Arc::new(Mutex::new(TaskStats::new(&names, 1, Delivery::FanOut, 0)));
        let mut rec = ReceiveRecorder::new(1, 7, Senders::ANY, st.clone());
        let h = |runner| Header {
            run: 7,
            runner,
            phase: 0,
            publisher: 0,
            seq: 0,
            intended_us: 0,
        };
        rec.on_payload(Some(h(2)), 1);
        rec.on_payload(Some(h(2)), 1);
        rec.on_payload(Some(h(1)), 1);
        let g = st.lock().unwrap();
        let p = &g.phases[0];
        assert_eq!((p.received, p.duplicates, p.received_remote), (3, 1, 2));
        assert_eq!(DrainCounts::of(&[&*g], Delivery::FanOut).own_unique, 1);
    }
}
