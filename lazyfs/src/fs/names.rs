//! Namespace operations: straight to the backing directory, durable at once (as in LazyFS,
//! which caches file data only). The cache only hears of a file whose last name is gone.

use std::ffi::{OsStr, OsString};
use std::fs::{self, DirBuilder, Metadata, Permissions};
use std::os::unix::ffi::OsStringExt;
use std::os::unix::fs::{lchown, DirBuilderExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

use fuser::{Errno, FileAttr, FileType, RenameFlags};
use nix::sys::stat::{Mode, SFlag};

use super::attr::kind;
use super::{LazyFs, State, R};
use crate::inodes::ROOT;

/// The caller's uid and gid: the daemon runs as root, so what it creates is handed over.
pub type Who = (u32, u32);

impl LazyFs {
    /// Stat of a node's path, refusing a path that now names another file (stale after an
    /// unlink, or a rename over it).
    pub(super) fn stat_node(&self, st: &State, ino: u64) -> R<Metadata> {
        let md = fs::symlink_metadata(self.abs(&st.rel_path(ino)?))?;
        if st.inodes.fuse_ino(md.ino()) != ino {
            return Err(Errno::ENOENT);
        }
        Ok(md)
    }

    /// Stats `rel` and tells the inode table the kernel now knows it by this name.
    pub(super) fn entry(&self, st: &mut State, rel: PathBuf) -> R<FileAttr> {
        let md = fs::symlink_metadata(self.abs(&rel))?;
        let attr = st.attr(&md);
        st.inodes.remember(attr.ino.0, rel);
        Ok(attr)
    }

    /// A new entry's owner and mode: the caller's, and exactly `mode` (not the daemon's umask).
    /// If that fails (no CAP_CHOWN) the entry is removed again: the create fails as a whole
    /// instead of leaving a root-owned file the caller cannot use.
    pub(super) fn hand_over(&self, rel: &Path, who: Who, mode: Option<u32>) -> R<()> {
        let abs = self.abs(rel);
        let set = || -> std::io::Result<()> {
            lchown(&abs, Some(who.0), Some(who.1))?;
            if let Some(mode) = mode {
                fs::set_permissions(&abs, Permissions::from_mode(mode & 0o7777))?;
            }
            Ok(())
        };
        set().map_err(|e| {
            let is_dir = fs::symlink_metadata(&abs).is_ok_and(|m| m.is_dir());
            let _ = if is_dir {
                fs::remove_dir(&abs)
            } else {
                fs::remove_file(&abs)
            };
            e.into()
        })
    }

    pub(super) fn do_lookup(&self, parent: u64, name: &OsStr) -> R<FileAttr> {
        let mut st = self.state();
        let rel = st.rel_path(parent)?.join(name);
        self.entry(&mut st, rel)
    }

    pub(super) fn do_mkdir(&self, who: Who, parent: u64, name: &OsStr, mode: u32) -> R<FileAttr> {
        let mut st = self.state();
        let rel = st.rel_path(parent)?.join(name);
        DirBuilder::new()
            .mode(mode & 0o7777)
            .create(self.abs(&rel))?;
        self.hand_over(&rel, who, Some(mode))?;
        self.entry(&mut st, rel)
    }

    pub(super) fn do_mknod(
        &self,
        who: Who,
        parent: u64,
        name: &OsStr,
        mode: u32,
        rdev: u32,
    ) -> R<FileAttr> {
        let mut st = self.state();
        let rel = st.rel_path(parent)?.join(name);
        let kind = SFlag::from_bits_truncate(mode & SFlag::S_IFMT.bits());
        let perm = Mode::from_bits_truncate(mode & 0o7777);
        nix::sys::stat::mknod(&self.abs(&rel), kind, perm, rdev.into())
            .map_err(|e| Errno::from_i32(e as i32))?;
        self.hand_over(&rel, who, Some(mode))?;
        self.entry(&mut st, rel)
    }

    pub(super) fn do_symlink(
        &self,
        who: Who,
        parent: u64,
        name: &OsStr,
        target: &Path,
    ) -> R<FileAttr> {
        let mut st = self.state();
        let rel = st.rel_path(parent)?.join(name);
        std::os::unix::fs::symlink(target, self.abs(&rel))?;
        self.hand_over(&rel, who, None)?;
        self.entry(&mut st, rel)
    }

    pub(super) fn do_link(&self, ino: u64, newparent: u64, newname: &OsStr) -> R<FileAttr> {
        let mut st = self.state();
        self.stat_node(&st, ino)?;
        let (from, to) = (st.rel_path(ino)?, st.rel_path(newparent)?.join(newname));
        fs::hard_link(self.abs(&from), self.abs(&to))?;
        self.entry(&mut st, to)
    }

    pub(super) fn do_readlink(&self, ino: u64) -> R<Vec<u8>> {
        let st = self.state();
        self.stat_node(&st, ino)?;
        Ok(fs::read_link(self.abs(&st.rel_path(ino)?))?
            .into_os_string()
            .into_vec())
    }

    pub(super) fn do_unlink(&self, parent: u64, name: &OsStr) -> R<()> {
        let mut st = self.state();
        let abs = self.abs(&st.rel_path(parent)?.join(name));
        let md = fs::symlink_metadata(&abs)?;
        fs::remove_file(&abs)?;
        if md.is_file() && md.nlink() == 1 {
            st.unlinked(self.key(&md));
        }
        Ok(())
    }

    pub(super) fn do_rmdir(&self, parent: u64, name: &OsStr) -> R<()> {
        let st = self.state();
        Ok(fs::remove_dir(self.abs(&st.rel_path(parent)?.join(name)))?)
    }

    /// rename(2) on the backing directory at once; cached data follows its inode. A file
    /// replaced at the destination loses its last name like an unlink.
    pub(super) fn do_rename(&self, names: [(u64, &OsStr); 2], flags: RenameFlags) -> R<()> {
        if flags.contains(RenameFlags::RENAME_EXCHANGE)
            || flags.contains(RenameFlags::RENAME_WHITEOUT)
        {
            return Err(Errno::EINVAL);
        }
        let mut st = self.state();
        let from = st.rel_path(names[0].0)?.join(names[0].1);
        let to = st.rel_path(names[1].0)?.join(names[1].1);
        let (afrom, ato) = (self.abs(&from), self.abs(&to));
        let moved = fs::symlink_metadata(&afrom)?;
        let replaced = fs::symlink_metadata(&ato)
            .ok()
            .filter(|m| m.is_file() && m.nlink() == 1);
        if flags.contains(RenameFlags::RENAME_NOREPLACE) {
            let (cwd, no) = (
                nix::fcntl::AT_FDCWD,
                nix::fcntl::RenameFlags::RENAME_NOREPLACE,
            );
            nix::fcntl::renameat2(cwd, &afrom, cwd, &ato, no)
                .map_err(|e| Errno::from_i32(e as i32))?;
        } else {
            fs::rename(&afrom, &ato)?;
        }
        // rename onto another link of the same inode changes nothing (POSIX).
        if let Some(old) = replaced.filter(|m| m.ino() != moved.ino()) {
            st.unlinked(self.key(&old));
        }
        st.inodes.renamed(&from, &to);
        Ok(())
    }

    /// The whole directory ("." and ".." first); the caller skips to its offset.
    pub(super) fn do_readdir(&self, ino: u64) -> R<Vec<(u64, FileType, OsString)>> {
        let st = self.state();
        let md = self.stat_node(&st, ino)?;
        let abs = self.abs(&st.rel_path(ino)?);
        let up = if ino == ROOT {
            ROOT
        } else {
            st.inodes.fuse_ino(fs::metadata(abs.join(".."))?.ino())
        };
        let mut out = vec![(
            st.inodes.fuse_ino(md.ino()),
            FileType::Directory,
            ".".into(),
        )];
        out.push((up, FileType::Directory, "..".into()));
        for e in fs::read_dir(&abs)? {
            let e = e?;
            let ino = st.inodes.fuse_ino(std::os::unix::fs::DirEntryExt::ino(&e));
            out.push((ino, kind(e.file_type()?), e.file_name()));
        }
        Ok(out)
    }
}
