//! SQLite persistence behind a bounded queue and one batching writer thread.
//!
//! Policy: a publish never waits on the database. `enqueue` is a `try_send`; when the queue is
//! full the record is dropped and counted (`pubsub_persist_dropped_total`). The writer drains up
//! to `BATCH` records per transaction and prunes rows beyond the retention window, so neither the
//! queue nor an in-memory database grows without bound.
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use rusqlite::{params, Connection, OptionalExtension};
use serde::Serialize;
use serde_json::value::RawValue;
use tokio::sync::{mpsc, oneshot};

use crate::metrics::Metrics;

const BATCH: usize = 4096;
/// Pause after each committed batch so records accumulate: the writer wakes at most ~200 times
/// a second instead of once per publish (each wake-up is a context switch on the CPU the
/// server's workers need; profiled at ~10% of a busy one-CPU server). Records wait at most this
/// long longer before they are persisted; nothing on the publish path waits for it.
const COALESCE: std::time::Duration = std::time::Duration::from_millis(5);

pub enum Record {
    Message {
        id: u64,
        topic: String,
        payload: String,
        publisher: Option<String>,
        timestamp: i64,
    },
    Consumption {
        message_id: u64,
        client: String,
        timestamp: i64,
    },
    /// Answered once everything queued before it is committed.
    Flush(oneshot::Sender<()>),
}

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
    conn: Arc<Mutex<Connection>>,
    tx: mpsc::Sender<Record>,
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
             client TEXT NOT NULL, timestamp INTEGER NOT NULL);",
    )?;
    Ok(conn)
}

impl Store {
    /// Opens (creating) the database and starts the writer thread.
    pub fn open(
        path: &str,
        queue: usize,
        retain: u64,
        metrics: Arc<Metrics>,
    ) -> anyhow::Result<(Store, JoinHandle<()>)> {
        let conn = open(path).map_err(|e| anyhow::anyhow!("DATABASE_FILE={path:?}: {e}"))?;
        let conn = Arc::new(Mutex::new(conn));
        let (tx, rx) = mpsc::channel(queue);
        let writer = {
            let conn = conn.clone();
            let metrics = metrics.clone();
            std::thread::Builder::new()
                .name("sqlite-writer".into())
                .spawn(move || write_loop(conn, rx, retain, metrics))?
        };
        Ok((Store { conn, tx, metrics }, writer))
    }

    /// Queues a record without waiting; returns false (and counts) when it had to be dropped.
    pub fn enqueue(&self, rec: Record) -> bool {
        let kind = match &rec {
            Record::Message { .. } => "message",
            Record::Consumption { .. } => "consumption",
            Record::Flush(_) => "flush",
        };
        match self.tx.try_send(rec) {
            Ok(()) => {
                self.metrics.persist_queue_depth.inc();
                true
            }
            Err(_) => {
                self.metrics
                    .persist_dropped
                    .with_label_values(&[kind])
                    .inc();
                false
            }
        }
    }

    /// Waits until everything queued so far is committed (shutdown, tests).
    pub async fn flush(&self) {
        let (done, wait) = oneshot::channel();
        if self.tx.send(Record::Flush(done)).await.is_ok() {
            self.metrics.persist_queue_depth.inc();
            let _ = wait.await;
        }
    }

    pub fn max_message_id(&self) -> rusqlite::Result<u64> {
        let conn = self.conn.lock().expect("sqlite mutex");
        conn.query_row("SELECT COALESCE(MAX(id), 0) FROM messages", [], |r| {
            r.get::<_, i64>(0)
        })
        .map(|v| v as u64)
    }

    /// Newest first; `before` is the cursor from the previous page.
    pub fn messages(
        &self,
        topic: Option<&str>,
        before: Option<u64>,
        limit: u32,
    ) -> rusqlite::Result<Vec<StoredMessage>> {
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
        rows.collect()
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

fn write_loop(
    conn: Arc<Mutex<Connection>>,
    mut rx: mpsc::Receiver<Record>,
    retain: u64,
    metrics: Arc<Metrics>,
) {
    let mut batch = Vec::with_capacity(BATCH);
    while let Some(first) = rx.blocking_recv() {
        batch.push(first);
        while batch.len() < BATCH {
            match rx.try_recv() {
                Ok(r) => batch.push(r),
                Err(_) => break,
            }
        }
        metrics.persist_queue_depth.sub(batch.len() as i64);
        if let Err(e) = write_batch(&conn, &mut batch, retain, &metrics) {
            tracing::error!(error = %e, "sqlite batch failed; records dropped");
            metrics
                .persist_dropped
                .with_label_values(&["write_error"])
                .inc_by(batch.len() as u64);
        }
        let mut flushed = false;
        for rec in batch.drain(..) {
            if let Record::Flush(done) = rec {
                let _ = done.send(());
                flushed = true;
            }
        }
        // A flush (shutdown, tests) is waited for: serve whatever follows it at once.
        if !flushed {
            std::thread::sleep(COALESCE);
        }
    }
}

fn write_batch(
    conn: &Mutex<Connection>,
    batch: &mut [Record],
    retain: u64,
    metrics: &Metrics,
) -> rusqlite::Result<()> {
    let mut conn = conn.lock().expect("sqlite mutex");
    let tx = conn.transaction()?;
    let (mut msgs, mut cons, mut max_id) = (0u64, 0u64, 0u64);
    {
        let mut ins_m = tx.prepare_cached(
            "INSERT OR REPLACE INTO messages (id, topic, payload, publisher, timestamp)
             VALUES (?1, ?2, ?3, ?4, ?5)",
        )?;
        let mut ins_c = tx.prepare_cached(
            "INSERT INTO consumptions (message_id, client, timestamp) VALUES (?1, ?2, ?3)",
        )?;
        for rec in batch.iter() {
            match rec {
                Record::Message {
                    id,
                    topic,
                    payload,
                    publisher,
                    timestamp,
                } => {
                    ins_m.execute(params![*id as i64, topic, payload, publisher, timestamp])?;
                    msgs += 1;
                    max_id = max_id.max(*id);
                }
                Record::Consumption {
                    message_id,
                    client,
                    timestamp,
                } => {
                    ins_c.execute(params![*message_id as i64, client, timestamp])?;
                    cons += 1;
                }
                Record::Flush(_) => {}
            }
        }
    }
    // Retention: ids are dense, so "id <= newest - retain" keeps the newest `retain` messages.
    if msgs > 0 && max_id > retain {
        tx.execute(
            "DELETE FROM messages WHERE id <= ?1",
            params![(max_id - retain) as i64],
        )?;
    }
    if cons > 0 {
        tx.execute(
            "DELETE FROM consumptions WHERE seq <= (SELECT MAX(seq) FROM consumptions) - ?1",
            params![retain as i64],
        )?;
    }
    tx.commit()?;
    metrics
        .persist_written
        .with_label_values(&["message"])
        .inc_by(msgs);
    metrics
        .persist_written
        .with_label_values(&["consumption"])
        .inc_by(cons);
    metrics.persist_batch.observe((msgs + cons) as f64);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn msg(id: u64, topic: &str) -> Record {
        Record::Message {
            id,
            topic: topic.into(),
            payload: format!("\"p{id}\""),
            publisher: Some("pub".into()),
            timestamp: 1,
        }
    }

    #[tokio::test]
    async fn writes_in_batches_pages_and_prunes() {
        let m = Arc::new(Metrics::new());
        let (store, _w) = Store::open(":memory:", 1000, 5, m.clone()).unwrap();
        for id in 1..=8 {
            assert!(store.enqueue(msg(id, if id % 2 == 0 { "even" } else { "odd" })));
        }
        store.flush().await;
        let all = store.messages(None, None, 100).unwrap();
        // Retention of 5 keeps ids 4..=8, newest first.
        assert_eq!(
            all.iter().map(|m| m.id).collect::<Vec<_>>(),
            vec![8, 7, 6, 5, 4]
        );
        assert_eq!(all[0].payload.get(), "\"p8\"");
        let page = store.messages(None, Some(6), 2).unwrap();
        assert_eq!(page.iter().map(|m| m.id).collect::<Vec<_>>(), vec![5, 4]);
        let even = store.messages(Some("even"), None, 100).unwrap();
        assert_eq!(even.iter().map(|m| m.id).collect::<Vec<_>>(), vec![8, 6, 4]);
        assert_eq!(store.max_message_id().unwrap(), 8);
        assert_eq!(m.persist_queue_depth.get(), 0);
    }

    #[tokio::test]
    async fn full_queue_drops_and_counts_instead_of_blocking() {
        let m = Arc::new(Metrics::new());
        let (store, _w) = Store::open(":memory:", 1, 100, m.clone()).unwrap();
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
        store.flush().await;
        assert_eq!(store.messages(None, None, 100).unwrap().len(), accepted);
    }
}
