//! Latency histogram: HdrHistogram in µs, 3 significant digits, 1 µs .. 60 s. Serialized as
//! base64 of the V2 + deflate encoding so results merge exactly across processes.
//!
//! Decoding reads results other processes wrote, so it trusts nothing: the V2 header decides
//! the size of the counts array and of the payload buffer the decoder allocates, so it is read
//! and checked here against what msgbench itself writes before the decoder sees it.
use base64::Engine as _;
use hdrhistogram::serialization::{Deserializer, Serializer, V2DeflateSerializer};
use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};
use std::borrow::Cow;
use std::io::Read;

pub const MAX_MICROS: u64 = 60_000_000;
/// Significant digits msgbench records with.
pub const SIGNIFICANT_DIGITS: u8 = 3;

/// Longest highest trackable value accepted when decoding: msgbench writes [`MAX_MICROS`];
/// ten times that leaves margin while keeping the counts array near 170 KB.
pub const MAX_DECODED_HIGHEST: u64 = 10 * MAX_MICROS;
/// Most significant digits accepted when decoding (each more multiplies the array by ~10).
pub const MAX_DECODED_DIGITS: u32 = SIGNIFICANT_DIGITS as u32;
/// Longest counts payload accepted: 9 bytes (the longest varint) for every count of the
/// largest accepted histogram (21,504 counts) fit in it.
pub const MAX_PAYLOAD_BYTES: usize = 256 * 1024;
/// Longest base64 text accepted for one histogram: the largest accepted payload, even
/// uncompressed or incompressible, in base64 is about 260 K characters.
pub const MAX_ENCODED_CHARS: usize = 512 * 1024;

const V2_COOKIE: u32 = 0x1c84_9313;
const V2_COMPRESSED_COOKIE: u32 = 0x1c84_9314;
/// Cookie, payload length, normalizing offset, digits, lowest, highest, conversion ratio.
const V2_HEADER_BYTES: usize = 40;

/// Why an encoded histogram was refused.
#[derive(Debug, thiserror::Error)]
pub enum HistoDecodeError {
    #[error("histogram text of {0} bytes, more than {MAX_ENCODED_CHARS}")]
    TooLong(usize),
    #[error("histogram base64: {0}")]
    Base64(#[from] base64::DecodeError),
    #[error("histogram: cookie {0:#010x} is not HdrHistogram V2 (plain or compressed)")]
    Cookie(u32),
    #[error("histogram: ends inside its {V2_HEADER_BYTES}-byte header")]
    Truncated,
    #[error("histogram: compressed data does not inflate: {0}")]
    Inflate(std::io::Error),
    #[error("histogram: inflates past the {0} bytes the largest accepted histogram takes")]
    InflatesTooFar(usize),
    #[error("histogram: payload of {0} bytes, more than {MAX_PAYLOAD_BYTES}")]
    Payload(u32),
    #[error("histogram: normalizing offset {0} (msgbench writes 0)")]
    NormalizingOffset(u32),
    #[error("histogram: {0} significant digits, more than {MAX_DECODED_DIGITS}")]
    Digits(u32),
    #[error("histogram: highest trackable value {0}, more than {MAX_DECODED_HIGHEST}")]
    Highest(u64),
    #[error("histogram: lowest discernible value {0} with highest {1} (needs 1 <= lowest <= highest / 2)")]
    Lowest(u64, u64),
    #[error("histogram: conversion ratio {0} (msgbench writes 1)")]
    Ratio(f64),
    #[error("histogram: a count of 2^64 - 1, which zig-zag decodes to no count")]
    Count,
    #[error("histogram: {0}")]
    Decode(#[from] hdrhistogram::serialization::DeserializeError),
    #[error("histogram: values beyond msgbench's 1 µs .. 60 s range: {0:?}")]
    Bounds(hdrhistogram::AdditionError),
}

#[derive(Clone, Debug)]
pub struct Histo(pub Histogram<u64>);

impl Default for Histo {
    fn default() -> Self {
        Histo(Histogram::new_with_bounds(1, MAX_MICROS, SIGNIFICANT_DIGITS).expect("valid bounds"))
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
            min_us: h.min(),
            p50_us: h.value_at_quantile(0.50),
            p90_us: h.value_at_quantile(0.90),
            p95_us: h.value_at_quantile(0.95),
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
    /// Absent from records of runners older than the field (the operator recomputes every
    /// summary from the merged histograms anyway).
    #[serde(default)]
    pub min_us: u64,
    pub p50_us: u64,
    pub p90_us: u64,
    #[serde(default)]
    pub p95_us: u64,
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
        Histo::decode(&text).map_err(serde::de::Error::custom)
    }
}

impl Histo {
    /// Decodes the base64 text [`Serialize`] writes, refusing anything sized beyond what
    /// msgbench writes before allocating for it.
    pub fn decode(text: &str) -> Result<Histo, HistoDecodeError> {
        if text.len() > MAX_ENCODED_CHARS {
            return Err(HistoDecodeError::TooLong(text.len()));
        }
        let raw = base64::engine::general_purpose::STANDARD.decode(text.trim())?;
        let v2 = plain_v2(&raw)?;
        let header = V2Header::read(&v2)?;
        header.check()?;
        let payload = &v2[V2_HEADER_BYTES..];
        check_counts(&payload[..payload.len().min(header.payload_len as usize)])?;
        let decoded: Histogram<u64> = Deserializer::new().deserialize(&mut &v2[..])?;
        let mut h = Histo::default();
        h.0.add(&decoded).map_err(HistoDecodeError::Bounds)?;
        Ok(h)
    }
}

fn be_u32(b: &[u8], at: usize) -> Result<u32, HistoDecodeError> {
    let bytes = b.get(at..at + 4).ok_or(HistoDecodeError::Truncated)?;
    Ok(u32::from_be_bytes(bytes.try_into().expect("4 bytes")))
}

fn be_u64(b: &[u8], at: usize) -> Result<u64, HistoDecodeError> {
    let bytes = b.get(at..at + 8).ok_or(HistoDecodeError::Truncated)?;
    Ok(u64::from_be_bytes(bytes.try_into().expect("8 bytes")))
}

/// The plain V2 encoding: `raw` itself, or the compressed form inflated, at most as far as the
/// largest accepted histogram reaches (a deflate bomb stops there).
fn plain_v2(raw: &[u8]) -> Result<Cow<'_, [u8]>, HistoDecodeError> {
    match be_u32(raw, 0)? {
        V2_COOKIE => Ok(Cow::Borrowed(raw)),
        V2_COMPRESSED_COOKIE => {
            let len = be_u32(raw, 4)? as usize;
            // The decoder reads at most `len` compressed bytes.
            let body = &raw[8..raw.len().min(8 + len)];
            let limit = V2_HEADER_BYTES + MAX_PAYLOAD_BYTES;
            let mut out = Vec::new();
            flate2::read::ZlibDecoder::new(body)
                .take(limit as u64 + 1)
                .read_to_end(&mut out)
                .map_err(HistoDecodeError::Inflate)?;
            if out.len() > limit {
                return Err(HistoDecodeError::InflatesTooFar(limit));
            }
            match be_u32(&out, 0)? {
                V2_COOKIE => Ok(Cow::Owned(out)),
                c => Err(HistoDecodeError::Cookie(c)),
            }
        }
        c => Err(HistoDecodeError::Cookie(c)),
    }
}

/// The V2 header fields after the cookie.
struct V2Header {
    payload_len: u32,
    normalizing_offset: u32,
    digits: u32,
    lowest: u64,
    highest: u64,
    ratio: f64,
}

impl V2Header {
    fn read(v2: &[u8]) -> Result<V2Header, HistoDecodeError> {
        Ok(V2Header {
            payload_len: be_u32(v2, 4)?,
            normalizing_offset: be_u32(v2, 8)?,
            digits: be_u32(v2, 12)?,
            lowest: be_u64(v2, 16)?,
            highest: be_u64(v2, 24)?,
            ratio: f64::from_bits(be_u64(v2, 32)?),
        })
    }

    /// Within what msgbench writes (plus margin): these size the decoder's allocations.
    fn check(&self) -> Result<(), HistoDecodeError> {
        use HistoDecodeError as E;
        if self.payload_len as usize > MAX_PAYLOAD_BYTES {
            return Err(E::Payload(self.payload_len));
        }
        if self.normalizing_offset != 0 {
            return Err(E::NormalizingOffset(self.normalizing_offset));
        }
        if self.digits > MAX_DECODED_DIGITS {
            return Err(E::Digits(self.digits));
        }
        if self.highest > MAX_DECODED_HIGHEST {
            return Err(E::Highest(self.highest));
        }
        if self.lowest < 1 || self.lowest > self.highest / 2 {
            return Err(E::Lowest(self.lowest, self.highest));
        }
        if self.ratio != 1.0 {
            return Err(E::Ratio(self.ratio));
        }
        Ok(())
    }
}

/// Refuses the one count the decoder cannot take: 2^64 - 1 zig-zag decodes to i64::MIN, which
/// it negates (a panic in debug builds).
fn check_counts(payload: &[u8]) -> Result<(), HistoDecodeError> {
    let mut at = 0;
    while at < payload.len() {
        let (value, len) = varint(&payload[at..]);
        if value == u64::MAX {
            return Err(HistoDecodeError::Count);
        }
        at += len;
    }
    Ok(())
}

/// One varint of the V2 payload (LEB128, the 9th byte carrying 8 bits) and its length; a
/// truncated one is returned as read (the decoder reports it).
fn varint(b: &[u8]) -> (u64, usize) {
    let mut value = 0u64;
    for (k, &byte) in b.iter().take(9).enumerate() {
        if k == 8 {
            return (value | (u64::from(byte) << 56), 9);
        }
        value |= u64::from(byte & 0x7f) << (7 * k);
        if byte & 0x80 == 0 {
            return (value, k + 1);
        }
    }
    (value, b.len())
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

    /// An uncompressed V2 encoding (cookie, header, payload) as base64 in a JSON string.
    fn v2_json(payload_len: u32, sigfig: u32, low: u64, high: u64, payload: &[u8]) -> String {
        let mut b = Vec::new();
        b.extend_from_slice(&0x1c84_9313u32.to_be_bytes());
        b.extend_from_slice(&payload_len.to_be_bytes());
        b.extend_from_slice(&0u32.to_be_bytes());
        b.extend_from_slice(&sigfig.to_be_bytes());
        b.extend_from_slice(&low.to_be_bytes());
        b.extend_from_slice(&high.to_be_bytes());
        b.extend_from_slice(&1.0f64.to_be_bytes());
        b.extend_from_slice(payload);
        let text = base64::engine::general_purpose::STANDARD.encode(b);
        serde_json::to_string(&text).unwrap()
    }

    fn decode_err(json: &str) -> String {
        match serde_json::from_str::<Histo>(json) {
            Ok(h) => panic!("decoded, {} values", h.len()),
            Err(e) => e.to_string(),
        }
    }

    /// A header sized for a counts array far beyond any msgbench histogram is refused before
    /// anything is sized from it (the decoder built a 2^62, 5-digit histogram, ~50 MB, and
    /// accepted it since it was empty).
    #[test]
    fn a_header_beyond_msgbench_ranges_is_refused() {
        let e = decode_err(&v2_json(0, 5, 1, 1 << 62, &[]));
        assert!(e.contains("significant"), "{e}");
        let e = decode_err(&v2_json(0, 3, 1, 1 << 62, &[]));
        assert!(
            e.contains("highest trackable value 4611686018427387904"),
            "{e}"
        );
        let e = decode_err(&v2_json(u32::MAX, 3, 1, MAX_MICROS, &[]));
        assert!(e.contains("payload of 4294967295 bytes"), "{e}");
    }

    /// A count of u64::MAX zig-zag decodes to i64::MIN, which the decoder negated (a panic in
    /// debug builds).
    #[test]
    fn a_count_of_i64_min_is_an_error_not_a_panic() {
        let e = decode_err(&v2_json(9, 3, 1, MAX_MICROS, &[0xFF; 9]));
        assert!(e.contains("count"), "{e}");
    }

    /// `v2` (an uncompressed encoding as `v2_json` builds it) in the compressed form.
    fn compressed_json(v2: &[u8]) -> String {
        use std::io::Write;
        let mut z = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::fast());
        z.write_all(v2).unwrap();
        let body = z.finish().unwrap();
        let mut b = 0x1c84_9314u32.to_be_bytes().to_vec();
        b.extend_from_slice(&(body.len() as u32).to_be_bytes());
        b.extend_from_slice(&body);
        let text = base64::engine::general_purpose::STANDARD.encode(b);
        serde_json::to_string(&text).unwrap()
    }

    fn v2_bytes(json: &str) -> Vec<u8> {
        let text: String = serde_json::from_str(json).unwrap();
        base64::engine::general_purpose::STANDARD
            .decode(text)
            .unwrap()
    }

    #[test]
    fn the_compressed_form_is_checked_too() {
        let big = v2_bytes(&v2_json(0, 3, 1, 1 << 62, &[]));
        let e = decode_err(&compressed_json(&big));
        assert!(
            e.contains("highest trackable value 4611686018427387904"),
            "{e}"
        );
        // A deflate bomb: a valid header, then 16 MB of zeros.
        let mut bomb = v2_bytes(&v2_json(16 << 20, 3, 1, MAX_MICROS, &[]));
        bomb.resize(bomb.len() + (16 << 20), 0);
        let e = decode_err(&compressed_json(&bomb));
        assert!(e.contains("inflates past"), "{e}");
        let e = decode_err(&serde_json::to_string(&"A".repeat(MAX_ENCODED_CHARS + 4)).unwrap());
        assert!(e.contains("more than 524288"), "{e}");
    }

    /// The bounds hold what msgbench writes at its largest: every count of the range distinct
    /// and too large for fewer than 9 varint bytes.
    #[test]
    fn the_largest_histogram_msgbench_writes_decodes() {
        let widest = Histogram::<u64>::new_with_bounds(1, MAX_DECODED_HIGHEST, 3).unwrap();
        assert!(9 * widest.distinct_values() <= MAX_PAYLOAD_BYTES);
        let mut h = Histo::default();
        let mut v = 1;
        while v <= MAX_MICROS {
            h.0.record_n(v, (1 << 62) + v).unwrap();
            v = h.0.next_non_equivalent(v);
        }
        let json = serde_json::to_string(&h).unwrap();
        assert!(json.len() < MAX_ENCODED_CHARS, "{} chars", json.len());
        let back: Histo = serde_json::from_str(&json).unwrap();
        assert_eq!(back, h);
    }
}
