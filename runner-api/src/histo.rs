//! Latency histogram: HdrHistogram in µs, 3 significant digits, 1 µs .. 60 s. Serialized as
//! base64 of the V2 + deflate encoding so results merge exactly across processes.
use base64::Engine as _;
use hdrhistogram::serialization::{Deserializer, Serializer, V2DeflateSerializer};
use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

pub const MAX_MICROS: u64 = 60_000_000;

#[derive(Clone, Debug)]
pub struct Histo(pub Histogram<u64>);

impl Default for Histo {
    fn default() -> Self {
        Histo(Histogram::new_with_bounds(1, MAX_MICROS, 3).expect("valid bounds"))
    }
}

impl PartialEq for Histo {
    fn eq(&self, other: &Self) -> bool {
        self.0 == other.0
    }
}

impl Histo {
    /// Records a value; values past 60 s count as 60 s (and 0 as 1 µs) rather than vanish.
    pub fn record(&mut self, micros: u64) {
        self.0.saturating_record(micros.max(1));
    }
    pub fn add(&mut self, other: &Histo) {
        self.0.add(&other.0).expect("same bounds");
    }
    pub fn len(&self) -> u64 {
        self.0.len()
    }
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
    pub fn summary(&self) -> Option<LatencyPercentiles> {
        if self.0.is_empty() {
            return None;
        }
        let h = &self.0;
        Some(LatencyPercentiles {
            count: h.len(),
            p50_us: h.value_at_quantile(0.50),
            p90_us: h.value_at_quantile(0.90),
            p99_us: h.value_at_quantile(0.99),
            p999_us: h.value_at_quantile(0.999),
            max_us: h.max(),
            mean_us: (h.mean() * 10.0).round() / 10.0,
            stddev_us: (h.stdev() * 10.0).round() / 10.0,
        })
    }
}

/// Percentiles read from a histogram (never averaged across histograms).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LatencyPercentiles {
    pub count: u64,
    pub p50_us: u64,
    pub p90_us: u64,
    pub p99_us: u64,
    pub p999_us: u64,
    pub max_us: u64,
    pub mean_us: f64,
    pub stddev_us: f64,
}

impl Serialize for Histo {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut buf = Vec::new();
        V2DeflateSerializer::new()
            .serialize(&self.0, &mut buf)
            .map_err(|e| serde::ser::Error::custom(format!("histogram: {e:?}")))?;
        s.serialize_str(&base64::engine::general_purpose::STANDARD.encode(buf))
    }
}

impl<'de> Deserialize<'de> for Histo {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        let raw = base64::engine::general_purpose::STANDARD
            .decode(text.trim())
            .map_err(|e| serde::de::Error::custom(format!("histogram base64: {e}")))?;
        let decoded: Histogram<u64> = Deserializer::new()
            .deserialize(&mut raw.as_slice())
            .map_err(|e| serde::de::Error::custom(format!("histogram: {e:?}")))?;
        let mut h = Histo::default();
        h.0.add(&decoded)
            .map_err(|e| serde::de::Error::custom(format!("histogram bounds: {e:?}")))?;
        Ok(h)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn serialized_histogram_round_trips_exactly() {
        let mut h = Histo::default();
        for v in [1, 5, 999, 1_000_001, 70_000_000] {
            h.record(v);
        }
        let json = serde_json::to_string(&h).unwrap();
        let back: Histo = serde_json::from_str(&json).unwrap();
        assert_eq!(back, h);
        assert_eq!(back.0.max(), h.0.highest_equivalent(MAX_MICROS));
        assert_eq!(back.len(), 5);
    }
}
