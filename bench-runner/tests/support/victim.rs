//! A stand-in for a server process: `sleep` under the server's name, for the fault agent to find.
use std::path::Path;
use std::process::{Child, Command};
use std::time::Duration;

/// `sleep` under a name of its own (the process name is the name it was executed by), running.
/// The caller waits on it (every test kills or reaps its victims). A symlink, not a copy: a copy
/// is written through a descriptor that a concurrent test's fork inherits until its exec, and
/// executing a file open for writing fails with ETXTBSY.
#[allow(clippy::zombie_processes)]
pub fn victim(dir: &Path, name: &str) -> Child {
    let bin = dir.join(name);
    if !bin.exists() {
        std::os::unix::fs::symlink("/bin/sleep", &bin).expect("symlink /bin/sleep");
    }
    let child = Command::new(&bin).arg("60").spawn().expect("spawn");
    // The kernel names it at exec: wait for that (bounded), so the agent is asked only then.
    let comm = format!("/proc/{}/comm", child.id());
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    loop {
        let now = std::fs::read_to_string(&comm).unwrap_or_default();
        if now.trim_end() == name {
            return child;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "{comm}: {now:?}, not {name}"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}
