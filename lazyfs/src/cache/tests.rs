//! The cache's rules against an in-memory backing file: what a power loss (`discard`) leaves.

use std::cell::{Cell, RefCell};
use std::io;

use super::{Cache, FileKey};
use crate::backing::Backing;

/// A backing file in memory; `data` is what "the disk" holds, `syncs` counts fsyncs.
#[derive(Default)]
struct Mem {
    data: RefCell<Vec<u8>>,
    syncs: Cell<u32>,
    fail_writes: Cell<bool>,
}

impl Mem {
    fn with(bytes: &[u8]) -> Self {
        let m = Self::default();
        m.data.replace(bytes.to_vec());
        m
    }
    fn disk(&self) -> Vec<u8> {
        self.data.borrow().clone()
    }
}

impl Backing for Mem {
    fn size(&self) -> io::Result<u64> {
        Ok(self.data.borrow().len() as u64)
    }
    fn read_at(&self, buf: &mut [u8], off: u64) -> io::Result<usize> {
        let d = self.data.borrow();
        let off = (off as usize).min(d.len());
        let n = buf.len().min(d.len() - off);
        buf[..n].copy_from_slice(&d[off..off + n]);
        Ok(n)
    }
    fn write_all_at(&self, buf: &[u8], off: u64) -> io::Result<()> {
        if self.fail_writes.get() {
            return Err(io::Error::from_raw_os_error(28)); // ENOSPC
        }
        let mut d = self.data.borrow_mut();
        let end = off as usize + buf.len();
        if d.len() < end {
            d.resize(end, 0);
        }
        d[off as usize..end].copy_from_slice(buf);
        Ok(())
    }
    fn set_len(&self, len: u64) -> io::Result<()> {
        self.data.borrow_mut().resize(len as usize, 0);
        Ok(())
    }
    fn sync(&self, _data_only: bool) -> io::Result<()> {
        self.syncs.set(self.syncs.get() + 1);
        Ok(())
    }
}

const A: FileKey = FileKey { dev: 1, ino: 10 };
const B: FileKey = FileKey { dev: 1, ino: 11 };

fn read_all(c: &Cache, key: FileKey, m: &Mem) -> Vec<u8> {
    c.read(key, m, 0, 1 << 20).unwrap()
}

#[test]
fn synced_data_survives_a_discard() {
    let (mut c, m) = (Cache::new(), Mem::default());
    c.write(A, &m, 0, b"hello").unwrap();
    assert_eq!(
        m.disk(),
        b"",
        "a write alone must not reach the backing file"
    );
    assert_eq!(c.sync(A, &m, false).unwrap(), 5);
    assert_eq!((m.disk().as_slice(), m.syncs.get()), (&b"hello"[..], 1));
    assert_eq!(c.discard(), 0);
    assert_eq!(read_all(&c, A, &m), b"hello");
}

#[test]
fn unsynced_data_is_lost_and_counted() {
    let (mut c, m) = (Cache::new(), Mem::with(b"base"));
    c.write(A, &m, 4, b" more").unwrap();
    assert_eq!(read_all(&c, A, &m), b"base more");
    assert_eq!((c.size(A, 4), c.unsynced_bytes()), (9, 5));
    assert_eq!(c.discard(), 5);
    assert_eq!((c.unsynced_bytes(), c.size(A, 4)), (0, 4));
    assert_eq!((m.disk().as_slice(), m.syncs.get()), (&b"base"[..], 0));
}

#[test]
fn discard_restores_synced_bytes_under_an_unsynced_overwrite() {
    let (mut c, m) = (Cache::new(), Mem::default());
    c.write(A, &m, 0, b"AAAAAAAA").unwrap();
    c.sync(A, &m, true).unwrap();
    c.write(A, &m, 2, b"bbb").unwrap();
    assert_eq!(read_all(&c, A, &m), b"AAbbbAAA");
    assert_eq!(c.discard(), 3);
    assert_eq!(read_all(&c, A, &m), b"AAAAAAAA");
}

#[test]
fn overlapping_writes_count_each_byte_once_and_last_write_wins() {
    let (mut c, m) = (Cache::new(), Mem::default());
    c.write(A, &m, 0, b"aaaa").unwrap();
    c.write(A, &m, 8, b"cccc").unwrap();
    c.write(A, &m, 2, b"bbbbbbbb").unwrap(); // spans the gap into both ranges
    c.write(A, &m, 12, b"dd").unwrap(); // continues the last range
    assert_eq!(read_all(&c, A, &m), b"aabbbbbbbbccdd");
    assert_eq!(c.unsynced_bytes(), 14);
    c.sync(A, &m, false).unwrap();
    assert_eq!(m.disk(), b"aabbbbbbbbccdd");
}

#[test]
fn a_write_past_the_end_leaves_a_zero_hole() {
    let (mut c, m) = (Cache::new(), Mem::with(b"ab"));
    c.write(A, &m, 5, b"z").unwrap();
    assert_eq!(c.size(A, 2), 6);
    assert_eq!(read_all(&c, A, &m), b"ab\0\0\0z");
    assert_eq!(
        c.read(A, &m, 1, 2).unwrap(),
        b"b\0",
        "a read is cut to the asked length"
    );
    assert_eq!(c.read(A, &m, 6, 10).unwrap(), b"", "nothing past the end");
    c.sync(A, &m, false).unwrap();
    assert_eq!(m.disk(), b"ab\0\0\0z");
}

#[test]
fn unsynced_shrink_is_undone_by_a_discard() {
    let (mut c, m) = (Cache::new(), Mem::with(b"0123456789"));
    c.truncate(A, &m, 3).unwrap();
    assert_eq!((c.size(A, 10), read_all(&c, A, &m)), (3, b"012".to_vec()));
    assert_eq!(
        m.disk(),
        b"0123456789",
        "the backing file is cut only by a sync"
    );
    assert_eq!(c.discard(), 0, "a size change holds no data bytes");
    assert_eq!(c.size(A, 10), 10);
}

#[test]
fn synced_shrink_reaches_the_backing_file() {
    let (mut c, m) = (Cache::new(), Mem::with(b"0123456789"));
    c.truncate(A, &m, 3).unwrap();
    c.sync(A, &m, false).unwrap();
    assert_eq!(m.disk(), b"012");
    c.discard();
    assert_eq!(read_all(&c, A, &m), b"012");
}

#[test]
fn unsynced_extend_is_undone_by_a_discard() {
    // LazyFS's SimpleTruncate: truncate(4096) of an empty file, clear cache, size is 0 again.
    let (mut c, m) = (Cache::new(), Mem::default());
    c.truncate(A, &m, 4096).unwrap();
    assert_eq!(read_all(&c, A, &m), vec![0; 4096]);
    c.discard();
    assert_eq!((c.size(A, 0), read_all(&c, A, &m)), (0, vec![]));
}

#[test]
fn shrink_then_write_past_the_cut_reads_zeros_not_old_bytes() {
    let (mut c, m) = (Cache::new(), Mem::with(b"0123456789"));
    c.write(A, &m, 1, b"xx").unwrap();
    c.truncate(A, &m, 2).unwrap(); // cuts the cached "x" at 2 and the backing bytes past 2
    c.write(A, &m, 6, b"yy").unwrap();
    assert_eq!(read_all(&c, A, &m), b"0x\0\0\0\0yy");
    assert_eq!(c.unsynced_bytes(), 3);
    c.sync(A, &m, false).unwrap();
    assert_eq!(m.disk(), b"0x\0\0\0\0yy");
}

#[test]
fn a_truncate_back_to_the_backing_size_leaves_nothing_pending() {
    let (mut c, m) = (Cache::new(), Mem::with(b"abc"));
    c.truncate(A, &m, 3).unwrap();
    assert!(!c.is_dirty(A));
}

#[test]
fn syncing_one_file_leaves_another_unsynced() {
    let (mut c, ma, mb) = (Cache::new(), Mem::default(), Mem::default());
    c.write(A, &ma, 0, b"aaa").unwrap();
    c.write(B, &mb, 0, b"bbbbb").unwrap();
    c.sync(A, &ma, true).unwrap();
    assert_eq!((ma.disk(), mb.disk()), (b"aaa".to_vec(), vec![]));
    assert_eq!((c.unsynced_bytes(), mb.syncs.get()), (5, 0));
    assert_eq!(c.discard(), 5);
    assert_eq!(
        (read_all(&c, A, &ma), read_all(&c, B, &mb)),
        (b"aaa".to_vec(), vec![])
    );
}

#[test]
fn sync_of_a_clean_file_is_a_plain_fsync() {
    let (mut c, m) = (Cache::new(), Mem::with(b"x"));
    assert_eq!(c.sync(A, &m, false).unwrap(), 0);
    assert_eq!((m.syncs.get(), m.disk()), (1, b"x".to_vec()));
}

#[test]
fn a_failed_sync_keeps_the_data_for_a_retry() {
    let (mut c, m) = (Cache::new(), Mem::default());
    c.write(A, &m, 0, b"keep").unwrap();
    m.fail_writes.set(true);
    assert!(c.sync(A, &m, false).is_err());
    assert_eq!((c.unsynced_bytes(), m.syncs.get()), (4, 0));
    m.fail_writes.set(false);
    assert_eq!(c.sync(A, &m, false).unwrap(), 4);
    assert_eq!(m.disk(), b"keep");
}

#[test]
fn forget_drops_one_file_and_reports_its_bytes() {
    let (mut c, m) = (Cache::new(), Mem::default());
    c.write(A, &m, 0, b"gone").unwrap();
    c.write(B, &m, 0, b"kept").unwrap();
    assert_eq!(c.forget(A), 4);
    assert_eq!((c.unsynced_bytes(), c.forget(A)), (4, 0));
}
