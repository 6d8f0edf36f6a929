//! The lazy page cache, without FUSE: per backing inode, the byte ranges written since the
//! last fsync and any pending size change. Reads merge it over the backing file; `sync`
//! writes one file's state through; `discard` drops everything (a power loss).
//!
//! A file's logical content is the backing file cut to `base_len` (the smallest size it was
//! truncated to since the last sync), zero-extended to `size`, with `extents` laid over it.

mod extents;
#[cfg(test)]
mod tests;

use std::collections::hash_map::Entry;
use std::collections::HashMap;
use std::io;

use crate::backing::{read_full, Backing};
use extents::Extents;

/// A backing inode: (st_dev, st_ino). Hard links share it and a rename keeps it, so cached
/// data follows the file, as in LazyFS (which keys its cache by inode too).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct FileKey {
    pub dev: u64,
    pub ino: u64,
}

#[derive(Debug)]
struct Pending {
    /// Backing length when the entry was made: with no change left, the entry is dropped.
    backing_len: u64,
    /// How much of the backing file is still visible (truncates since the last sync cut it).
    base_len: u64,
    /// The logical file size the kernel is told.
    size: u64,
    extents: Extents,
}

impl Pending {
    fn new(backing_len: u64) -> Self {
        Self {
            backing_len,
            base_len: backing_len,
            size: backing_len,
            extents: Extents::default(),
        }
    }

    fn is_clean(&self) -> bool {
        self.extents.is_empty()
            && self.base_len == self.backing_len
            && self.size == self.backing_len
    }
}

/// All unsynced state of one mounted file system.
#[derive(Debug, Default)]
pub struct Cache {
    files: HashMap<FileKey, Pending>,
}

impl Cache {
    pub fn new() -> Self {
        Self::default()
    }

    fn entry(&mut self, key: FileKey, backing: &dyn Backing) -> io::Result<&mut Pending> {
        Ok(match self.files.entry(key) {
            Entry::Occupied(e) => e.into_mut(),
            Entry::Vacant(e) => e.insert(Pending::new(backing.size()?)),
        })
    }

    fn drop_if_clean(&mut self, key: FileKey) {
        if self.files.get(&key).is_some_and(Pending::is_clean) {
            self.files.remove(&key);
        }
    }

    /// Keeps `data` at `off` in memory only; the file grows if it ends past the size.
    pub fn write(
        &mut self,
        key: FileKey,
        backing: &dyn Backing,
        off: u64,
        data: &[u8],
    ) -> io::Result<()> {
        if data.is_empty() {
            return Ok(());
        }
        let p = self.entry(key, backing)?;
        p.extents.write(off, data);
        p.size = p.size.max(off + data.len() as u64);
        Ok(())
    }

    /// ftruncate(2) in memory: cuts cached data past `len`, hides the backing bytes past it
    /// (until a sync cuts them for real), and zero-extends when `len` is larger.
    pub fn truncate(&mut self, key: FileKey, backing: &dyn Backing, len: u64) -> io::Result<()> {
        let p = self.entry(key, backing)?;
        p.extents.cut(len);
        p.base_len = p.base_len.min(len);
        p.size = len;
        self.drop_if_clean(key);
        Ok(())
    }

    /// The size the file has for its readers: the cached size, or the backing one.
    pub fn size(&self, key: FileKey, backing_len: u64) -> u64 {
        self.files.get(&key).map_or(backing_len, |p| p.size)
    }

    /// Up to `len` bytes at `off`: cached data over the backing file, zeros in holes.
    pub fn read(
        &self,
        key: FileKey,
        backing: &dyn Backing,
        off: u64,
        len: usize,
    ) -> io::Result<Vec<u8>> {
        let Some(p) = self.files.get(&key) else {
            let mut buf = vec![0; len];
            let n = read_full(backing, &mut buf, off)?;
            buf.truncate(n);
            return Ok(buf);
        };
        if off >= p.size {
            return Ok(Vec::new());
        }
        let end = p.size.min(off + len as u64);
        let mut buf = vec![0; (end - off) as usize];
        if off < p.base_len {
            let visible = (p.base_len.min(end) - off) as usize;
            // Bytes the backing file lacks stay zero (a hole).
            read_full(backing, &mut buf[..visible], off)?;
        }
        p.extents.overlay(off, &mut buf);
        Ok(buf)
    }

    /// fsync/fdatasync of one file: its cut, its data and its size reach the backing file,
    /// then the backing file is synced. Returns the cached data bytes written. Both flavours
    /// write the size too: fdatasync must persist the size needed to read the data back.
    pub fn sync(
        &mut self,
        key: FileKey,
        backing: &dyn Backing,
        data_only: bool,
    ) -> io::Result<u64> {
        let Some(p) = self.files.get(&key) else {
            backing.sync(data_only)?;
            return Ok(0);
        };
        if p.base_len < backing.size()? {
            backing.set_len(p.base_len)?;
        }
        for (off, data) in p.extents.iter() {
            backing.write_all_at(data, off)?;
        }
        if backing.size()? != p.size {
            backing.set_len(p.size)?;
        }
        backing.sync(data_only)?;
        // Only now: a failed write above leaves the entry, so a later sync retries it all.
        let written = p.extents.bytes();
        self.files.remove(&key);
        Ok(written)
    }

    /// Forgets one file's unsynced state (its last name is gone); returns the bytes dropped.
    pub fn forget(&mut self, key: FileKey) -> u64 {
        self.files.remove(&key).map_or(0, |p| p.extents.bytes())
    }

    /// Power loss: drops every unsynced byte and size change; returns the data bytes dropped.
    pub fn discard(&mut self) -> u64 {
        let dropped = self.unsynced_bytes();
        self.files.clear();
        dropped
    }

    /// Each file with unsynced data and its bytes, the most first.
    pub fn unsynced_by_file(&self) -> Vec<(FileKey, u64)> {
        let mut files: Vec<_> = (self.files.iter())
            .map(|(k, p)| (*k, p.extents.bytes()))
            .filter(|(_, b)| *b > 0)
            .collect();
        files.sort_by_key(|f| std::cmp::Reverse(f.1));
        files
    }

    /// Data bytes written and not yet synced (size-only changes count 0).
    pub fn unsynced_bytes(&self) -> u64 {
        self.files.values().map(|p| p.extents.bytes()).sum()
    }

    /// Whether the file has anything unsynced (data or a size change).
    pub fn is_dirty(&self, key: FileKey) -> bool {
        self.files.contains_key(&key)
    }
}
