//! The 16-byte measurement header at the front of every payload (big endian):
//! run tag u16 | runner u8 | phase u8 | publisher u16 | sequence u40 | intended send time u40
//! (µs since the sending process's clock base, modulo 2^40: 12.7 days, far beyond any latency,
//! so [`Header::latency_at`] unwraps it exactly). 16 bytes so 16-byte payloads (nats-bench's
//! size) still carry it. The run tag tells this run's messages from any other run's (or any
//! other client's) on the same subjects: those are counted apart, never as this run's.
use base64::Engine as _;

pub const HEADER_BYTES: usize = 16;
/// Text form (socketio string payloads): URL-safe base64 of the header, no padding.
pub const TEXT_HEADER_BYTES: usize = 22;
const SEQ_MAX: u64 = (1 << 40) - 1;
const TIME_MAX: u64 = (1 << 40) - 1;
/// Runner ids fit one byte (admission allows 64 runners).
pub const MAX_RUNNER: u16 = u8::MAX as u16;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Header {
    /// Which run (and trial) sent it: see the module comment.
    pub run: u16,
    pub runner: u16,
    pub phase: u8,
    pub publisher: u16,
    pub seq: u64,
    pub intended_us: u64,
}

impl Header {
    pub fn encode(&self, out: &mut [u8]) {
        debug_assert!(
            self.runner <= MAX_RUNNER,
            "runner id {} > {MAX_RUNNER}",
            self.runner
        );
        out[0..2].copy_from_slice(&self.run.to_be_bytes());
        out[2] = self.runner as u8;
        out[3] = self.phase;
        out[4..6].copy_from_slice(&self.publisher.to_be_bytes());
        out[6..11].copy_from_slice(&(self.seq & SEQ_MAX).to_be_bytes()[3..]);
        out[11..16].copy_from_slice(&(self.intended_us & TIME_MAX).to_be_bytes()[3..]);
    }

    pub fn decode(b: &[u8]) -> Option<Header> {
        if b.len() < HEADER_BYTES {
            return None;
        }
        let mut seq = [0u8; 8];
        seq[3..].copy_from_slice(&b[6..11]);
        let mut t = [0u8; 8];
        t[3..].copy_from_slice(&b[11..16]);
        Some(Header {
            run: u16::from_be_bytes([b[0], b[1]]),
            runner: u16::from(b[2]),
            phase: b[3],
            publisher: u16::from_be_bytes([b[4], b[5]]),
            seq: u64::from_be_bytes(seq),
            intended_us: u64::from_be_bytes(t),
        })
    }

    /// Microseconds from the intended send time to `now_us` (same clock): the header keeps the
    /// time modulo 2^40, so the difference is taken modulo 2^40 too.
    pub fn latency_at(&self, now_us: u64) -> u64 {
        now_us.wrapping_sub(self.intended_us) & TIME_MAX
    }

    /// Writes a binary payload of `len` bytes (header, then filler) into `out`.
    pub fn write_payload(&self, len: usize, out: &mut bytes::BytesMut) {
        let start = out.len();
        out.resize(start + len.max(HEADER_BYTES), b'x');
        self.encode(&mut out[start..start + HEADER_BYTES]);
    }

    /// A text payload of `len` characters: base64 header, then filler.
    pub fn to_text(&self, len: usize) -> String {
        let mut raw = [0u8; HEADER_BYTES];
        self.encode(&mut raw);
        let mut s = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(raw);
        while s.len() < len {
            s.push('x');
        }
        s
    }

    pub fn from_text(s: &str) -> Option<Header> {
        let head = s.get(..TEXT_HEADER_BYTES)?;
        let raw = base64::engine::general_purpose::URL_SAFE_NO_PAD
            .decode(head)
            .ok()?;
        Header::decode(&raw)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_round_trips_in_binary_and_text() {
        let h = Header {
            run: 0xBEEF,
            runner: 200,
            phase: 7,
            publisher: 9999,
            seq: (1 << 40) - 2,
            intended_us: 123_456_789_012,
        };
        let mut b = bytes::BytesMut::new();
        h.write_payload(16, &mut b);
        assert_eq!(b.len(), 16);
        assert_eq!(Header::decode(&b), Some(h));
        let t = h.to_text(40);
        assert_eq!(t.len(), 40);
        assert_eq!(Header::from_text(&t), Some(h));
        assert_eq!(Header::decode(&b[..15]), None);
    }

    #[test]
    fn latency_survives_the_40_bit_wrap_of_the_send_time() {
        let sent = (1u64 << 40) - 100; // 100 µs before the field wraps
        let h = Header {
            run: 1,
            runner: 1,
            phase: 0,
            publisher: 0,
            seq: 0,
            intended_us: sent,
        };
        let mut b = bytes::BytesMut::new();
        h.write_payload(16, &mut b);
        let got = Header::decode(&b).unwrap();
        assert_eq!(got.latency_at(sent + 250), 250);
        assert_eq!(
            h.latency_at(sent + 250),
            250,
            "a full-width time gives the same"
        );
    }
}
