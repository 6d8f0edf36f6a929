//! msgbench-lazyfs: a lazy FUSE file system (a LazyFS equivalent, issue 46). It answers "does
//! a server lose acknowledged messages when the whole cluster loses power?" by keeping every
//! write that was not fsynced in its own memory, where a power loss throws it away.
//!
//! # Model (LazyFS's, dsrhaslab/lazyfs, read from its sources and unit tests)
//! - Passthrough over a backing directory (one file system: inodes are its st_ino).
//! - Data: `write` goes to an in-memory cache, per backing inode, by byte range (`cache`).
//!   Reads merge it over the backing file; getattr reports the cached size. It reaches the
//!   backing file only on fsync or fdatasync of that file (both write data and size, then
//!   fsync the backing file). O_SYNC/O_DSYNC writes are synced too: the kernel sends its own
//!   FSYNC after each (tested). close(2) persists nothing; neither does sync(2)/syncfs(2)
//!   (tested: fuser has no syncfs callback). sync_file_range(2) has no FUSE request at all:
//!   the kernel only writes back its own page cache, which holds nothing dirty here (no
//!   writeback cache), so it makes nothing durable (as in LazyFS; not tested, reasoned).
//! - Truncate, O_TRUNC and fallocate (mode 0 only): a cached size change like a write; a
//!   shrink hides the backing bytes past it, a grow reads zeros; on fsync the backing file is
//!   cut and resized. A power loss undoes an unsynced truncate either way (LazyFS's
//!   SimpleTruncate test: truncate to 4096, clear cache, size is 0 again).
//! - create, mkdir, mknod, symlink, link, unlink, rmdir, rename, chmod, chown, utimes: on the
//!   backing directory at once, so durable at once (LazyFS caches file data only). This is
//!   kinder than ext4, where a new name needs a directory fsync: a loss found here is real.
//! - rename of a file with unsynced data: the new name is durable at once; the data follows
//!   the inode (cache keyed by inode, as LazyFS renames its cache entry), so after a power
//!   loss the new name holds the file's last synced bytes. A file replaced by the rename, and
//!   an unlinked file, lose their unsynced data once their last name and last open handle
//!   are gone (nothing can reach it any more; LazyFS drops it at unlink).
//! - Not done: RENAME_EXCHANGE/WHITEOUT (EINVAL), xattrs, copy_file_range and lseek (ENOSYS,
//!   the kernel falls back), other fallocate modes (EOPNOTSUPP); timestamps are the backing
//!   file's (cached writes do not move mtime).
//!
//! # Power loss and freeze
//! `fs::Control::power_loss` takes the state lock (waiting for an operation under way, so a
//! sync is wholly before the instant or not at all), freezes, and drops every unsynced byte
//! and size change. Every later operation parks for good before touching anything.
//!
//! # The wrapper (`msgbench-lazyfs`, a container's entrypoint; `wrapper`, `control`)
//! `msgbench-lazyfs --backing DIR --mount DIR --control SOCKET [--uid U --gid G] -- CMD...`
//! mounts (allow_other, default_permissions), spawns CMD (as U/G if given; std also drops
//! supplementary groups), forwards SIGTERM/INT/HUP/QUIT to it, and answers on the socket
//! (mode 0600): `status` → `unsynced_bytes=N`; `power-loss` → `discarded_bytes=N`, then
//! SIGKILL to CMD, lazy detach of the mount and exit 99 (`POWER_LOSS_EXIT_CODE`) at once.
//! When CMD exits by itself the wrapper unmounts and exits with its code (128+signal if
//! killed); unsynced data is then dropped, as LazyFS drops it (a clean stop that wants its
//! data fsyncs it). The wrapper does not reap orphaned grandchildren.
//!
//! # What a pod needs, and why
//! The wrapper and the server share one container and so one mount namespace: no mount
//! propagation. Checked here (root, /dev/fuse, kernel 6.18) by the tests; checked in
//! sources only (runc HEAD 2026-08 "1.5.0-rc.1+dev", containerd HEAD 2026-08, Kubernetes
//! docs), never on a cluster:
//! - /dev/fuse in the container *and* a device-cgroup rule allowing c 10:229. runc's default
//!   allowlist does NOT include fuse (dropped in 2016, runc 1.0.0-rc2, "Do not create
//!   /dev/fuse by default"; today: null, zero, full, random, urandom, tty, ptmx, pts, tun,
//!   and mknod only for the rest), and containerd's CRI spec starts from deny-all. So a
//!   hostPath CharDevice alone gives EPERM on open. Built-in ways to get the rule:
//!   `privileged: true` (containerd then also passes every host device, so no hostPath is
//!   needed, unless its runtime sets privileged_without_host_devices), or a device plugin /
//!   CDI that hands out /dev/fuse. (Source reading; unverified on a cluster.)
//! - CAP_SYS_ADMIN: mount(2) and umount2(2) of the FUSE file system (fuser mounts itself,
//!   no fusermount/libfuse: tested as root here).
//! - AppArmor: containerd's default profile has `deny mount,` (it allows `umount`), so a
//!   non-privileged container needs `appArmorProfile: Unconfined` where AppArmor is on. A
//!   privileged one gets no AppArmor profile for RuntimeDefault.
//! - seccomp RuntimeDefault: containerd's default profile allows mount/umount/umount2 when
//!   the container has CAP_SYS_ADMIN, so RuntimeDefault can stay (a privileged container
//!   gets no seccomp profile at all).
//! - Run the wrapper as root: it serves files it hands over to the server's uid and keeps
//!   working on them, so it needs CAP_CHOWN (chown of what the server creates), CAP_FOWNER
//!   and CAP_DAC_OVERRIDE (chmod/utimes/open of files it does not own), CAP_SETUID and
//!   CAP_SETGID (to start the server as --uid/--gid), CAP_KILL (signals to a child of
//!   another uid). All but SYS_ADMIN are in containerd's default set (pkg/oci defaultUnixCaps).
//! - allowPrivilegeEscalation must not be false with privileged (API validation), and the
//!   namespace must admit the Pod Security "privileged" level (baseline forbids hostPath,
//!   SYS_ADMIN and privileged).
//! - The node's kernel must have FUSE (module or built in), and the wrapper's memory limit
//!   must hold all data the server writes between two fsyncs.
//!
//! No unsafe code: fuser and nix wrap the system calls.
#![forbid(unsafe_code)]

pub mod backing;
pub mod cache;
pub mod control;
pub mod fs;
pub mod inodes;
pub mod wrapper;
