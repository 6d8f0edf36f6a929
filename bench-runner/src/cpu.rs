//! The runner's own CPU time, from /proc/self/stat (utime + stime), to report CPU per million
//! messages and to flag a generator that ran out of CPU.
pub fn process_cpu_seconds() -> Option<f64> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    // Fields after the parenthesised command name; utime and stime are fields 14 and 15.
    let rest = &stat[stat.rfind(')')? + 2..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    let utime: f64 = f.get(11)?.parse().ok()?;
    let stime: f64 = f.get(12)?.parse().ok()?;
    Some((utime + stime) / 100.0) // USER_HZ is 100 on Linux
}

/// CPUs this process may use (cgroup quota if any, else the affinity set).
pub fn available_cpus() -> f64 {
    if let Ok(s) = std::fs::read_to_string("/sys/fs/cgroup/cpu.max") {
        let mut it = s.split_whitespace();
        if let (Some(q), Some(p)) = (it.next(), it.next()) {
            if let (Ok(q), Ok(p)) = (q.parse::<f64>(), p.parse::<f64>()) {
                return q / p;
            }
        }
    }
    std::thread::available_parallelism()
        .map(|n| n.get() as f64)
        .unwrap_or(1.0)
}

#[cfg(test)]
mod tests {
    #[test]
    fn cpu_time_grows_with_work() {
        let a = super::process_cpu_seconds().expect("/proc/self/stat readable");
        let mut x = 0u64;
        let t = std::time::Instant::now();
        while t.elapsed().as_millis() < 150 {
            x = x.wrapping_mul(31).wrapping_add(7);
        }
        std::hint::black_box(x);
        let b = super::process_cpu_seconds().unwrap();
        assert!(b > a, "{a} -> {b}");
    }
}
