//! One monotonic clock per process. Every timestamp the runner writes into a payload or compares
//! with one is microseconds since this base, so a latency is never computed across two clocks.
use std::sync::OnceLock;
use std::time::{Duration, Instant};

static BASE: OnceLock<Instant> = OnceLock::new();

/// The process's time base (fixed on first use).
pub fn base() -> Instant {
    *BASE.get_or_init(Instant::now)
}

/// Microseconds since the process base.
pub fn now_us() -> u64 {
    base().elapsed().as_micros() as u64
}

/// The instant `us` microseconds after the process base.
pub fn instant_at(us: u64) -> Instant {
    base() + Duration::from_micros(us)
}
