//! The one kind of I/O the cache does: on a backing file's handle. A trait so the cache's
//! rules can be tested against an in-memory file, and the FUSE adapter hands it a real `File`.

use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;

/// A backing file as the cache sees it: positional reads and writes, length, and durability.
pub trait Backing {
    /// Current length of the backing file (what survives a power loss, once synced).
    fn size(&self) -> io::Result<u64>;
    /// Reads at `off`; fewer bytes than asked (0 at end of file) like pread(2).
    fn read_at(&self, buf: &mut [u8], off: u64) -> io::Result<usize>;
    fn write_all_at(&self, buf: &[u8], off: u64) -> io::Result<()>;
    fn set_len(&self, len: u64) -> io::Result<()>;
    /// fsync(2) (`data_only` = fdatasync(2)) of the backing file.
    fn sync(&self, data_only: bool) -> io::Result<()>;
}

impl Backing for File {
    fn size(&self) -> io::Result<u64> {
        Ok(self.metadata()?.len())
    }
    fn read_at(&self, buf: &mut [u8], off: u64) -> io::Result<usize> {
        FileExt::read_at(self, buf, off)
    }
    fn write_all_at(&self, buf: &[u8], off: u64) -> io::Result<()> {
        FileExt::write_all_at(self, buf, off)
    }
    fn set_len(&self, len: u64) -> io::Result<()> {
        File::set_len(self, len)
    }
    fn sync(&self, data_only: bool) -> io::Result<()> {
        if data_only {
            self.sync_data()
        } else {
            self.sync_all()
        }
    }
}

/// Fills `buf` from `off` until it is full or the backing file ends; returns bytes read.
pub fn read_full(backing: &dyn Backing, buf: &mut [u8], off: u64) -> io::Result<usize> {
    let mut done = 0;
    while done < buf.len() {
        match backing.read_at(&mut buf[done..], off + done as u64) {
            Ok(0) => break,
            Ok(n) => done += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(done)
}
