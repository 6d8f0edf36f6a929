//! How much CPU this process may use: the cgroup quota (v2 `cpu.max`, v1 `cfs_quota_us`) and the
//! affinity mask. Tokio's default (one worker per visible core) oversubscribes a pod limited to
//! 1 CPU on a 64-core node; sizing from the quota avoids that (cf. nats-server #2586).
use std::fs;
use std::path::Path;

/// CPU limit in cores from a cgroup v2 `cpu.max` line ("max 100000" or "150000 100000").
pub fn parse_cpu_max(line: &str) -> Option<f64> {
    let mut it = line.split_whitespace();
    let quota = it.next()?;
    let period: f64 = it.next().unwrap_or("100000").parse().ok()?;
    if quota == "max" || period <= 0.0 {
        return None;
    }
    let q: f64 = quota.parse().ok()?;
    (q > 0.0).then(|| q / period)
}

/// CPU limit in cores from cgroup v1 quota/period files (quota -1 means unlimited).
pub fn parse_cfs(quota: &str, period: &str) -> Option<f64> {
    let q: i64 = quota.trim().parse().ok()?;
    let p: i64 = period.trim().parse().ok()?;
    (q > 0 && p > 0).then(|| q as f64 / p as f64)
}

/// The cgroup CPU limit of this process, if any, read under `root` (normally `/sys/fs/cgroup`).
pub fn cgroup_cpu_limit(root: &Path) -> Option<f64> {
    // cgroup v2: the process's own group from /proc/self/cgroup ("0::/path"), then the root.
    let own = fs::read_to_string("/proc/self/cgroup").ok().and_then(|s| {
        s.lines()
            .find_map(|l| l.strip_prefix("0::").map(str::to_owned))
    });
    let mut candidates = Vec::new();
    if let Some(p) = own {
        candidates.push(root.join(p.trim_start_matches('/')).join("cpu.max"));
    }
    candidates.push(root.join("cpu.max"));
    for c in candidates {
        if let Ok(s) = fs::read_to_string(&c) {
            return parse_cpu_max(&s);
        }
    }
    for dir in ["cpu,cpuacct", "cpu"] {
        let d = root.join(dir);
        if let (Ok(q), Ok(p)) = (
            fs::read_to_string(d.join("cpu.cfs_quota_us")),
            fs::read_to_string(d.join("cpu.cfs_period_us")),
        ) {
            return parse_cfs(&q, &p);
        }
    }
    None
}

/// CPUs in this process's affinity mask (what a static CPU manager pinned us to).
pub fn cpus_allowed() -> usize {
    fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines().find_map(|l| {
                l.strip_prefix("Cpus_allowed_list:")
                    .map(|v| count_cpu_list(v.trim()))
            })
        })
        .filter(|&n| n > 0)
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
}

/// Counts CPUs in a list such as "0-3,6,8-9".
pub fn count_cpu_list(list: &str) -> usize {
    list.split(',')
        .filter_map(|part| {
            let part = part.trim();
            match part.split_once('-') {
                Some((a, b)) => Some(b.parse::<usize>().ok()? + 1 - a.parse::<usize>().ok()?),
                None => part.parse::<usize>().ok().map(|_| 1),
            }
        })
        .sum()
}

/// Worker threads: the explicit setting, else the quota rounded up, never more than the CPUs
/// we may run on and never fewer than one.
pub fn worker_threads(explicit: Option<usize>, limit: Option<f64>, allowed: usize) -> usize {
    if let Some(n) = explicit {
        return n;
    }
    let by_quota = limit.map_or(allowed, |l| l.ceil() as usize);
    by_quota.clamp(1, allowed.max(1))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cgroup_v2_and_v1_quotas() {
        assert_eq!(parse_cpu_max("max 100000\n"), None);
        assert_eq!(parse_cpu_max("150000 100000\n"), Some(1.5));
        assert_eq!(parse_cpu_max("50000 100000"), Some(0.5));
        assert_eq!(parse_cfs("-1", "100000"), None);
        assert_eq!(parse_cfs("200000\n", "100000\n"), Some(2.0));
    }

    #[test]
    fn cpu_lists_and_thread_sizing() {
        assert_eq!(count_cpu_list("0-3,6,8-9"), 7);
        assert_eq!(count_cpu_list("1"), 1);
        assert_eq!(worker_threads(Some(5), Some(1.0), 2), 5);
        assert_eq!(worker_threads(None, Some(1.5), 8), 2);
        assert_eq!(worker_threads(None, Some(0.1), 8), 1);
        assert_eq!(worker_threads(None, Some(16.0), 4), 4);
        assert_eq!(worker_threads(None, None, 3), 3);
    }

    #[test]
    fn reads_a_fake_cgroup_tree() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("cpu.max"), "250000 100000\n").unwrap();
        // The process's own group path does not exist under the fake root, so the root file counts.
        assert_eq!(cgroup_cpu_limit(dir.path()), Some(2.5));
        let v1 = tempfile::tempdir().unwrap();
        std::fs::create_dir(v1.path().join("cpu")).unwrap();
        std::fs::write(v1.path().join("cpu/cpu.cfs_quota_us"), "100000").unwrap();
        std::fs::write(v1.path().join("cpu/cpu.cfs_period_us"), "100000").unwrap();
        assert_eq!(cgroup_cpu_limit(v1.path()), Some(1.0));
    }
}
