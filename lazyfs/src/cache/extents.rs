//! Non-overlapping byte ranges of one file, keyed by start offset. A later write replaces the
//! overlapped part of earlier ones; a write that continues a range is appended to it, so a
//! log written in small appends stays one buffer.

use std::collections::BTreeMap;

#[derive(Debug, Default)]
pub struct Extents {
    map: BTreeMap<u64, Vec<u8>>,
}

impl Extents {
    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    /// Bytes held (each byte once: ranges never overlap).
    pub fn bytes(&self) -> u64 {
        self.map.values().map(|v| v.len() as u64).sum()
    }

    pub fn iter(&self) -> impl Iterator<Item = (u64, &[u8])> {
        self.map.iter().map(|(off, v)| (*off, v.as_slice()))
    }

    pub fn write(&mut self, off: u64, data: &[u8]) {
        let end = off + data.len() as u64;
        self.clear_range(off, end);
        // Append to a range that ends exactly here instead of starting a new one.
        let prev = self.map.range_mut(..off).next_back();
        let start = match prev {
            Some((&start, buf)) if start + buf.len() as u64 == off => {
                buf.extend_from_slice(data);
                start
            }
            _ => {
                self.map.insert(off, data.to_vec());
                off
            }
        };
        if let Some(next) = self.map.remove(&end) {
            self.map
                .get_mut(&start)
                .expect("just written")
                .extend_from_slice(&next);
        }
    }

    /// Drops everything at or past `len` (a truncate).
    pub fn cut(&mut self, len: u64) {
        self.clear_range(len, u64::MAX);
    }

    /// Removes the bytes in [from, to), splitting ranges that straddle either end.
    fn clear_range(&mut self, from: u64, to: u64) {
        // Only the range starting at or before `from` can reach into it from the left.
        let first = self
            .map
            .range(..=from)
            .next_back()
            .map_or(from, |(s, _)| *s);
        let hit: Vec<u64> = self
            .map
            .range(first..to)
            .filter(|(s, v)| *s + v.len() as u64 > from)
            .map(|(s, _)| *s)
            .collect();
        for start in hit {
            let buf = self.map.remove(&start).expect("listed above");
            let end = start + buf.len() as u64;
            if start < from {
                self.map
                    .insert(start, buf[..(from - start) as usize].to_vec());
            }
            if end > to {
                self.map.insert(to, buf[(to - start) as usize..].to_vec());
            }
        }
    }

    /// Copies the held bytes that fall in [off, off + buf.len()) over `buf`.
    pub fn overlay(&self, off: u64, buf: &mut [u8]) {
        let end = off + buf.len() as u64;
        let first = self.map.range(..=off).next_back().map_or(off, |(s, _)| *s);
        for (&start, data) in self.map.range(first..end) {
            let (lo, hi) = (start.max(off), (start + data.len() as u64).min(end));
            if lo < hi {
                let src = &data[(lo - start) as usize..(hi - start) as usize];
                buf[(lo - off) as usize..(hi - off) as usize].copy_from_slice(src);
            }
        }
    }
}
