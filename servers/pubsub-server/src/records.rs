//! What the store queues for its writer thread (`writer.rs`), what the writer answers, and the
//! bounds both keep: below both, so the store and its writer do not import each other.

/// Bookkeeping bytes counted per row on top of its text (SQLite record, b-tree and index
/// entries), so a budget of small messages is not undercounted.
pub const ROW_OVERHEAD: u64 = 64;

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
}

impl Record {
    pub fn kind(&self) -> &'static str {
        match self {
            Record::Message { .. } => "message",
            Record::Consumption { .. } => "consumption",
        }
    }

    /// Bytes this record holds in the queue and, for a message, in the database.
    pub fn weight(&self) -> u64 {
        let text = match self {
            Record::Message {
                topic,
                payload,
                publisher,
                ..
            } => topic.len() + payload.len() + publisher.as_ref().map_or(0, String::len),
            Record::Consumption { client, .. } => client.len(),
        };
        text as u64 + ROW_OVERHEAD
    }
}

/// The writer's answer: committed, or why not.
pub type Stored = Result<(), String>;

/// Bounds of the queue and of what is kept.
pub struct Limits {
    pub queue: usize,
    pub queue_bytes: u64,
    /// Newest messages (and consumptions) kept.
    pub retain: u64,
    /// Bytes of messages kept (None: no byte bound, a file database).
    pub retain_bytes: Option<u64>,
}
