//! Parsing what the toolbox prints from /proc inside a pod.
use anyhow::{ensure, Result};
use std::collections::BTreeMap;

/// Expand a Linux CPU list ("1", "0-1,3") into CPU numbers.
pub fn cpu_list(s: &str) -> Result<Vec<u32>> {
    let mut cpus = Vec::new();
    for part in s.trim().split(',').filter(|p| !p.is_empty()) {
        match part.split_once('-') {
            Some((a, b)) => cpus.extend(a.trim().parse::<u32>()?..=b.trim().parse::<u32>()?),
            None => cpus.push(part.trim().parse()?),
        }
    }
    ensure!(!cpus.is_empty(), "empty CPU list {s:?}");
    Ok(cpus)
}

/// Lines of "some key words <value>" -> {"some key words": "<value>"} (value = last field).
pub fn last_field_map(out: &str) -> BTreeMap<String, String> {
    out.lines()
        .filter_map(|l| l.trim().rsplit_once(char::is_whitespace))
        .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_lists_expand_ranges_and_reject_garbage() {
        assert_eq!(cpu_list("1").unwrap(), vec![1]);
        assert_eq!(cpu_list("0-2,5\n").unwrap(), vec![0, 1, 2, 5]);
        assert!(cpu_list("").is_err());
        assert!(cpu_list("a-b").is_err());
    }

    #[test]
    fn last_field_map_splits_on_the_last_whitespace() {
        let m = last_field_map("server Cpus_allowed_list:\t1\nsysctl net.core.somaxconn 8192\n");
        assert_eq!(
            m.get("server Cpus_allowed_list:").map(String::as_str),
            Some("1")
        );
        assert_eq!(
            m.get("sysctl net.core.somaxconn").map(String::as_str),
            Some("8192")
        );
    }
}
