//! One monotonic clock per process. Every timestamp the runner writes into a payload or compares
//! with one is microseconds since this base, so a latency is never computed across two clocks.
use std::sync::OnceLock;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// The monotonic base, and the wall-clock time read at the same moment (for reporting a
/// process-clock time as a date).
static BASE: OnceLock<(Instant, SystemTime)> = OnceLock::new();

fn bases() -> &'static (Instant, SystemTime) {
    BASE.get_or_init(|| (Instant::now(), SystemTime::now()))
}

/// The process's time base (fixed on first use).
pub fn base() -> Instant {
    bases().0
}

/// Microseconds since the process base.
pub fn now_us() -> u64 {
    base().elapsed().as_micros() as u64
}

/// The instant `us` microseconds after the process base.
pub fn instant_at(us: u64) -> Instant {
    base() + Duration::from_micros(us)
}

/// Process-clock `us` as milliseconds since the Unix epoch (the wall clock at the base plus
/// monotonic time since, so wall-clock steps during the run do not move it).
pub fn unix_ms(us: u64) -> u64 {
    let at = bases().1 + Duration::from_micros(us);
    at.duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn process_time_converts_to_the_wall_clock() {
        let us = now_us();
        let wall = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_millis() as u64;
        assert!(
            unix_ms(us).abs_diff(wall) < 1_000,
            "{} vs {wall}",
            unix_ms(us)
        );
        assert_eq!(unix_ms(us + 5_000_000) - unix_ms(us), 5_000);
    }
}
