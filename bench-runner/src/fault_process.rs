//! The fault agent's hands on its pod: the server process (found by name under `/proc`,
//! signalled, seen stopped) and the wall clock its reports carry. Below `fault_agent` (the
//! HTTP face) and `fault_state` (the traces a fault leaves).
use std::path::Path;

/// Now on the wall clock, milliseconds since the Unix epoch: the operator compares reports'
/// times with its own clock.
pub fn unix_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// Sends `signal` to `pid`.
pub fn send(pid: i32, signal: rustix::process::Signal) -> Result<(), String> {
    let pid = rustix::process::Pid::from_raw(pid).ok_or("pid 0")?;
    rustix::process::kill_process(pid, signal).map_err(|e| e.to_string())
}

/// The one process named `name` under `proc_root` (not this agent). Two of them is an error:
/// the agent never guesses which one to kill.
pub fn find_process(proc_root: &Path, name: &str) -> Result<i32, String> {
    let me = std::process::id() as i32;
    let entries =
        std::fs::read_dir(proc_root).map_err(|e| format!("{}: {e}", proc_root.display()))?;
    let found: Vec<i32> = entries
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter(|&pid| pid != me)
        .filter(|pid| {
            std::fs::read_to_string(proc_root.join(pid.to_string()).join("comm"))
                .is_ok_and(|c| c.trim_end() == name)
        })
        .collect();
    match found[..] {
        [pid] => Ok(pid),
        [] => Err(format!(
            "no process named {name:?} in this pod (is the server running? the pod must share \
             its process namespace)"
        )),
        _ => Err(format!(
            "{} processes named {name:?}: {found:?}",
            found.len()
        )),
    }
}

/// Whether `pid` is stopped by a signal (state `T` in `/proc/<pid>/stat`; the state follows the
/// command name, which may hold spaces and parentheses, so it is read after the last `) `).
pub fn stopped(proc_root: &Path, pid: i32) -> Option<bool> {
    let stat = std::fs::read_to_string(proc_root.join(pid.to_string()).join("stat")).ok()?;
    let state = stat.rsplit_once(") ")?.1.chars().next()?;
    Some(state == 'T')
}
