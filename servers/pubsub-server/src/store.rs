//! SQLite persistence behind a bounded queue and one batching writer thread (`writer.rs`).
//!
//! The queue is bounded twice: in records (PERSIST_QUEUE) and in bytes (a quarter of
//! MEMORY_BUDGET_BYTES). `enqueue` never waits: when either bound is reached the record is
//! dropped and counted (`pubsub_persist_dropped_total`). `enqueue_acked` (PUBLISH_ACK=stored)
//! waits for room instead, and its receiver answers once the record is committed or has
//! failed for good. Ids are reserved in durable blocks (`reserve_ids`), so an id handed out
//! before a crash is never handed out again, even if its message was never stored.
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use rusqlite::{params, Connection, OptionalExtension};
use serde::Serialize;
use serde_json::value::RawValue;
use tokio::sync::{mpsc, oneshot, OwnedSemaphorePermit, Semaphore};

use crate::metrics::Metrics;
use crate::records::{Limits, Record, Stored};
use crate::writer::{self, Item};

/// Payload bytes after which a page of messages ends early.
pub const MAX_PAGE_BYTES: usize = 2 << 20;
#[derive(Serialize)]
pub struct StoredMessage {
    pub id: u64,
    pub topic: String,
    pub payload: Box<RawValue>,
    pub publisher: Option<String>,
    pub timestamp: i64,
}

#[derive(Serialize)]
pub struct StoredConsumption {
    pub seq: u64,
    pub message_id: u64,
    pub client: String,
    pub timestamp: i64,
}

pub struct Store {
    pub(crate) conn: Arc<Mutex<Connection>>,
    tx: mpsc::Sender<Item>,
    queue_bytes: Arc<Semaphore>,
    max_permits: u32,
    metrics: Arc<Metrics>,
}

fn open(path: &str) -> rusqlite::Result<Connection> {
    let conn = Connection::open(path)?;
    if path != ":memory:" {
        // WAL: readers do not block the writer; NORMAL sync is durable across process crashes.
        conn.pragma_update(None, "journal_mode", "WAL")?;
        conn.pragma_update(None, "synchronous", "NORMAL")?;
    }
    conn.execute_batch(
        "CREATE TABLE IF NOT EXISTS messages (
             id INTEGER PRIMARY KEY, topic TEXT NOT NULL, payload TEXT NOT NULL,
             publisher TEXT, timestamp INTEGER NOT NULL);
         CREATE INDEX IF NOT EXISTS messages_topic ON messages(topic, id);
         CREATE TABLE IF NOT EXISTS consumptions (
             seq INTEGER PRIMARY KEY AUTOINCREMENT, message_id INTEGER NOT NULL,
             client TEXT NOT NULL, timestamp INTEGER NOT NULL);
         CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value INTEGER NOT NULL);",
    )?;
    Ok(conn)
}

impl Store {
    /// Opens (creating) the database and starts the writer thread.
    pub fn open(
        path: &str,
        limits: Limits,
        metrics: Arc<Metrics>,
    ) -> anyhow::Result<(Store, JoinHandle<()>)> {
        let conn = open(path).map_err(|e| anyhow::anyhow!("DATABASE_FILE={path:?}: {e}"))?;
        let conn = Arc::new(Mutex::new(conn));
        let (tx, rx) = mpsc::channel(limits.queue);
        let max_permits = u32::try_from(limits.queue_bytes).unwrap_or(u32::MAX);
        let writer = writer::start(conn.clone(), rx, &limits, metrics.clone())?;
        let queue_bytes = Arc::new(Semaphore::new(max_permits as usize));
        let store = Store {
            conn,
            tx,
            queue_bytes,
            max_permits,
            metrics,
        };
        Ok((store, writer))
    }

    /// Queue bytes for `rec`; one record larger than the whole budget takes all of it.
    fn permits(&self, rec: &Record) -> u32 {
        u32::try_from(rec.weight())
            .unwrap_or(u32::MAX)
            .min(self.max_permits)
    }

    fn dropped(&self, kind: &str) -> bool {
        self.metrics
            .persist_dropped
            .with_label_values(&[kind])
            .inc();
        false
    }

    /// Queues a record without waiting; returns false (and counts) when it had to be dropped.
    pub fn enqueue(&self, rec: Record) -> bool {
        let kind = rec.kind();
        let Ok(bytes) = self
            .queue_bytes
            .clone()
            .try_acquire_many_owned(self.permits(&rec))
        else {
            return self.dropped(kind);
        };
        match self.tx.try_send(Item::record(rec, None, bytes)) {
            Ok(()) => {
                self.metrics.persist_queue_depth.inc();
                true
            }
            Err(_) => self.dropped(kind),
        }
    }

    /// Queues a record, waiting for room; the receiver answers once it is committed (or
    /// failed for good). If the writer is gone the receiver reports a closed channel.
    pub async fn enqueue_acked(&self, rec: Record) -> oneshot::Receiver<Stored> {
        let (done, wait) = oneshot::channel();
        let permits = self.permits(&rec);
        let bytes: OwnedSemaphorePermit = self
            .queue_bytes
            .clone()
            .acquire_many_owned(permits)
            .await
            .expect("the queue semaphore is never closed");
        if self
            .tx
            .send(Item::record(rec, Some(done), bytes))
            .await
            .is_ok()
        {
            self.metrics.persist_queue_depth.inc();
        }
        wait
    }

    /// Waits until everything queued so far is committed (shutdown, tests). An error says
    /// how many records failed for good since the previous flush.
    pub async fn flush(&self) -> Stored {
        let (done, wait) = oneshot::channel();
        self.tx
            .send(Item::Flush(done))
            .await
            .map_err(|_| "the writer has stopped".to_owned())?;
        self.metrics.persist_queue_depth.inc();
        wait.await
            .map_err(|_| "the writer has stopped".to_owned())?
    }

    /// The first id that may be handed out: above every stored id and every reserved block.
    pub fn id_floor(&self) -> rusqlite::Result<u64> {
        let conn = self.conn.lock().expect("sqlite mutex");
        let max: i64 = conn.query_row("SELECT COALESCE(MAX(id), 0) FROM messages", [], |r| {
            r.get(0)
        })?;
        let reserved: Option<i64> = conn
            .query_row("SELECT value FROM meta WHERE key = 'id_ceiling'", [], |r| {
                r.get(0)
            })
            .optional()?;
        Ok((max as u64 + 1).max(reserved.unwrap_or(0) as u64).max(1))
    }

    /// Durably records that ids below `ceiling` may be handed out (committed before any is).
    pub async fn reserve_ids(&self, ceiling: u64) -> anyhow::Result<()> {
        let conn = self.conn.clone();
        tokio::task::spawn_blocking(move || {
            let conn = conn.lock().expect("sqlite mutex");
            conn.execute(
                "INSERT INTO meta (key, value) VALUES ('id_ceiling', ?1)
                 ON CONFLICT(key) DO UPDATE SET value = excluded.value",
                params![ceiling as i64],
            )
        })
        .await??;
        Ok(())
    }

    /// Newest first; `before` is the cursor from the previous page. A page ends early (and
    /// says there is more) once its payloads reach MAX_PAGE_BYTES, so a page of 1 MiB messages
    /// is a few MiB, not a GiB.
    pub fn messages(
        &self,
        topic: Option<&str>,
        before: Option<u64>,
        limit: u32,
    ) -> rusqlite::Result<(Vec<StoredMessage>, bool)> {
        let conn = self.conn.lock().expect("sqlite mutex");
        let mut stmt = conn.prepare_cached(
            "SELECT id, topic, payload, publisher, timestamp FROM messages
             WHERE (?1 IS NULL OR topic = ?1) AND id < ?2 ORDER BY id DESC LIMIT ?3",
        )?;
        let rows = stmt.query_map(
            params![topic, before.unwrap_or(i64::MAX as u64) as i64, limit],
            |r| {
                let payload: String = r.get(2)?;
                Ok(StoredMessage {
                    id: r.get::<_, i64>(0)? as u64,
                    topic: r.get(1)?,
                    payload: RawValue::from_string(payload).unwrap_or_else(|_| {
                        RawValue::from_string("null".into()).expect("valid JSON")
                    }),
                    publisher: r.get(3)?,
                    timestamp: r.get(4)?,
                })
            },
        )?;
        let (mut items, mut bytes) = (Vec::new(), 0);
        for row in rows {
            let m = row?;
            bytes += m.payload.get().len();
            items.push(m);
            if bytes >= MAX_PAGE_BYTES {
                return Ok((items, true));
            }
        }
        Ok((items, false))
    }

    pub fn consumptions(
        &self,
        message_id: Option<u64>,
        before: Option<u64>,
        limit: u32,
    ) -> rusqlite::Result<(u64, Vec<StoredConsumption>)> {
        let conn = self.conn.lock().expect("sqlite mutex");
        let total: u64 = conn
            .query_row(
                "SELECT COUNT(*) FROM consumptions WHERE (?1 IS NULL OR message_id = ?1)",
                params![message_id.map(|m| m as i64)],
                |r| r.get::<_, i64>(0),
            )
            .optional()?
            .map(|v| v as u64)
            .unwrap_or(0);
        let mut stmt = conn.prepare_cached(
            "SELECT seq, message_id, client, timestamp FROM consumptions
             WHERE (?1 IS NULL OR message_id = ?1) AND seq < ?2 ORDER BY seq DESC LIMIT ?3",
        )?;
        let rows = stmt.query_map(
            params![
                message_id.map(|m| m as i64),
                before.unwrap_or(i64::MAX as u64) as i64,
                limit
            ],
            |r| {
                Ok(StoredConsumption {
                    seq: r.get::<_, i64>(0)? as u64,
                    message_id: r.get::<_, i64>(1)? as u64,
                    client: r.get(2)?,
                    timestamp: r.get(3)?,
                })
            },
        )?;
        Ok((total, rows.collect::<rusqlite::Result<_>>()?))
    }
}

/// Holds the database from another thread (so the writer cannot commit) until dropped.
#[cfg(test)]
pub(crate) struct Hold(Option<std::sync::mpsc::Sender<()>>, Option<JoinHandle<()>>);

#[cfg(test)]
impl Store {
    pub(crate) fn hold(&self) -> Hold {
        let (locked, is_locked) = std::sync::mpsc::channel();
        let (release, released) = std::sync::mpsc::channel::<()>();
        let conn = self.conn.clone();
        let t = std::thread::spawn(move || {
            let _held = conn.lock().unwrap();
            locked.send(()).unwrap();
            let _ = released.recv();
        });
        is_locked.recv().unwrap();
        Hold(Some(release), Some(t))
    }
}

#[cfg(test)]
impl Drop for Hold {
    fn drop(&mut self) {
        drop(self.0.take());
        self.1.take().unwrap().join().unwrap();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::records::ROW_OVERHEAD;

    fn msg(id: u64, topic: &str) -> Record {
        Record::Message {
            id,
            topic: topic.into(),
            payload: format!("\"p{id}\""),
            publisher: Some("pub".into()),
            timestamp: 1,
        }
    }

    fn limits(queue: usize, retain: u64) -> Limits {
        Limits {
            queue,
            queue_bytes: 1 << 20,
            retain,
            retain_bytes: None,
        }
    }

    #[tokio::test]
    async fn writes_in_batches_pages_and_prunes() {
        let m = Arc::new(Metrics::new());
        let (store, _w) = Store::open(":memory:", limits(1000, 5), m.clone()).unwrap();
        for id in 1..=8 {
            assert!(store.enqueue(msg(id, if id % 2 == 0 { "even" } else { "odd" })));
        }
        store.flush().await.unwrap();
        let all = store.messages(None, None, 100).unwrap().0;
        // Retention of 5 keeps ids 4..=8, newest first.
        assert_eq!(
            all.iter().map(|m| m.id).collect::<Vec<_>>(),
            vec![8, 7, 6, 5, 4]
        );
        assert_eq!(all[0].payload.get(), "\"p8\"");
        let page = store.messages(None, Some(6), 2).unwrap().0;
        assert_eq!(page.iter().map(|m| m.id).collect::<Vec<_>>(), vec![5, 4]);
        let even = store.messages(Some("even"), None, 100).unwrap().0;
        assert_eq!(even.iter().map(|m| m.id).collect::<Vec<_>>(), vec![8, 6, 4]);
        assert_eq!(store.id_floor().unwrap(), 9);
        assert_eq!(m.persist_queue_depth.get(), 0);
    }

    #[tokio::test]
    async fn full_queue_drops_and_counts_instead_of_blocking() {
        let m = Arc::new(Metrics::new());
        let (store, _w) = Store::open(":memory:", limits(1, 100), m.clone()).unwrap();
        // Hold the database so the writer cannot drain while we overfill the queue.
        let guard = store.conn.lock().unwrap();
        let accepted = (1..=50).filter(|&id| store.enqueue(msg(id, "t"))).count();
        drop(guard);
        assert!(
            accepted < 50,
            "a queue of 1 cannot accept 50 records while the writer is stuck"
        );
        let dropped = m.persist_dropped.with_label_values(&["message"]).get();
        assert_eq!(dropped as usize, 50 - accepted);
        store.flush().await.unwrap();
        assert_eq!(store.messages(None, None, 100).unwrap().0.len(), accepted);
    }

    #[tokio::test]
    async fn a_failing_record_does_not_take_its_batch_down() {
        let m = Arc::new(Metrics::new());
        let (store, _w) = Store::open(":memory:", limits(1000, 100), m.clone()).unwrap();
        store
            .conn
            .lock()
            .unwrap()
            .execute_batch(
                "CREATE TRIGGER poison BEFORE INSERT ON messages WHEN NEW.topic = 'poison'
                 BEGIN SELECT RAISE(ABORT, 'poisoned'); END;",
            )
            .unwrap();
        // The writer is held off, so the poisoned record shares a batch with good ones.
        let guard = store.hold();
        let mut poisoned = None;
        for id in 1..=5 {
            if id == 4 {
                poisoned = Some(store.enqueue_acked(msg(id, "poison")).await);
            } else {
                assert!(store.enqueue(msg(id, "t")));
            }
        }
        drop(guard);
        let err = store.flush().await.unwrap_err();
        assert_eq!(err, "1 records could not be stored");
        let answer = poisoned.unwrap().await.unwrap().unwrap_err();
        assert!(answer.contains("poisoned"), "{answer}");
        assert_eq!(m.persist_failed.with_label_values(&["message"]).get(), 1);
        let stored = store.messages(None, None, 100).unwrap().0;
        let ids: Vec<u64> = stored.iter().map(|m| m.id).collect();
        assert_eq!(
            ids,
            vec![5, 3, 2, 1],
            "the good records of the batch are kept"
        );
        store.flush().await.unwrap();
    }

    #[tokio::test]
    async fn kept_messages_stay_within_the_byte_budget_oldest_evicted_first() {
        let m = Arc::new(Metrics::new());
        let budget = 10 * (1000 + ROW_OVERHEAD + 7);
        let lim = Limits {
            retain_bytes: Some(budget),
            ..limits(1000, 100)
        };
        let (store, _w) = Store::open(":memory:", lim, m.clone()).unwrap();
        let big = |id| Record::Message {
            id,
            topic: "t".into(),
            payload: format!("\"{}\"", "x".repeat(998)),
            publisher: None,
            timestamp: 1,
        };
        for id in 1..=25 {
            assert!(store.enqueue(big(id)));
            if id % 7 == 0 {
                store.flush().await.unwrap();
            }
        }
        store.flush().await.unwrap();
        let ids: Vec<u64> = store
            .messages(None, None, 100)
            .unwrap()
            .0
            .iter()
            .map(|m| m.id)
            .collect();
        assert_eq!(
            ids,
            (16..=25).rev().collect::<Vec<_>>(),
            "the newest that fit"
        );
        assert_eq!(m.evicted_messages.with_label_values(&["budget"]).get(), 15);
        assert_eq!(m.evicted_messages.with_label_values(&["retain"]).get(), 0);
        assert!(m.kept_message_bytes.get() as u64 <= budget);
    }

    #[tokio::test]
    async fn an_acked_record_is_answered_only_after_its_commit() {
        let m = Arc::new(Metrics::new());
        let (store, _w) = Store::open(":memory:", limits(1000, 100), m.clone()).unwrap();
        let guard = store.hold();
        let mut wait = store.enqueue_acked(msg(1, "t")).await;
        // The writer cannot commit while the database is held: no answer yet.
        assert!(wait.try_recv().is_err());
        drop(guard);
        wait.await.unwrap().unwrap();
        assert_eq!(store.messages(None, None, 1).unwrap().0[0].id, 1);
    }

    #[tokio::test]
    async fn the_queue_is_bounded_in_bytes() {
        let m = Arc::new(Metrics::new());
        let lim = Limits {
            queue_bytes: 3000,
            ..limits(1000, 100)
        };
        let (store, _w) = Store::open(":memory:", lim, m.clone()).unwrap();
        let guard = store.conn.lock().unwrap();
        let big = |id| Record::Message {
            id,
            topic: "t".into(),
            payload: "1".repeat(1000),
            publisher: None,
            timestamp: 1,
        };
        let accepted = (1..=10).filter(|&id| store.enqueue(big(id))).count();
        drop(guard);
        // 1065 bytes each: two fit the 3000-byte queue; a record the stuck writer holds still
        // holds its bytes.
        assert_eq!(accepted, 2, "records of 1065 bytes queued in 3000 bytes");
        assert_eq!(
            m.persist_dropped.with_label_values(&["message"]).get() as usize,
            10 - accepted
        );
        store.flush().await.unwrap();
    }
}
