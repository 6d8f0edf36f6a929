//! Whether this machine can mount FUSE, and a mounted lazy file system for a test.

#![allow(dead_code)] // each test binary uses part of it

use std::fs::OpenOptions;
use std::path::{Path, PathBuf};

use msgbench_lazyfs::fs::{mount_config, Control, LazyFs};

/// Why FUSE cannot be mounted here, or None when it can (root and a usable /dev/fuse).
pub fn cannot_mount() -> Option<String> {
    if !nix::unistd::geteuid().is_root() {
        return Some("not root: mount(2) of a FUSE file system needs CAP_SYS_ADMIN".into());
    }
    match OpenOptions::new().read(true).write(true).open("/dev/fuse") {
        Ok(_) => None,
        Err(e) => Some(format!("/dev/fuse is not usable: {e}")),
    }
}

/// Skips the calling test (returns None) with the reason on stderr when FUSE is unusable.
pub fn or_skip(test: &str) -> Option<()> {
    match cannot_mount() {
        None => Some(()),
        Some(why) => {
            // Straight to the stderr handle: libtest captures eprintln!, this it does not, so
            // a skip shows in every run, not only in failing ones.
            use std::io::Write;
            let _ = writeln!(std::io::stderr(), "SKIPPED {test}: {why}");
            None
        }
    }
}

/// A lazy file system mounted over a temporary backing directory.
pub struct Mounted {
    pub backing: tempfile::TempDir,
    pub mnt: tempfile::TempDir,
    pub control: Control,
    session: Option<fuser::BackgroundSession>,
}

impl Mounted {
    pub fn new() -> Mounted {
        let backing = tempfile::tempdir().unwrap();
        let mnt = tempfile::tempdir().unwrap();
        let (fs, control) = LazyFs::new(backing.path()).unwrap();
        let session = fuser::spawn_mount(fs, mnt.path(), &mount_config()).expect("mount");
        Mounted {
            backing,
            mnt,
            control,
            session: Some(session),
        }
    }

    pub fn m(&self, name: &str) -> PathBuf {
        self.mnt.path().join(name)
    }

    pub fn b(&self, name: &str) -> PathBuf {
        self.backing.path().join(name)
    }

    /// Power loss. Afterwards the mount must not be touched (every operation blocks), so
    /// the test drops its open files first; it is detached, not unmounted.
    pub fn power_loss(&mut self) -> u64 {
        let dropped = self.control.power_loss();
        detach(self.mnt.path());
        std::mem::forget(self.session.take()); // its thread is parked for good
        dropped
    }
}

pub fn detach(mnt: &Path) {
    let _ = nix::mount::umount2(mnt, nix::mount::MntFlags::MNT_DETACH);
}

impl Drop for Mounted {
    fn drop(&mut self) {
        if let Some(s) = self.session.take() {
            s.umount_and_join().expect("unmount");
        }
    }
}

/// Polls `cond` until it holds or `secs` pass; true if it held. For effects the kernel
/// delivers asynchronously (RELEASE follows close(2) in the background).
pub fn wait_until(secs: u64, mut cond: impl FnMut() -> bool) -> bool {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(secs);
    while std::time::Instant::now() < deadline {
        if cond() {
            return true;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    cond()
}
