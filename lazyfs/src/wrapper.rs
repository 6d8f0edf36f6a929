//! The container entrypoint: mount, serve FUSE and the control socket, run the server as a
//! child, forward signals to it, and end with it (or with a power loss).

use std::ffi::OsString;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::UnixListener;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus};

use anyhow::{bail, Context};
use nix::mount::{umount2, MntFlags};
use nix::sys::signal::{kill, SigSet, Signal};
use nix::unistd::Pid;

use crate::fs::{mount_config, Control, LazyFs};

/// The wrapper's exit code after `power-loss` (the child's own codes pass through; this one
/// tells a restart after a simulated power loss apart from a crash of the child).
pub const POWER_LOSS_EXIT_CODE: i32 = 99;

/// Signals a container runtime sends to stop or poke PID 1: passed on to the child.
const FORWARDED: [Signal; 4] = [
    Signal::SIGTERM,
    Signal::SIGINT,
    Signal::SIGHUP,
    Signal::SIGQUIT,
];

#[derive(Debug, Clone)]
pub struct Options {
    pub backing: PathBuf,
    pub mount: PathBuf,
    pub control: PathBuf,
    pub uid: Option<u32>,
    pub gid: Option<u32>,
    pub command: Vec<OsString>,
}

/// Runs until the child ends; returns the exit code to leave with. A power loss exits from
/// the control thread and never returns here.
pub fn run(opts: Options) -> anyhow::Result<i32> {
    let Some((program, args)) = opts.command.split_first() else {
        bail!("no command to run")
    };
    // Before any thread exists, so all inherit the mask and only `sigwait` sees these
    // (the child gets a clean mask: std's spawn resets it).
    let forwarded = SigSet::from_iter(FORWARDED);
    forwarded.thread_block().context("blocking signals")?;

    let (fs, control) = LazyFs::new(&opts.backing)
        .with_context(|| format!("backing directory {}", opts.backing.display()))?;
    let session = mount(fs, &opts.mount)?;
    let listener = bind(&opts.control)?;

    let mut cmd = Command::new(program);
    cmd.args(args);
    if let Some(uid) = opts.uid {
        cmd.uid(uid); // std also drops supplementary groups (setgroups(0)) when root
    }
    if let Some(gid) = opts.gid {
        cmd.gid(gid);
    }
    let mut child = match cmd.spawn() {
        Ok(child) => child,
        Err(e) => {
            let _ = session.umount_and_join();
            return Err(e).with_context(|| format!("starting {}", program.to_string_lossy()));
        }
    };
    let pid = Pid::from_raw(child.id() as i32);
    std::thread::spawn(move || forward_signals(forwarded, pid));
    let mount = opts.mount.clone();
    let ctl = control.clone();
    std::thread::spawn(move || crate::control::serve(listener, ctl, || power_off(pid, &mount)));

    let status = child.wait().context("waiting for the child")?;
    if control.is_frozen() {
        // The power loss killed the child (it freezes first, then kills): its thread ends
        // the process with its own code; this one must not unmount or exit in between.
        loop {
            std::thread::park();
        }
    }
    finish(session, &control, &opts.mount, status)
}

/// Mounts with mount(2) itself (no fusermount, no libfuse). fuser takes EPERM from mount(2)
/// as "try the fusermount helper", which a slim image lacks: the error would then only say
/// "No such file or directory", so the usual causes are named.
fn mount(fs: LazyFs, at: &Path) -> anyhow::Result<fuser::BackgroundSession> {
    std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/fuse")
        .context(
            "opening /dev/fuse (missing in the container, or no device-cgroup rule for c 10:229)",
        )?;
    fuser::spawn_mount(fs, at, &mount_config()).with_context(|| {
        format!(
            "mounting FUSE at {} (ENOENT here usually means mount(2) was refused: no CAP_SYS_ADMIN, \
             or an AppArmor profile that denies mount)",
            at.display()
        )
    })
}

fn bind(path: &Path) -> anyhow::Result<UnixListener> {
    // A socket left by an earlier run (a restart after a power loss) would refuse the bind.
    let _ = std::fs::remove_file(path);
    let listener =
        UnixListener::bind(path).with_context(|| format!("control socket {}", path.display()))?;
    // Only root may cut the power: not the server, which runs as --uid.
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))?;
    Ok(listener)
}

fn forward_signals(set: SigSet, child: Pid) {
    while let Ok(sig) = set.wait() {
        let _ = kill(child, sig);
    }
}

/// The power is gone: the file system is frozen (by the caller), the child dies, the mount
/// is detached (no further write can reach it) and the process ends at once, running no
/// destructor that could write.
fn power_off(child: Pid, mount: &Path) {
    let _ = kill(child, Signal::SIGKILL);
    let _ = umount2(mount, MntFlags::MNT_DETACH);
    eprintln!("msgbench-lazyfs: power loss: child killed, exiting {POWER_LOSS_EXIT_CODE}");
    std::process::exit(POWER_LOSS_EXIT_CODE);
}

/// The child ended on its own: unsynced data is dropped, as LazyFS drops it at unmount (a
/// clean stop that wants its data fsyncs it, as on any disk). Returns the child's code.
fn finish(
    session: fuser::BackgroundSession,
    control: &Control,
    mount: &Path,
    status: ExitStatus,
) -> anyhow::Result<i32> {
    let dropped = control.unsynced_bytes();
    if let Err(e) = session.umount_and_join() {
        // Still in use (a leftover process): detach it so the container can go.
        eprintln!("msgbench-lazyfs: unmount failed ({e}), detaching");
        let _ = umount2(mount, MntFlags::MNT_DETACH);
    }
    let code = status
        .code()
        .unwrap_or_else(|| 128 + status.signal().unwrap_or(0));
    eprintln!("msgbench-lazyfs: child exited ({status}); {dropped} unsynced bytes dropped");
    Ok(code)
}
