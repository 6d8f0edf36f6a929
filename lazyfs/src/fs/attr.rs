//! Backing metadata as FUSE attributes, with the size the cache says (unsynced writes and
//! truncates included).

use std::fs::Metadata;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use fuser::{FileAttr, FileType, INodeNo};

use super::State;
use crate::cache::FileKey;

/// How long the kernel may keep names and attributes. Short: sizes change under it only
/// through this file system, but a second opinion costs little.
pub const TTL: Duration = Duration::from_secs(1);

pub fn kind(ft: std::fs::FileType) -> FileType {
    FileType::from_std(ft).unwrap_or(FileType::RegularFile)
}

fn time(secs: i64, nsecs: i64) -> SystemTime {
    if secs >= 0 {
        UNIX_EPOCH + Duration::new(secs as u64, nsecs as u32)
    } else {
        UNIX_EPOCH - Duration::from_secs(secs.unsigned_abs())
    }
}

impl State {
    pub(super) fn attr(&self, md: &Metadata) -> FileAttr {
        let key = FileKey {
            dev: md.dev(),
            ino: md.ino(),
        };
        let size = if md.is_file() {
            self.cache.size(key, md.len())
        } else {
            md.len()
        };
        FileAttr {
            ino: INodeNo(self.inodes.fuse_ino(md.ino())),
            size,
            blocks: md.blocks().max(size.div_ceil(512)),
            atime: time(md.atime(), md.atime_nsec()),
            mtime: time(md.mtime(), md.mtime_nsec()),
            ctime: time(md.ctime(), md.ctime_nsec()),
            crtime: UNIX_EPOCH,
            kind: kind(md.file_type()),
            perm: (md.permissions().mode() & 0o7777) as u16,
            nlink: md.nlink() as u32,
            uid: md.uid(),
            gid: md.gid(),
            rdev: md.rdev() as u32,
            blksize: md.blksize() as u32,
            flags: 0,
        }
    }
}
