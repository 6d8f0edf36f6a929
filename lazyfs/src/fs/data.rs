//! File data and attributes: open handles, cached reads and writes, sizes, syncs.

use std::ffi::OsStr;
use std::fs::{self, File, FileTimes, OpenOptions, Permissions};
use std::io;
use std::os::unix::fs::{chown, OpenOptionsExt, PermissionsExt};
use std::time::SystemTime;

use fuser::{Errno, FileAttr, TimeOrNow};

use super::names::Who;
use super::{Handle, LazyFs, State, R};

/// What setattr may change besides the size (mode, uid, gid, atime, mtime).
#[derive(Debug, Default)]
pub struct SetAttr {
    pub mode: Option<u32>,
    pub uid: Option<u32>,
    pub gid: Option<u32>,
    pub size: Option<u64>,
    pub atime: Option<TimeOrNow>,
    pub mtime: Option<TimeOrNow>,
}

fn when(t: TimeOrNow) -> SystemTime {
    match t {
        TimeOrNow::SpecificTime(t) => t,
        TimeOrNow::Now => SystemTime::now(),
    }
}

/// Opens a backing file read-write whatever the caller asked (the kernel has checked the
/// caller's rights, default_permissions): any handle may be the one a later fsync writes
/// the cache through. Read-only only where the backing file refuses writing.
fn open_backing(path: &std::path::Path) -> io::Result<File> {
    match OpenOptions::new().read(true).write(true).open(path) {
        Err(e) if matches!(e.raw_os_error(), Some(nix::libc::EROFS | nix::libc::EACCES)) => {
            File::open(path)
        }
        r => r,
    }
}

impl LazyFs {
    fn add_handle(&self, st: &mut State, file: File) -> R<u64> {
        let key = self.key(&file.metadata()?);
        let fh = st.next_fh;
        st.next_fh += 1;
        st.handles.insert(fh, Handle { file, key });
        Ok(fh)
    }

    pub(super) fn do_getattr(&self, ino: u64, fh: Option<u64>) -> R<FileAttr> {
        let st = self.state();
        let md = match fh.and_then(|fh| st.handles.get(&fh)) {
            Some(h) => h.file.metadata()?,
            None => self.stat_node(&st, ino)?,
        };
        Ok(st.attr(&md))
    }

    /// chmod, chown and utimes reach the backing file at once; a size change is cached.
    pub(super) fn do_setattr(&self, ino: u64, fh: Option<u64>, set: SetAttr) -> R<FileAttr> {
        let mut st = self.state();
        let md = self.stat_node(&st, ino)?;
        let abs = self.abs(&st.rel_path(ino)?);
        if let Some(mode) = set.mode {
            fs::set_permissions(&abs, Permissions::from_mode(mode & 0o7777))?;
        }
        if set.uid.is_some() || set.gid.is_some() {
            chown(&abs, set.uid, set.gid)?;
        }
        if set.atime.is_some() || set.mtime.is_some() {
            let mut times = FileTimes::new();
            if let Some(t) = set.atime {
                times = times.set_accessed(when(t));
            }
            if let Some(t) = set.mtime {
                times = times.set_modified(when(t));
            }
            File::open(&abs)?.set_times(times)?;
        }
        if let Some(size) = set.size {
            if !md.is_file() {
                return Err(Errno::EINVAL);
            }
            let key = self.key(&md);
            let State { cache, handles, .. } = &mut *st;
            match fh.and_then(|fh| handles.get(&fh)) {
                Some(h) => cache.truncate(key, &h.file, size)?,
                None => cache.truncate(key, &File::open(&abs)?, size)?,
            }
        }
        Ok(st.attr(&fs::symlink_metadata(&abs)?))
    }

    pub(super) fn do_open(&self, ino: u64, flags: i32) -> R<u64> {
        let mut st = self.state();
        let md = self.stat_node(&st, ino)?;
        if !md.is_file() {
            return Err(Errno::EINVAL);
        }
        let file = open_backing(&self.abs(&st.rel_path(ino)?))?;
        // O_TRUNC is a size change like any other: cached until a sync.
        if flags & nix::fcntl::OFlag::O_TRUNC.bits() != 0 {
            st.cache.truncate(self.key(&md), &file, 0)?;
        }
        self.add_handle(&mut st, file)
    }

    /// A new file exists in the backing directory at once (empty, like LazyFS's create).
    pub(super) fn do_create(
        &self,
        who: Who,
        parent: u64,
        name: &OsStr,
        mode: u32,
        flags: i32,
    ) -> R<(FileAttr, u64)> {
        let mut st = self.state();
        let rel = st.rel_path(parent)?.join(name);
        let abs = self.abs(&rel);
        let exclusive = flags & nix::fcntl::OFlag::O_EXCL.bits() != 0;
        let made = OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .mode(mode & 0o7777)
            .open(&abs);
        let file = match made {
            Ok(f) => {
                self.hand_over(&rel, who, Some(mode))?;
                // A reused inode number must not inherit a deleted file's cache.
                st.cache.forget(self.key(&f.metadata()?));
                f
            }
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists && !exclusive => {
                let f = open_backing(&abs)?;
                if flags & nix::fcntl::OFlag::O_TRUNC.bits() != 0 {
                    st.cache.truncate(self.key(&f.metadata()?), &f, 0)?;
                }
                f
            }
            Err(e) => return Err(e.into()),
        };
        let fh = self.add_handle(&mut st, file)?;
        Ok((self.entry(&mut st, rel)?, fh))
    }

    pub(super) fn do_read(&self, fh: u64, off: u64, size: u32) -> R<Vec<u8>> {
        let st = self.state();
        let h = st.handle(fh)?;
        Ok(st.cache.read(h.key, &h.file, off, size as usize)?)
    }

    pub(super) fn do_write(&self, fh: u64, off: u64, data: &[u8]) -> R<u32> {
        let mut st = self.state();
        let State { cache, handles, .. } = &mut *st;
        let h = handles.get(&fh).ok_or(Errno::EBADF)?;
        cache.write(h.key, &h.file, off, data)?;
        Ok(data.len() as u32)
    }

    /// close(2) persists nothing (as in LazyFS); an unlinked file's cache goes with its
    /// last handle.
    pub(super) fn do_release(&self, fh: u64) {
        let mut st = self.state();
        if let Some(h) = st.handles.remove(&fh) {
            if st.orphans.contains(&h.key) && st.open_count(h.key) == 0 {
                st.orphans.remove(&h.key);
                st.cache.forget(h.key);
            }
        }
    }

    pub(super) fn do_fsync(&self, fh: u64, datasync: bool) -> R<()> {
        let mut st = self.state();
        let State { cache, handles, .. } = &mut *st;
        let h = handles.get(&fh).ok_or(Errno::EBADF)?;
        cache.sync(h.key, &h.file, datasync)?;
        Ok(())
    }

    /// Directory entries are durable already; this only passes the fsync on.
    pub(super) fn do_fsyncdir(&self, ino: u64) -> R<()> {
        let st = self.state();
        self.stat_node(&st, ino)?;
        Ok(File::open(self.abs(&st.rel_path(ino)?))?.sync_all()?)
    }

    /// posix_fallocate: only mode 0, and only as its visible effect (the size), cached.
    pub(super) fn do_fallocate(&self, fh: u64, off: u64, len: u64, mode: i32) -> R<()> {
        if mode != 0 {
            return Err(Errno::EOPNOTSUPP);
        }
        let mut st = self.state();
        let State { cache, handles, .. } = &mut *st;
        let h = handles.get(&fh).ok_or(Errno::EBADF)?;
        let size = cache.size(h.key, h.file.metadata()?.len());
        if off + len > size {
            cache.truncate(h.key, &h.file, off + len)?;
        }
        Ok(())
    }
}
