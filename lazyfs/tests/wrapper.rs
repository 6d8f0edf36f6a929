//! The `msgbench-lazyfs` binary as a container would run it, with real child commands.

mod common;

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus};
use std::time::{Duration, Instant};

use common::{detach, or_skip, wait_until};
use msgbench_lazyfs::control::ask;
use msgbench_lazyfs::wrapper::POWER_LOSS_EXIT_CODE;

/// A running wrapper over fresh dirs; killed and detached if a test fails half-way.
struct Wrapper {
    dir: tempfile::TempDir,
    child: Child,
}

impl Wrapper {
    /// Starts the wrapper with `sh -c script` as its child ($M: the mount, $T: a scratch dir
    /// outside it) and waits for its control socket.
    fn start(extra: &[&str], script: &str) -> Wrapper {
        let dir = tempfile::tempdir().unwrap();
        for sub in ["backing", "mnt", "scratch"] {
            std::fs::create_dir(dir.path().join(sub)).unwrap();
            // The child may run as another uid: let it in.
            std::fs::set_permissions(dir.path().join(sub), PermissionsExt::from_mode(0o777))
                .unwrap();
        }
        std::fs::set_permissions(dir.path(), PermissionsExt::from_mode(0o755)).unwrap();
        let p = |s: &str| dir.path().join(s);
        let child = Command::new(env!("CARGO_BIN_EXE_msgbench-lazyfs"))
            .arg("--backing")
            .arg(p("backing"))
            .arg("--mount")
            .arg(p("mnt"))
            .arg("--control")
            .arg(p("ctl"))
            .args(extra)
            .args(["--", "sh", "-c", script])
            .env("M", p("mnt"))
            .env("T", p("scratch"))
            .spawn()
            .unwrap();
        let w = Wrapper { dir, child };
        assert!(
            wait_until(20, || w.path("ctl").exists()),
            "no control socket"
        );
        w
    }

    fn path(&self, s: &str) -> PathBuf {
        self.dir.path().join(s)
    }

    fn ask(&self, request: &str) -> String {
        ask(&self.path("ctl"), request).unwrap()
    }

    /// Waits (bounded) for the wrapper to exit.
    fn exit(&mut self, secs: u64) -> ExitStatus {
        let deadline = Instant::now() + Duration::from_secs(secs);
        while Instant::now() < deadline {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        panic!("the wrapper did not exit within {secs}s");
    }

    fn read(&self, rel: &str) -> String {
        std::fs::read_to_string(self.path(rel)).unwrap()
    }
}

impl Drop for Wrapper {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        detach(&self.path("mnt"));
    }
}

fn mounted(mnt: &Path) -> bool {
    let mounts = std::fs::read_to_string("/proc/self/mounts").unwrap();
    mounts
        .lines()
        .any(|l| l.split(' ').nth(1) == Some(mnt.to_str().unwrap()))
}

fn gone(pid: &str) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        Ok(stat) => stat
            .rsplit(')')
            .next()
            .unwrap()
            .trim_start()
            .starts_with('Z'),
    }
}

#[test]
fn power_loss_keeps_what_the_child_fsynced_and_kills_it() {
    let Some(()) = or_skip("power_loss_keeps_what_the_child_fsynced_and_kills_it") else {
        return;
    };
    // a: dd conv=fsync (durable); b: plain shell redirect (never synced); then park.
    let script = r#"cd "$M" && printf durable | dd of=a conv=fsync status=none &&
        printf volatile > b && echo $$ > "$T/pid" && exec sleep 600"#;
    let mut w = Wrapper::start(&[], script);
    assert!(
        wait_until(20, || w.path("scratch/pid").exists()),
        "the child never got ready"
    );
    assert_eq!(w.ask("status"), "unsynced_bytes=8");
    assert_eq!(w.ask("nonsense"), "error=unknown command");
    assert_eq!(w.ask("power-loss"), "discarded_bytes=8");
    assert_eq!(w.exit(20).code(), Some(POWER_LOSS_EXIT_CODE));
    assert_eq!(w.read("backing/a"), "durable");
    assert_eq!(
        w.read("backing/b"),
        "",
        "created (names are durable at once), data lost"
    );
    let pid = w.read("scratch/pid");
    assert!(
        wait_until(20, || gone(pid.trim())),
        "child {pid} still alive"
    );
    assert!(!mounted(&w.path("mnt")), "the mount was left behind");
}

#[test]
fn the_childs_exit_code_passes_through_and_the_mount_goes() {
    let Some(()) = or_skip("the_childs_exit_code_passes_through_and_the_mount_goes") else {
        return;
    };
    let script = r#"printf kept > "$M/k" && sync "$M/k" && printf dropped > "$M/d"; exit 3"#;
    let mut w = Wrapper::start(&[], script);
    assert_eq!(w.exit(20).code(), Some(3));
    assert!(!mounted(&w.path("mnt")));
    assert_eq!(w.read("backing/k"), "kept", "sync FILE fsyncs it");
    assert_eq!(
        w.read("backing/d"),
        "",
        "a normal exit drops unsynced data, as LazyFS does"
    );
}

#[test]
fn sigterm_reaches_the_child() {
    let Some(()) = or_skip("sigterm_reaches_the_child") else {
        return;
    };
    let script = r#"trap 'exit 7' TERM; : > "$T/ready"; while :; do sleep 0.05; done"#;
    let mut w = Wrapper::start(&[], script);
    assert!(wait_until(20, || w.path("scratch/ready").exists()));
    let pid = nix::unistd::Pid::from_raw(w.child.id() as i32);
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM).unwrap();
    let status = w.exit(20);
    assert_eq!((status.code(), status.signal()), (Some(7), None));
    assert!(!mounted(&w.path("mnt")));
}

#[test]
fn the_child_runs_as_uid_and_gid_and_owns_what_it_creates() {
    let Some(()) = or_skip("the_child_runs_as_uid_and_gid_and_owns_what_it_creates") else {
        return;
    };
    let script =
        r#"id -u > "$T/id"; id -G >> "$T/id"; mkdir "$M/d" && printf x > "$M/d/f"; exit 0"#;
    let mut w = Wrapper::start(&["--uid", "65534", "--gid", "65533"], script);
    assert_eq!(w.exit(20).code(), Some(0));
    assert_eq!(
        w.read("scratch/id"),
        "65534\n65533\n",
        "no supplementary groups left (root's 0)"
    );
    for made in ["backing/d", "backing/d/f"] {
        let md = std::fs::metadata(w.path(made)).unwrap();
        assert_eq!((md.uid(), md.gid()), (65534, 65533), "{made}");
    }
    let ctl = std::fs::metadata(w.path("ctl")).unwrap();
    assert_eq!(ctl.mode() & 0o777, 0o600, "only root may cut the power");
}
