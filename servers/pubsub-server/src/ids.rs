//! Message ids: unique and increasing, across restarts and crashes. Ids are handed out from
//! blocks whose upper end is committed to the database before the first id of the block is
//! used; a restart starts above the last reserved block (`Store::id_floor`). An id delivered
//! to subscribers but never stored before a crash is therefore never handed out again. The
//! cost is a gap of at most one block after a crash; a graceful stop gives the unused rest of
//! the block back (`seal`), so ids continue without a gap.
use std::sync::atomic::{AtomicU64, Ordering};

use crate::store::Store;

pub const BLOCK: u64 = 10_000;

pub struct Ids {
    next: AtomicU64,
    /// Ids below this are durably reserved.
    ceiling: AtomicU64,
    reserving: tokio::sync::Mutex<()>,
}

impl Ids {
    /// Nothing reserved yet: the first `next` reserves a block.
    pub fn starting_at(first: u64) -> Ids {
        Ids {
            next: AtomicU64::new(first),
            ceiling: AtomicU64::new(first),
            reserving: tokio::sync::Mutex::new(()),
        }
    }

    /// The next id, once a durable reservation covers it.
    pub async fn next(&self, store: &Store) -> anyhow::Result<u64> {
        // SeqCst: `seal` relies on a single order of these loads and stores.
        let id = self.next.fetch_add(1, Ordering::SeqCst);
        if id < self.ceiling.load(Ordering::SeqCst) {
            return Ok(id);
        }
        let _turn = self.reserving.lock().await;
        if id < self.ceiling.load(Ordering::SeqCst) {
            return Ok(id); // another publish reserved the block meanwhile
        }
        let ceiling = id + BLOCK;
        store.reserve_ids(ceiling).await?;
        self.ceiling.store(ceiling, Ordering::SeqCst);
        Ok(id)
    }

    /// At a graceful stop: lowers the durable reservation to the next unused id. Any publish
    /// still running afterwards finds no reservation and reserves a new block, so even then
    /// no id is handed out twice.
    pub async fn seal(&self, store: &Store) -> anyhow::Result<()> {
        let _turn = self.reserving.lock().await;
        self.ceiling.store(0, Ordering::SeqCst);
        store.reserve_ids(self.next.load(Ordering::SeqCst)).await
    }

    /// The id the next publish will get (for /health).
    pub fn peek(&self) -> u64 {
        self.next.load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::Metrics;
    use crate::records::Limits;
    use std::sync::Arc;

    fn open(path: &str) -> Store {
        let limits = Limits {
            queue: 16,
            queue_bytes: 1 << 20,
            retain: 100,
            retain_bytes: None,
        };
        Store::open(path, limits, Arc::new(Metrics::new()))
            .unwrap()
            .0
    }

    /// Ids handed out (delivered) but never stored, then a crash: the restarted server must
    /// not hand them out again.
    #[tokio::test]
    async fn ids_handed_out_before_a_crash_are_never_reused() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("ids.db");
        let db = db.to_str().unwrap();
        let store = open(db);
        let ids = Ids::starting_at(store.id_floor().unwrap());
        let mut handed = Vec::new();
        for _ in 0..3 {
            handed.push(ids.next(&store).await.unwrap());
        }
        assert_eq!(handed, vec![1, 2, 3]);
        drop((ids, store)); // nothing stored: the crash

        let store = open(db);
        let ids = Ids::starting_at(store.id_floor().unwrap());
        let after = ids.next(&store).await.unwrap();
        assert!(
            after > 3,
            "id {after} was already handed out before the restart"
        );
    }
}
