//! One memory budget for the run results held in the operator, shared by every concurrent
//! reconcile. A run's records stay in memory from the first runner's download until the merge
//! is written, and several runs can finish together; a per-run bound alone lets N runs (or one
//! hostile runner image per run) take N times it, past the container's limit. Each download
//! reserves its bytes here before it reads them; a run that would need more than its share is
//! refused, and a run that finds the budget taken by others waits (bounded) for it.
//!
//! Permits are KiB, so a `u32` request covers any real limit.
use std::fmt;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

const KIB: usize = 1024;

/// Budget when the container's memory limit is unknown: 1/16 of the chart's 128Mi.
pub const DEFAULT_BUDGET_BYTES: usize = 8 << 20;

/// The budget (record bytes as they arrive) is this fraction (1/n) of the container's memory
/// limit. Records decode to about ten times their size: the largest admitted run, 4.3 MB of
/// records, peaked the operator at 62.5 MiB, and four of them merged at once under a 1/4
/// budget peaked it at 116.7 of 128 MiB (e2e results_at_limits). At 1/16 the merges in flight
/// decode to about 60% of the limit; the process and its watch caches need the rest.
pub const LIMIT_DIVISOR: u64 = 16;

/// How long a run waits for other runs' results to leave memory before it gives up for this
/// reconcile (it is read again at the next one; nothing fails).
pub const DEFAULT_WAIT: Duration = Duration::from_secs(30);

/// Why a reservation was not granted.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum BudgetError {
    /// The run offers more than one run may bring in: asking again cannot help.
    #[error(
        "results of {asked} bytes exceed the {cap} bytes one run may hold in the operator \
         (its memory budget for results is {total} bytes, 1/16 of its memory limit: raise the \
         chart's resources.limits.memory, or run fewer runners, trials or stages)"
    )]
    OverShare {
        asked: usize,
        cap: usize,
        total: usize,
    },
    /// Other runs held the budget for the whole wait: try again later.
    #[error("waited {0:?} for other runs' results to leave the operator's memory budget")]
    Busy(Duration),
}

/// The operator-wide budget (held in [`crate::runtime::context::Context`]).
pub struct MergeBudget {
    permits: Arc<Semaphore>,
    total_bytes: usize,
    per_run_bytes: usize,
    wait: Duration,
    waiting: Arc<AtomicUsize>,
}

impl MergeBudget {
    /// `total_bytes` for all runs together, at most `per_run_bytes` for one run (capped to the
    /// total, so every admissible reservation can eventually be granted).
    pub fn new(total_bytes: usize, per_run_bytes: usize, wait: Duration) -> Self {
        let total_kib = u32::try_from(total_bytes / KIB).unwrap_or(u32::MAX);
        let total_bytes = total_kib as usize * KIB;
        Self {
            permits: Arc::new(Semaphore::new(total_kib as usize)),
            total_bytes,
            per_run_bytes: per_run_bytes.min(total_bytes),
            wait,
            waiting: Arc::default(),
        }
    }

    /// 1/[`LIMIT_DIVISOR`] of the container's memory limit (the chart passes it through the
    /// downward API), else [`DEFAULT_BUDGET_BYTES`].
    pub fn from_memory_limit(limit_bytes: Option<u64>, per_run_bytes: usize) -> Self {
        let total = limit_bytes
            .filter(|l| *l > 0)
            .map(|l| usize::try_from(l / LIMIT_DIVISOR).unwrap_or(usize::MAX))
            .unwrap_or(DEFAULT_BUDGET_BYTES);
        Self::new(total, per_run_bytes, DEFAULT_WAIT)
    }

    pub fn total_bytes(&self) -> usize {
        self.total_bytes
    }

    /// The most one run may hold.
    pub fn per_run_bytes(&self) -> usize {
        self.per_run_bytes
    }

    /// Bytes not reserved by anyone now.
    pub fn available_bytes(&self) -> usize {
        self.permits.available_permits() * KIB
    }

    /// Reservations waiting for others to release budget now.
    pub fn waiting(&self) -> usize {
        self.waiting.load(Ordering::SeqCst)
    }

    /// An empty reservation for one run; it grows with [`Reservation::hold`] and gives its
    /// bytes back when dropped.
    pub fn reservation(&self) -> Reservation {
        Reservation {
            permits: self.permits.clone(),
            held: None,
            bytes: 0,
            cap: self.per_run_bytes,
            total: self.total_bytes,
            wait: self.wait,
            waiting: self.waiting.clone(),
        }
    }
}

/// Bytes one run holds of the budget.
pub struct Reservation {
    permits: Arc<Semaphore>,
    held: Option<OwnedSemaphorePermit>,
    bytes: usize,
    cap: usize,
    total: usize,
    wait: Duration,
    waiting: Arc<AtomicUsize>,
}

impl fmt::Debug for Reservation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Reservation({} of {} bytes)", self.bytes, self.cap)
    }
}

impl Reservation {
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// The most this reservation may grow to (the run's share).
    pub fn cap(&self) -> usize {
        self.cap
    }

    /// Makes this reservation at least `bytes` in all: refused at once over the per-run cap,
    /// else waits (up to the budget's wait) for other runs to release enough.
    pub async fn hold(&mut self, bytes: usize) -> Result<(), BudgetError> {
        if bytes <= self.bytes {
            return Ok(());
        }
        if bytes > self.cap {
            return Err(BudgetError::OverShare {
                asked: bytes,
                cap: self.cap,
                total: self.total,
            });
        }
        let have = self.held.as_ref().map_or(0, |p| p.num_permits());
        let want = bytes.div_ceil(KIB);
        if want > have {
            // `want` <= cap / KIB <= total KiB, which fits a u32 (see `MergeBudget::new`).
            let more = u32::try_from(want - have).expect("within the budget");
            self.waiting.fetch_add(1, Ordering::SeqCst);
            let acquire = self.permits.clone().acquire_many_owned(more);
            let got = tokio::time::timeout(self.wait, acquire).await;
            self.waiting.fetch_sub(1, Ordering::SeqCst);
            let more = got
                .map_err(|_| BudgetError::Busy(self.wait))?
                .expect("the budget's semaphore is never closed");
            match &mut self.held {
                Some(p) => p.merge(more),
                None => self.held = Some(more),
            }
        }
        self.bytes = bytes;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIB: usize = 1 << 20;

    #[tokio::test(start_paused = true)]
    async fn a_second_run_waits_until_the_first_releases() {
        let budget = MergeBudget::new(32 * MIB, 24 * MIB, Duration::from_secs(30));
        let mut first = budget.reservation();
        first.hold(20 * MIB).await.unwrap();
        let mut second = budget.reservation();
        let waiter = tokio::spawn(async move { second.hold(16 * MIB).await.map(|()| second) });
        // Paused time: the spawned task runs until it blocks on the semaphore.
        while budget.waiting() == 0 {
            tokio::task::yield_now().await;
        }
        assert!(
            !waiter.is_finished(),
            "20 + 16 MiB exceed the 32 MiB budget"
        );
        drop(first);
        let second = waiter
            .await
            .unwrap()
            .expect("granted once the first let go");
        assert_eq!(second.bytes(), 16 * MIB);
        assert_eq!(budget.available_bytes(), 16 * MIB);
        drop(second);
        assert_eq!(budget.available_bytes(), 32 * MIB);
    }

    #[tokio::test(start_paused = true)]
    async fn waiting_is_bounded_and_gives_up_as_busy() {
        let budget = MergeBudget::new(4 * MIB, 4 * MIB, Duration::from_secs(30));
        let mut first = budget.reservation();
        first.hold(3 * MIB).await.unwrap();
        let mut second = budget.reservation();
        let err = second.hold(2 * MIB).await.unwrap_err();
        assert_eq!(err, BudgetError::Busy(Duration::from_secs(30)));
        assert_eq!(second.bytes(), 0);
        assert_eq!(budget.waiting(), 0);
        assert_eq!(budget.available_bytes(), MIB, "a failed wait takes nothing");
    }

    #[tokio::test]
    async fn more_than_a_share_is_refused_at_once_and_growth_adds_up() {
        let budget = MergeBudget::new(8 * MIB, 32 * MIB, Duration::from_secs(30));
        assert_eq!(
            budget.per_run_bytes(),
            8 * MIB,
            "a share never exceeds the whole"
        );
        let mut r = budget.reservation();
        r.hold(MIB).await.unwrap();
        r.hold(MIB + 1).await.unwrap();
        r.hold(10).await.unwrap();
        assert_eq!(r.bytes(), MIB + 1, "a reservation never shrinks");
        assert_eq!(budget.available_bytes(), 8 * MIB - MIB - KIB);
        let err = r.hold(8 * MIB + 1).await.unwrap_err();
        assert!(matches!(err, BudgetError::OverShare { cap, .. } if cap == 8 * MIB));
        assert!(err
            .to_string()
            .contains("exceed the 8388608 bytes one run may hold"));
    }

    #[test]
    fn the_budget_is_a_sixteenth_of_the_limit_or_the_default() {
        let b = MergeBudget::from_memory_limit(Some(1024 * MIB as u64), 32 * MIB);
        assert_eq!((b.total_bytes(), b.per_run_bytes()), (64 * MIB, 32 * MIB));
        let small = MergeBudget::from_memory_limit(Some(128 * MIB as u64), 32 * MIB);
        assert_eq!(
            (small.total_bytes(), small.per_run_bytes()),
            (8 * MIB, 8 * MIB)
        );
        let none = MergeBudget::from_memory_limit(None, 32 * MIB);
        assert_eq!(none.total_bytes(), DEFAULT_BUDGET_BYTES);
    }
}
