//! A coarse latency histogram for one timeline second: 20 logarithmic buckets per decade from
//! 1 µs to 100 s, kept sparse. Hand-written rather than an HdrHistogram because every second of
//! every task holds one: HdrHistogram's smallest (1 significant digit, 1 µs .. 60 s) is a
//! 368-count array, while a second's deliveries usually fill fewer than 15 of these buckets.
//! Merging adds counts, so it is exact across runners and trials; a percentile is its bucket's
//! geometric midpoint, within 6 % of the exact value (10^(1/40) − 1 ≈ 5.9 %).
use serde::{Deserialize, Serialize};

/// Buckets per decade of latency.
pub const BUCKETS_PER_DECADE: f64 = 20.0;
/// 8 decades: 1 µs .. 100 s (larger values land in the last bucket).
pub const BUCKETS: u8 = 160;

/// `(bucket, count)` pairs, sorted by bucket, no zero counts.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct CoarseLatency(Vec<(u8, u64)>);

/// The bucket of a latency in µs, from the buckets' lower bounds: the value's bit length
/// gives the first candidate, and a power of two spans at most 7 buckets, so a short forward
/// scan finds it. A log10 per delivery was ~8 % of a fast subscriber's CPU (perf,
/// bench/runner-notes.md), a binary search over all bounds no better.
pub fn bucket_of(us: u64) -> u8 {
    let (bounds, first) = tables();
    let mut k = first[(u64::BITS - us.leading_zeros()) as usize];
    while k + 1 < bounds.len() && bounds[k + 1] <= us {
        k += 1;
    }
    k as u8
}

/// The lower bounds, and per bit length n the last bucket whose bound is ≤ 2^(n−1) (the
/// smallest value of that length; 0 for n = 0).
fn tables() -> &'static ([u64; BUCKETS as usize], [usize; 65]) {
    static T: std::sync::OnceLock<([u64; BUCKETS as usize], [usize; 65])> =
        std::sync::OnceLock::new();
    T.get_or_init(|| {
        let bounds = *lower_bounds();
        let mut first = [0usize; 65];
        for (n, f) in first.iter_mut().enumerate().skip(1) {
            let smallest = 1u64 << (n - 1);
            *f = bounds.partition_point(|&lb| lb <= smallest) - 1;
        }
        (bounds, first)
    })
}

/// The bucket by its definition, floor(log10(µs) × 20); what the bounds are built from.
fn bucket_by_log(us: u64) -> u8 {
    if us <= 1 {
        return 0;
    }
    let b = ((us as f64).log10() * BUCKETS_PER_DECADE).floor();
    (b as u64).min(u64::from(BUCKETS - 1)) as u8
}

/// The smallest µs of every bucket, found by bisecting `bucket_by_log` (monotone), so both
/// give the same bucket for every value.
fn lower_bounds() -> &'static [u64; BUCKETS as usize] {
    static BOUNDS: std::sync::OnceLock<[u64; BUCKETS as usize]> = std::sync::OnceLock::new();
    BOUNDS.get_or_init(|| {
        let mut bounds = [0u64; BUCKETS as usize];
        for (k, bound) in bounds.iter_mut().enumerate().skip(1) {
            let (mut lo, mut hi) = (2u64, 1u64 << 40); // 2^40 µs is past the last bucket
            while lo < hi {
                let mid = lo + (hi - lo) / 2;
                if usize::from(bucket_by_log(mid)) >= k {
                    hi = mid;
                } else {
                    lo = mid + 1;
                }
            }
            *bound = lo;
        }
        bounds
    })
}

/// The value a bucket stands for: its geometric midpoint, in µs.
pub fn bucket_midpoint_us(b: u8) -> f64 {
    10f64.powf((f64::from(b) + 0.5) / BUCKETS_PER_DECADE)
}

impl CoarseLatency {
    pub fn record(&mut self, us: u64) {
        self.add_count(bucket_of(us), 1);
    }

    fn add_count(&mut self, bucket: u8, n: u64) {
        match self.0.binary_search_by_key(&bucket, |&(b, _)| b) {
            Ok(i) => self.0[i].1 = self.0[i].1.saturating_add(n),
            Err(i) => self.0.insert(i, (bucket, n)),
        }
    }

    pub fn add(&mut self, other: &CoarseLatency) {
        for &(b, n) in &other.0 {
            // Decoded input is not trusted to be in range or free of zero counts.
            if b < BUCKETS && n > 0 {
                self.add_count(b, n);
            }
        }
    }

    pub fn count(&self) -> u64 {
        self.0.iter().fold(0u64, |a, &(_, n)| a.saturating_add(n))
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The latency (µs, bucket midpoint) at quantile `q` (0..=1): the first bucket whose
    /// cumulative count reaches `q` of all samples, as HdrHistogram's `value_at_quantile` does.
    pub fn quantile_us(&self, q: f64) -> Option<f64> {
        let total = self.count();
        if total == 0 {
            return None;
        }
        let want = ((q.clamp(0.0, 1.0) * total as f64).ceil() as u64).max(1);
        let mut seen = 0u64;
        for &(b, n) in &self.0 {
            seen = seen.saturating_add(n);
            if seen >= want {
                return Some(bucket_midpoint_us(b));
            }
        }
        self.0.last().map(|&(b, _)| bucket_midpoint_us(b))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The table search agrees with the definition everywhere: every value up to 2 s, and
    /// each bucket's bound and its neighbours up to the clamp.
    #[test]
    fn bucket_search_matches_the_log_definition() {
        for us in 0..2_000_000 {
            assert_eq!(bucket_of(us), bucket_by_log(us), "{us} µs");
        }
        for &b in lower_bounds().iter() {
            for us in [b.saturating_sub(1), b, b + 1] {
                assert_eq!(bucket_of(us), bucket_by_log(us), "{us} µs");
            }
        }
        for us in [u64::MAX, 1 << 40, 100_000_000, 99_999_999] {
            assert_eq!(bucket_of(us), bucket_by_log(us), "{us} µs");
        }
    }

    #[test]
    fn every_latency_is_within_6_percent_of_its_bucket_midpoint() {
        for us in (1..2_000u64).chain((1..400).map(|i| i * 250_007)) {
            let mid = bucket_midpoint_us(bucket_of(us));
            let err = (mid - us as f64).abs() / us as f64;
            assert!(err <= 0.06 || us == 1, "{us} µs -> {mid} ({err})");
        }
        assert_eq!(bucket_of(u64::MAX), BUCKETS - 1);
    }

    #[test]
    fn merging_is_exact_and_percentiles_follow_the_counts() {
        let (mut a, mut b) = (CoarseLatency::default(), CoarseLatency::default());
        (0..98).for_each(|_| a.record(1_000));
        (0..2).for_each(|_| b.record(500_000));
        a.add(&b);
        assert_eq!(a.count(), 100);
        let p50 = a.quantile_us(0.5).unwrap();
        let p99 = a.quantile_us(0.99).unwrap();
        assert!((p50 / 1_000.0 - 1.0).abs() < 0.06, "{p50}");
        assert!((p99 / 500_000.0 - 1.0).abs() < 0.06, "{p99}");
        assert_eq!(CoarseLatency::default().quantile_us(0.99), None);
    }

    #[test]
    fn decoded_buckets_out_of_range_or_empty_are_ignored() {
        let bad: CoarseLatency = serde_json::from_str("[[200,5],[3,0],[4,2]]").unwrap();
        let mut a = CoarseLatency::default();
        a.add(&bad);
        assert_eq!(a, serde_json::from_str("[[4,2]]").unwrap());
    }
}
