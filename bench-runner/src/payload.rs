//! The 16-byte measurement header at the front of every payload (big endian):
//! runner u16 | phase u8 | publisher u16 | sequence u40 | intended send time u48 (µs since the
//! sending process's clock base). 16 bytes so 16-byte payloads (nats-bench's size) still carry it.
use base64::Engine as _;

pub const HEADER_BYTES: usize = 16;
/// Text form (socketio string payloads): URL-safe base64 of the header, no padding.
pub const TEXT_HEADER_BYTES: usize = 22;
const SEQ_MAX: u64 = (1 << 40) - 1;
const TIME_MAX: u64 = (1 << 48) - 1;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Header {
    pub runner: u16,
    pub phase: u8,
    pub publisher: u16,
    pub seq: u64,
    pub intended_us: u64,
}

impl Header {
    pub fn encode(&self, out: &mut [u8]) {
        out[0..2].copy_from_slice(&self.runner.to_be_bytes());
        out[2] = self.phase;
        out[3..5].copy_from_slice(&self.publisher.to_be_bytes());
        out[5..10].copy_from_slice(&(self.seq & SEQ_MAX).to_be_bytes()[3..]);
        out[10..16].copy_from_slice(&(self.intended_us & TIME_MAX).to_be_bytes()[2..]);
    }

    pub fn decode(b: &[u8]) -> Option<Header> {
        if b.len() < HEADER_BYTES {
            return None;
        }
        let mut seq = [0u8; 8];
        seq[3..].copy_from_slice(&b[5..10]);
        let mut t = [0u8; 8];
        t[2..].copy_from_slice(&b[10..16]);
        Some(Header {
            runner: u16::from_be_bytes([b[0], b[1]]),
            phase: b[2],
            publisher: u16::from_be_bytes([b[3], b[4]]),
            seq: u64::from_be_bytes(seq),
            intended_us: u64::from_be_bytes(t),
        })
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
            runner: 513,
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
}
