//! The thin FUSE adapter: a passthrough over a backing directory whose file data goes
//! through the lazy `Cache`. Namespace and metadata changes reach the backing directory at
//! once; data reaches it only on fsync/fdatasync. All state sits behind one mutex, so every
//! operation is atomic with respect to a power loss (`Control::power_loss`).

mod attr;
mod data;
mod names;
mod ops;

use std::collections::{HashMap, HashSet};
use std::fs::{File, Metadata};
use std::io;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use fuser::Errno;

use crate::cache::{Cache, FileKey};
use crate::inodes::Inodes;

type R<T> = Result<T, Errno>;

/// An open regular file: the backing handle the cache reads, syncs and sizes through.
#[derive(Debug)]
struct Handle {
    file: File,
    key: FileKey,
}

#[derive(Debug)]
struct State {
    cache: Cache,
    inodes: Inodes,
    handles: HashMap<u64, Handle>,
    next_fh: u64,
    /// Unlinked files still open somewhere: their cache goes when the last handle does.
    orphans: HashSet<FileKey>,
    frozen: bool,
}

#[derive(Debug)]
struct Shared {
    root: PathBuf,
    dev: u64,
    state: Mutex<State>,
}

/// The file system handed to fuser.
#[derive(Debug)]
pub struct LazyFs {
    shared: Arc<Shared>,
}

/// The power switch: reads the unsynced byte count, or cuts the power.
#[derive(Debug, Clone)]
pub struct Control {
    shared: Arc<Shared>,
}

impl LazyFs {
    /// A lazy file system over `backing` (a directory on one file system), and its control.
    pub fn new(backing: &Path) -> io::Result<(LazyFs, Control)> {
        let root = backing.canonicalize()?;
        let md = std::fs::metadata(&root)?;
        if !md.is_dir() {
            return Err(io::Error::other(format!(
                "{} is not a directory",
                root.display()
            )));
        }
        let state = State {
            cache: Cache::new(),
            inodes: Inodes::new(md.ino()),
            handles: HashMap::new(),
            next_fh: 1,
            orphans: HashSet::new(),
            frozen: false,
        };
        let shared = Arc::new(Shared {
            root,
            dev: md.dev(),
            state: Mutex::new(state),
        });
        Ok((
            LazyFs {
                shared: shared.clone(),
            },
            Control { shared },
        ))
    }

    /// The state for one operation. Once frozen, every operation stops here for good (its
    /// thread parks) before touching anything. The lock is let go first, so the control
    /// side can still answer.
    fn state(&self) -> MutexGuard<'_, State> {
        let st = self
            .shared
            .state
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if st.frozen {
            drop(st);
            loop {
                std::thread::park();
            }
        }
        st
    }

    fn abs(&self, rel: &Path) -> PathBuf {
        self.shared.root.join(rel)
    }

    fn key(&self, md: &Metadata) -> FileKey {
        FileKey {
            dev: md.dev(),
            ino: md.ino(),
        }
    }
}

/// How to mount: other users may enter (the server runs as another uid than this root
/// daemon), and the kernel checks their permissions from the mode bits (default_permissions),
/// since the daemon itself could open anything. Exec stays allowed (fuser defaults nodev,
/// nosuid). One request thread: every operation takes the one lock anyway.
pub fn mount_config() -> fuser::Config {
    let mut config = fuser::Config::default();
    config.mount_options = vec![
        fuser::MountOption::FSName("msgbench-lazyfs".into()),
        fuser::MountOption::DefaultPermissions,
    ];
    config.acl = fuser::SessionACL::All;
    config
}

impl State {
    fn rel_path(&self, ino: u64) -> R<PathBuf> {
        self.inodes
            .path(ino)
            .map(Path::to_path_buf)
            .ok_or(Errno::ENOENT)
    }

    fn handle(&self, fh: u64) -> R<&Handle> {
        self.handles.get(&fh).ok_or(Errno::EBADF)
    }

    fn open_count(&self, key: FileKey) -> usize {
        self.handles.values().filter(|h| h.key == key).count()
    }

    /// The last name of `key` is gone: its unsynced data can no longer be reached by a new
    /// open, so it goes now, or with the last open handle.
    fn unlinked(&mut self, key: FileKey) {
        if self.open_count(key) == 0 {
            self.cache.forget(key);
        } else {
            self.orphans.insert(key);
        }
    }
}

impl Control {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.shared
            .state
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// Data bytes written and not yet synced.
    pub fn unsynced_bytes(&self) -> u64 {
        self.lock().cache.unsynced_bytes()
    }

    /// Power loss: from this instant no operation runs (they block), and everything not yet
    /// synced is dropped. Returns the data bytes dropped. Waits for an operation under way
    /// to finish first, so a sync is either wholly before the power loss or not at all.
    pub fn power_loss(&self) -> u64 {
        let mut st = self.lock();
        st.frozen = true;
        // What was lost, by file, on stderr (the container's log): which of the server's
        // files it had not synced is what a reader of the record wants to know next.
        for (key, bytes) in st.cache.unsynced_by_file().iter().take(12) {
            let ino = st.inodes.fuse_ino(key.ino);
            let path = st.inodes.path(ino).map(|p| p.display().to_string());
            let path = path.unwrap_or_else(|| format!("inode {}", key.ino));
            eprintln!("msgbench-lazyfs: power loss: {bytes} unsynced bytes of {path}");
        }
        st.cache.discard()
    }

    /// Whether `power_loss` has happened (nothing runs any more).
    pub fn is_frozen(&self) -> bool {
        self.lock().frozen
    }

    /// The backing root's device (the backing directory must be one file system).
    pub fn backing_dev(&self) -> u64 {
        self.shared.dev
    }
}
