//! The SQLite writer thread: drains the queue in batches of up to `BATCH` records per
//! transaction, evicts the oldest messages beyond RETAIN_MESSAGES or the message byte budget,
//! and answers the publishes that wait for their record.
//!
//! A failed batch is retried (`ATTEMPTS`, with backoff); if it still fails, its records are
//! written one per transaction, so one bad record cannot take its neighbours down. A record
//! that cannot be written is counted (`pubsub_persist_failed_total`), logged, answered with
//! the error if a publish waits for it, and reported by the next flush: never a silent drop.
use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use rusqlite::{params, Connection, Transaction};
use tokio::sync::{mpsc, oneshot, OwnedSemaphorePermit};

use crate::metrics::Metrics;
use crate::records::{Limits, Record, Stored, ROW_OVERHEAD};

const BATCH: usize = 4096;
/// Pause after a batch nobody waits for, so records accumulate: the writer wakes at most ~200
/// times a second instead of once per publish (each wake-up is a context switch on the CPU the
/// server's workers need; profiled at ~10% of a busy one-CPU server). A batch with waiting
/// publishes (PUBLISH_ACK=stored) is not followed by a pause: records arriving during the
/// commit form the next batch anyway.
const COALESCE: Duration = Duration::from_millis(5);
/// Tries of a whole batch, and the pause before each retry.
const ATTEMPTS: usize = 3;
const BACKOFF: Duration = Duration::from_millis(20);

pub enum Item {
    Record {
        rec: Record,
        ack: Option<oneshot::Sender<Stored>>,
        /// Queue bytes, released when the record has been handled.
        _bytes: OwnedSemaphorePermit,
    },
    /// Answered once everything queued before it is handled.
    Flush(oneshot::Sender<Stored>),
}

impl Item {
    pub fn record(
        rec: Record,
        ack: Option<oneshot::Sender<Stored>>,
        bytes: OwnedSemaphorePermit,
    ) -> Item {
        Item::Record {
            rec,
            ack,
            _bytes: bytes,
        }
    }
}

struct Writer {
    conn: Arc<Mutex<Connection>>,
    retain: u64,
    retain_bytes: u64,
    /// (id, weight) of the stored messages, ascending: eviction takes from the front.
    kept: VecDeque<(u64, u64)>,
    kept_bytes: u64,
    /// Records that failed for good since the last flush.
    lost: u64,
    metrics: Arc<Metrics>,
}

pub fn start(
    conn: Arc<Mutex<Connection>>,
    rx: mpsc::Receiver<Item>,
    limits: &Limits,
    metrics: Arc<Metrics>,
) -> anyhow::Result<JoinHandle<()>> {
    let kept = kept_messages(&conn.lock().expect("sqlite mutex"))?;
    let mut w = Writer {
        conn,
        retain: limits.retain,
        retain_bytes: limits.retain_bytes.unwrap_or(u64::MAX),
        kept_bytes: kept.iter().map(|(_, b)| b).sum(),
        kept,
        lost: 0,
        metrics,
    };
    w.metrics.kept_message_bytes.set(w.kept_bytes as i64);
    Ok(std::thread::Builder::new()
        .name("sqlite-writer".into())
        .spawn(move || w.run(rx))?)
}

/// The stored messages' ids and weights (octet_length does not read the text itself).
fn kept_messages(conn: &Connection) -> rusqlite::Result<VecDeque<(u64, u64)>> {
    let mut stmt = conn.prepare(
        "SELECT id, octet_length(topic) + octet_length(payload)
                + COALESCE(octet_length(publisher), 0)
         FROM messages ORDER BY id",
    )?;
    let rows = stmt.query_map([], |r| {
        Ok((
            r.get::<_, i64>(0)? as u64,
            r.get::<_, i64>(1)? as u64 + ROW_OVERHEAD,
        ))
    })?;
    rows.collect()
}

impl Writer {
    fn run(&mut self, mut rx: mpsc::Receiver<Item>) {
        let mut batch = Vec::with_capacity(BATCH);
        while let Some(first) = rx.blocking_recv() {
            batch.push(first);
            while batch.len() < BATCH {
                match rx.try_recv() {
                    Ok(r) => batch.push(r),
                    Err(_) => break,
                }
            }
            self.metrics.persist_queue_depth.sub(batch.len() as i64);
            let waited = self.handle(&mut batch);
            if !waited {
                std::thread::sleep(COALESCE);
            }
        }
    }

    /// Writes a batch and answers its waiters; true if anyone was waiting.
    fn handle(&mut self, batch: &mut Vec<Item>) -> bool {
        let recs: Vec<(usize, &Record)> = batch
            .iter()
            .enumerate()
            .filter_map(|(i, item)| match item {
                Item::Record { rec, .. } => Some((i, rec)),
                Item::Flush(_) => None,
            })
            .collect();
        let failed = self.write_with_retries(&recs);
        let mut waited = false;
        for (i, item) in batch.drain(..).enumerate() {
            match item {
                Item::Record { ack, .. } => {
                    waited |= ack.is_some();
                    let res = failed.get(&i).map_or(Ok(()), |e| Err(e.clone()));
                    if let Some(ack) = ack {
                        let _ = ack.send(res);
                    }
                }
                Item::Flush(done) => {
                    waited = true;
                    let res = match std::mem::take(&mut self.lost) {
                        0 => Ok(()),
                        n => Err(format!("{n} records could not be stored")),
                    };
                    let _ = done.send(res);
                }
            }
        }
        waited
    }

    /// Commits `recs` (each with its index in the batch); returns the errors of those that
    /// failed for good, by that index.
    fn write_with_retries(&mut self, recs: &[(usize, &Record)]) -> HashMap<usize, String> {
        let mut failures = HashMap::new();
        if recs.is_empty() {
            return failures;
        }
        for attempt in 1..=ATTEMPTS {
            match self.commit(recs.iter().map(|(_, r)| *r)) {
                Ok(()) => return failures,
                Err(e) if attempt < ATTEMPTS => {
                    tracing::warn!(error = %e, attempt, records = recs.len(), "sqlite batch failed; retrying");
                    std::thread::sleep(BACKOFF * attempt as u32);
                }
                Err(e) => {
                    tracing::warn!(error = %e, records = recs.len(), "sqlite batch failed; writing its records one by one")
                }
            }
        }
        for &(i, rec) in recs {
            if let Err(e) = self.commit(std::iter::once(rec)) {
                tracing::error!(error = %e, kind = rec.kind(), "record could not be stored");
                self.metrics
                    .persist_failed
                    .with_label_values(&[rec.kind()])
                    .inc();
                self.lost += 1;
                failures.insert(i, format!("not stored: {e}"));
            }
        }
        failures
    }
}

/// Messages to evict after a batch: every id up to `cutoff`, and how many of them (and their
/// bytes) went for the count bound (`retain`) or for the byte budget (`budget`).
#[derive(Default)]
struct Eviction {
    cutoff: Option<u64>,
    from_kept: usize,
    retain: (u64, u64),
    budget: (u64, u64),
}

impl Writer {
    /// One transaction: insert, evict, prune consumptions. The in-memory view of what is
    /// kept changes only once the commit succeeded.
    fn commit<'a>(&mut self, recs: impl Iterator<Item = &'a Record>) -> rusqlite::Result<()> {
        let conn = self.conn.clone();
        let mut conn = conn.lock().expect("sqlite mutex");
        let tx = conn.transaction()?;
        let (mut added, consumptions) = insert(&tx, recs)?;
        added.sort_unstable();
        let ev = self.plan_eviction(&added);
        if let Some(cutoff) = ev.cutoff {
            tx.execute(
                "DELETE FROM messages WHERE id <= ?1",
                params![cutoff as i64],
            )?;
        }
        if consumptions > 0 {
            tx.execute(
                "DELETE FROM consumptions WHERE seq <= (SELECT MAX(seq) FROM consumptions) - ?1",
                params![self.retain as i64],
            )?;
        }
        tx.commit()?;
        self.apply(&added, &ev);
        let m = &self.metrics;
        let msgs = added.len() as u64;
        m.persist_written
            .with_label_values(&["message"])
            .inc_by(msgs);
        m.persist_written
            .with_label_values(&["consumption"])
            .inc_by(consumptions);
        m.persist_batch.observe((msgs + consumptions) as f64);
        Ok(())
    }

    /// Walks kept and newly added messages oldest first, evicting while over either bound.
    fn plan_eviction(&self, added: &[(u64, u64)]) -> Eviction {
        let mut count = self.kept.len() as u64 + added.len() as u64;
        let mut bytes = self.kept_bytes + added.iter().map(|(_, b)| b).sum::<u64>();
        let mut ev = Eviction::default();
        let (mut k, mut a) = (0, 0);
        while count > self.retain || bytes > self.retain_bytes {
            let next = match (self.kept.get(k), added.get(a)) {
                (Some(x), Some(y)) if x.0 < y.0 => {
                    k += 1;
                    *x
                }
                (Some(x), None) => {
                    k += 1;
                    *x
                }
                (_, Some(y)) => {
                    a += 1;
                    *y
                }
                (None, None) => break,
            };
            let reason = if count > self.retain {
                &mut ev.retain
            } else {
                &mut ev.budget
            };
            reason.0 += 1;
            reason.1 += next.1;
            count -= 1;
            bytes -= next.1;
            ev.cutoff = Some(next.0);
        }
        ev.from_kept = k;
        ev
    }

    fn apply(&mut self, added: &[(u64, u64)], ev: &Eviction) {
        self.kept.drain(..ev.from_kept);
        for &(id, w) in added
            .iter()
            .filter(|(id, _)| ev.cutoff.is_none_or(|c| *id > c))
        {
            // Ids arrive almost in order: the insertion point is at or near the back.
            let at = self.kept.partition_point(|(k, _)| *k < id);
            match self.kept.get_mut(at) {
                Some(e) if e.0 == id => e.1 = w,
                _ => self.kept.insert(at, (id, w)),
            }
        }
        let added_bytes: u64 = added.iter().map(|(_, b)| b).sum();
        self.kept_bytes = self.kept_bytes + added_bytes - ev.retain.1 - ev.budget.1;
        let m = &self.metrics;
        for (reason, (n, b)) in [("retain", ev.retain), ("budget", ev.budget)] {
            m.evicted_messages.with_label_values(&[reason]).inc_by(n);
            m.evicted_bytes.with_label_values(&[reason]).inc_by(b);
        }
        m.kept_message_bytes.set(self.kept_bytes as i64);
    }
}

/// Inserts the records; returns the (id, weight) of the messages and the consumption count.
fn insert<'a>(
    tx: &Transaction,
    recs: impl Iterator<Item = &'a Record>,
) -> rusqlite::Result<(Vec<(u64, u64)>, u64)> {
    let mut ins_m = tx.prepare_cached(
        "INSERT OR REPLACE INTO messages (id, topic, payload, publisher, timestamp)
         VALUES (?1, ?2, ?3, ?4, ?5)",
    )?;
    let mut ins_c = tx.prepare_cached(
        "INSERT INTO consumptions (message_id, client, timestamp) VALUES (?1, ?2, ?3)",
    )?;
    let (mut added, mut consumptions) = (Vec::new(), 0);
    for rec in recs {
        match rec {
            Record::Message {
                id,
                topic,
                payload,
                publisher,
                timestamp,
            } => {
                ins_m.execute(params![*id as i64, topic, payload, publisher, timestamp])?;
                added.push((*id, rec.weight()));
            }
            Record::Consumption {
                message_id,
                client,
                timestamp,
            } => {
                ins_c.execute(params![*message_id as i64, client, timestamp])?;
                consumptions += 1;
            }
        }
    }
    Ok((added, consumptions))
}
