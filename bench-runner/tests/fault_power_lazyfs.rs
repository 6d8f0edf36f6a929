//! The fault agent cutting the power of the real msgbench-lazyfs wrapper, as in a server pod:
//! the wrapper runs a stand-in server (`sleep` under a name of its own, started by `sh -c`
//! after an unsynced write); the agent's report carries the bytes the wrapper discarded and the
//! pid of the server the wrapper then killed; the wrapper exits with its power-loss code and
//! the unsynced data never reaches the backing directory.
//!
//! Needs root, a usable /dev/fuse and the built binary (`cargo build -p msgbench-lazyfs`, found
//! next to this test's target directory or at `$MSGBENCH_LAZYFS`); skipped, saying why, without.
mod support;
use bench_runner::fault_agent::FaultAgent;
use bench_runner::fault_power::LazyFsControl;
use bench_runner::fault_process::{find_process, send};
use runner_api::fault_agent::{AgentAction, FaultReport, FaultRequest};
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::time::{Duration, Instant};
use support::*;

/// The wrapper's exit code after a power loss (`msgbench_lazyfs::wrapper::POWER_LOSS_EXIT_CODE`).
const POWER_LOSS_EXIT_CODE: i32 = 99;

/// The wrapper binary, or why this test cannot run here.
fn lazyfs_or_why() -> Result<PathBuf, String> {
    if !rustix::process::geteuid().is_root() {
        return Err("not root: mounting FUSE needs CAP_SYS_ADMIN".into());
    }
    let fuse = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/fuse");
    fuse.map_err(|e| format!("/dev/fuse is not usable: {e}"))?;
    let bin = match std::env::var_os("MSGBENCH_LAZYFS") {
        Some(p) => PathBuf::from(p),
        // target/<profile>/deps/<this test> -> target/<profile>/msgbench-lazyfs
        None => std::env::current_exe()
            .unwrap()
            .parent()
            .unwrap()
            .with_file_name("msgbench-lazyfs"),
    };
    match bin.is_file() {
        true => Ok(bin),
        false => Err(format!(
            "no {} (cargo build -p msgbench-lazyfs)",
            bin.display()
        )),
    }
}

/// The wrapper, killed and its mount detached if the test ends half-way, and its server
/// killed too (an orphan would hold the test's output open, and cargo would wait for it).
struct Wrapper {
    child: Child,
    mnt: PathBuf,
    server: Option<i32>,
}

impl Drop for Wrapper {
    fn drop(&mut self) {
        if self.child.try_wait().ok().flatten().is_none() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
        if let Some(pid) = self.server {
            let _ = send(pid, rustix::process::Signal::KILL);
        }
        let _ = Command::new("umount")
            .arg("-l")
            .arg(&self.mnt)
            .stderr(std::process::Stdio::null())
            .status();
    }
}

/// Polls `cond` (bounded); true if it held.
fn wait_until(limit: Duration, mut cond: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + limit;
    while Instant::now() < deadline {
        if cond() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    cond()
}

/// Field `n` (1-based, as in proc(5)) of `/proc/<pid>/stat`, read after the command name.
fn stat_field(pid: i32, n: usize) -> Option<String> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = stat.rsplit_once(") ")?.1;
    rest.split(' ').nth(n - 3).map(String::from)
}

#[tokio::test]
async fn the_agent_cuts_the_power_of_the_real_wrapper_and_reports_its_child() {
    let bin = match lazyfs_or_why() {
        Ok(bin) => bin,
        Err(why) => {
            // Past libtest's capture, so a skip shows in every run.
            use std::io::Write;
            let _ = writeln!(std::io::stderr(), "SKIPPED agent -> msgbench-lazyfs: {why}");
            return;
        }
    };
    let dir = tempfile::tempdir().unwrap();
    let p = |s: &str| dir.path().join(s);
    for sub in ["backing", "mnt"] {
        std::fs::create_dir(p(sub)).unwrap();
    }
    let name = format!("mbplfs{}", std::process::id() % 100_000);
    std::os::unix::fs::symlink("/bin/sleep", p(&name)).unwrap();
    // 8 bytes written, never fsynced, then the server runs under its own name.
    let script = r#"printf volatile > "$M/b" && exec "$V" 600"#;
    let mut w = Wrapper {
        child: Command::new(bin)
            .args(["--backing".as_ref(), p("backing").as_os_str()])
            .args(["--mount".as_ref(), p("mnt").as_os_str()])
            .args(["--control".as_ref(), p("ctl").as_os_str()])
            .args(["--", "sh", "-c", script])
            .env("M", p("mnt"))
            .env("V", p(&name))
            .spawn()
            .unwrap(),
        mnt: p("mnt"),
        server: None,
    };
    let proc = Path::new("/proc");
    assert!(
        wait_until(Duration::from_secs(20), || find_process(proc, &name)
            .is_ok()),
        "the server never ran under the wrapper"
    );
    let server = find_process(proc, &name).unwrap();
    w.server = Some(server);
    let parent = stat_field(server, 4).unwrap();
    assert_eq!(
        parent,
        w.child.id().to_string(),
        "the server is the wrapper's child"
    );

    let lazyfs = LazyFsControl {
        socket: p("ctl"),
        ..Default::default()
    };
    let agent = FaultAgent::with_lazyfs(&name, proc, test_verifier(), None, lazyfs);
    let addr = serve_fault_agent(agent).await;
    let body = serde_json::to_string(&FaultRequest {
        key: "run/0/1".into(),
        action: AgentAction::PowerLoss,
        not_after_unix_ms: now_ms() + 10_000,
        duration_ms: None,
        partition_from: None,
        repeat: false,
    })
    .unwrap();
    let (code, answer) = http(addr, "POST", "/faults", &body).await;
    assert_eq!(code, 200, "{answer}");
    let report: FaultReport = serde_json::from_str(&answer).unwrap();
    assert_eq!(report.power_loss.unwrap().discarded_bytes, 8, "{answer}");
    assert_eq!(report.signal.unwrap().pid, server, "{answer}");

    assert!(
        wait_until(Duration::from_secs(20), || w
            .child
            .try_wait()
            .unwrap()
            .is_some()),
        "the wrapper did not exit"
    );
    assert_eq!(w.child.wait().unwrap().code(), Some(POWER_LOSS_EXIT_CODE));
    // Killed: gone, or a zombie nobody reaps (the wrapper, its parent, has exited).
    let dead = || stat_field(server, 3).is_none_or(|s| s == "Z");
    assert!(
        wait_until(Duration::from_secs(20), dead),
        "server {server} lives"
    );
    let backing = std::fs::read_to_string(p("backing/b")).unwrap();
    assert_eq!(
        backing, "",
        "the unsynced write reached the backing directory"
    );
}
